"""The feedback store's quotas by token class (``docs/feedback.md``): tokenless ``remember``
writes into a smaller quota per model that never evicts what authenticated clients stored;
every quota within its bytes; saved and read back with its class."""

from __future__ import annotations

import time

import numpy as np

from svmstream.app.models.feedback_store import MemoryStore, belongs, encode_row, record_bytes


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
    size = record_bytes(_records(1)[0]) + 900
    store = MemoryStore(3600, 100 * size, open_total_bytes=20 * size, open_model_bytes=20 * size)
    tokenless = store.put(_records(10), model="m", authenticated=False)
    first = store.put(_records(80), model="m")
    store.put(_records(40), model="m")
    assert store.get(first[:40], model="m") == [None] * 40  # the oldest authenticated went
    assert all(r is not None for r in store.get(tokenless, model="m"))


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
