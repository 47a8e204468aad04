"""The feedback store's quotas by token class (``docs/feedback.md``): tokenless ``remember``
writes into a smaller quota per model that never evicts what authenticated clients stored;
every quota within its bytes; saved and read back with its class."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time

import numpy as np
import orjson
import scipy.sparse as sp

from svmstream.app.models.feedback_memory import MemoryStore
from svmstream.app.models.feedback_store import RowBatch, belongs, encode_row


def _records(n, model="m", generation="g1", d=8):
    X = np.arange(n * d, dtype=float).reshape(n, d)
    decision = X[:, 0].copy()
    return [encode_row(model, 1, time.time(), X, i, b"1", decision, None, generation) for i in range(n)]


def test_tokenless_records_never_evict_authenticated_ones(tmp_path):
    store = MemoryStore(3600, 400_000, tmp_path / "store.json")
    mine = store.put(_records(100), model="m", authenticated=True)
    for _ in range(200):  # 20,000 tokenless rows, far past every bound
        store.put(_records(100), model="m", authenticated=False)
    assert all(r is not None for r in store.get(mine, model="m"))
    stats = store.stats()
    assert stats["bytes"] <= 400_000 and stats["open_bytes"] <= store.open_model_bytes
    assert stats["open_evicted"] > 0 and stats["evicted"] == stats["open_evicted"]


def test_one_models_tokenless_rows_stay_within_its_quota_and_all_within_theirs():
    store = MemoryStore(3600, 1_600_000, open_total_bytes=200_000, open_model_bytes=80_000)
    for model in ("a", "b", "c", "d"):
        for _ in range(20):
            store.put(_records(50, model), model=model, authenticated=False)
            assert store.open_bytes <= 200_000
        assert store._open[model].bytes <= 80_000
    latest = store.put(_records(5, "a"), model="a", authenticated=False)
    assert all(r is not None for r in store.get(latest, model="a"))
    assert store.get(latest) == [None] * 5  # a tokenless record is found with its model


def test_authenticated_records_evict_only_among_themselves():
    store = MemoryStore(3600, 2_000_000, open_total_bytes=400_000, open_model_bytes=400_000)
    tokenless = store.put(_records(10), model="m", authenticated=False)
    first = store.put(_records(100), model="m")
    while store.evicted == 0:  # authenticated rows until the oldest of them go
        last = store.put(_records(100), model="m")
    assert store.get(first, model="m") == [None] * 100  # the oldest authenticated went first
    assert all(r is not None for r in store.get(last, model="m"))
    assert all(r is not None for r in store.get(tokenless, model="m"))
    assert store.stats()["bytes"] <= 2_000_000 and store._auth.bytes <= 1_600_000


def test_quotas_survive_a_save_and_a_restart(tmp_path):
    path = tmp_path / "store.json"
    store = MemoryStore(3600, 1_000_000, path)
    auth = store.put(_records(3), model="m")
    anon = store.put(_records(2), model="m", authenticated=False)
    assert store.save()
    again = MemoryStore(3600, 1_000_000, path)
    assert again.get(auth, model="m") == store.get(auth, model="m")
    assert again.get(anon, model="m") == store.get(anon, model="m") and again.open_bytes == store.open_bytes


def test_a_record_belongs_to_its_model_and_generation_only():
    rec = _records(1, "m", "g1")[0]
    assert belongs(rec, "m", "g1")
    assert not belongs(rec, "m", "g2") and not belongs(rec, "other", "g1") and not belongs(None, "m", "g1")
    legacy = _records(1, "m", None)[0]
    assert belongs(legacy, "m", None) and not belongs(legacy, "m", "g1")


def test_a_packed_batch_holds_exactly_the_records_of_encode_row():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5, 4))
    decision = rng.normal(size=(5, 3))
    proba = (["a", "b", "c"], rng.random((5, 3)))
    Xs = sp.csr_matrix(np.where(X > 0, X, 0.0))
    for rows, pr, gen in ((X, proba, "g1"), (X, None, None), (Xs, proba, None), (Xs, None, "g2")):
        labels = [orjson.dumps(v) for v in ["a", 1, None, "b", 2.5]]
        batch = RowBatch("m", 3, 12.5, rows, labels, decision, pr, gen)
        store = MemoryStore(3600, 1 << 20)
        ids = store.put_batch(batch, model="m")
        expected = [encode_row("m", 3, 12.5, rows, i, labels[i], decision, pr, gen) for i in range(5)]
        assert store.get(ids, model="m") == expected == batch.records()


def test_forged_and_foreign_ids_find_nothing():
    store = MemoryStore(3600, 1 << 20)
    [rid] = store.put(_records(1), model="a", authenticated=False)
    raw = bytearray(base64.urlsafe_b64decode(rid))
    raw[0] ^= 1  # another tag at the same place
    forged = base64.urlsafe_b64encode(bytes(raw)).decode()
    assert store.get([rid, forged, "x" * 32, "", 7], model="a")[1:] == [None] * 4
    assert store.get([rid], model="b") == [None] and store.get([rid], model="a")[0] is not None


def test_records_expire_with_their_chunk():
    store = MemoryStore(10, 1 << 20)
    old = store.put(_records(3), now=1000.0, model="m")
    assert store.get(old, now=1005.0, model="m")[0] is not None
    assert store.get(old, now=1011.0, model="m") == [None] * 3
    store.put(_records(1), now=1011.0, model="m")
    assert store.expired == 3 and store._open == {} and len(store._auth.chunks) == 1


_ACCOUNT = """
import gc, json, sys, time, tracemalloc
import numpy as np, psutil
from svmstream.app.models.feedback_memory import MemoryStore
from svmstream.app.models.feedback_store import RowBatch
bound = 16 << 20
store = MemoryStore(86400, 2 * bound, open_total_bytes=bound, open_model_bytes=bound)
rng = np.random.default_rng(0)
def batch():
    X = rng.normal(size=(1000, 22))
    junk = [list(row) for row in X]  # a request's short-lived objects between the records
    return RowBatch("m", 7, time.time(), X, [b"1"] * 1000, X[:, :2], (["a", "b"], X[:, :2]), "g")
for _ in range(20):  # the short-lived objects' own high-water mark, before measuring
    batch()
gc.collect()
rss0 = psutil.Process().memory_info().rss
for _ in range(150):  # 150,000 rows, about 3 times what the quota holds
    store.put_batch(batch(), model="m", authenticated=False)
gc.collect()
rss = psutil.Process().memory_info().rss - rss0
tracemalloc.start()
for _ in range(30):
    store.put_batch(batch(), model="m", authenticated=False)
gc.collect()
traced = tracemalloc.get_traced_memory()[0]
tracemalloc.stop()
stats = store.stats()
print(json.dumps({"rss": rss, "traced": traced, **stats}))
"""


def test_the_counted_bytes_are_the_stores_memory():
    """Past its bound, the tokenless quota holds exactly its counted bytes: its records hold no
    Python object (traced allocations under 1 % of the bound), and the process grows by the
    bound within 10 % (RSS measured in a fresh process; no timing involved)."""
    out = subprocess.run([sys.executable, "-c", _ACCOUNT], capture_output=True, text=True, check=True)
    figures = json.loads(out.stdout)
    bound = 16 << 20
    assert figures["evicted"] > 0 and bound * 0.9 <= figures["open_bytes"] <= bound
    assert figures["traced"] < 0.01 * bound, figures
    assert 0.9 * bound <= figures["rss"] <= 1.1 * bound, figures
    assert abs(figures["rss"] - figures["open_bytes"]) <= 0.1 * figures["open_bytes"], figures
