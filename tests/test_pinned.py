"""Pinned versions (:mod:`svmstream.app.models.pinned`): a serving state decoded from the file
(never its learning rows, not even while it is read), held within a byte bound, decoded once
however many ask at once, a 503 with ``Retry-After`` beyond."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from svmstream.app.models.config import ModelConfig
from svmstream.app.models.pinned import PinnedBusy, PinnedCache
from svmstream.app.models.serving import read_serving
from svmstream.app.models.snapshots import SnapshotStore, decode_snapshot
from svmstream.solvers import BudgetedSGDClassifier
from svmstream.solvers.online import StreamingClassifier
from svmstream.solvers.persistence import CorruptStateError


def _rows(n=3000, d=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.where(X[:, 0] + 0.5 * X[:, 1] ** 2 > 0.3, 1, -1)


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    """A snapshot whose rehearsal memory and shuffle buffer hold most of its bytes."""
    X, y = _rows()
    est = StreamingClassifier(
        BudgetedSGDClassifier(budget=30, random_state=0), rehearsal=2, shuffle_buffer=800
    )
    for i in range(0, 2400, 200):
        est.partial_fit(X[i : i + 200], y[i : i + 200], classes=[-1, 1])
    store = SnapshotStore(tmp_path_factory.mktemp("snap"))
    written = store.write("m", ModelConfig(), est.get_state(), version=3, n_features=X.shape[1], extra={})
    return written.path, X[2400:]


def test_the_serving_state_of_a_file_predicts_as_the_file_and_holds_no_learning_rows(snapshot):
    path, probe = snapshot
    whole = decode_snapshot(path.read_bytes(), path)
    served, nbytes = read_serving(path)
    np.testing.assert_array_equal(
        served.estimator.decision_function(probe), whole.estimator.decision_function(probe)
    )
    assert served.version == whole.version and served.n_features == whole.n_features
    # the bytes decoded are the serving arrays: a fraction of the file (rehearsal + buffer rows)
    assert nbytes < path.stat().st_size / 4, (nbytes, path.stat().st_size)
    held = whole.estimator.get_state()[0]
    big = [k for k, v in held.items() if v.nbytes > 100_000]
    assert big, "the fixture must hold learning rows"
    for name in big:
        arr = served.estimator.get_state()[0][name]
        assert not arr.any()  # zero-filled


def test_a_truncated_or_altered_file_is_refused(snapshot, tmp_path):
    path, _ = snapshot
    blob = bytearray(path.read_bytes())
    (tmp_path / "short.svmstate").write_bytes(blob[:-10])
    blob[-100] ^= 0xFF
    (tmp_path / "flipped.svmstate").write_bytes(bytes(blob))
    for name in ("short", "flipped"):
        with pytest.raises(CorruptStateError):
            read_serving(tmp_path / f"{name}.svmstate")


def test_the_cache_decodes_once_for_concurrent_requests_and_refuses_another_meanwhile():
    cache = PinnedCache(max_bytes=1000, max_count=4)
    calls, started, release = [], threading.Event(), threading.Event()

    def slow():
        calls.append(1)
        started.set()
        release.wait(10)
        return "v1", 100

    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.get("a", slow))) for _ in range(8)]
    threads[0].start()
    started.wait(10)
    for t in threads[1:]:
        t.start()
    time.sleep(0.2)
    with pytest.raises(PinnedBusy) as refused:  # another version while one is decoded
        cache.get("b", lambda: ("v2", 100))
    assert refused.value.status == 503 and refused.value.headers["Retry-After"]
    release.set()
    for t in threads:
        t.join(10)
    assert results == ["v1"] * 8 and len(calls) == 1
    assert cache.get("b", lambda: ("v2", 100)) == "v2"
    assert cache.stats()["decodes"] == 2


def test_the_cache_stays_within_its_bytes_and_refuses_what_alone_exceeds_them():
    cache = PinnedCache(max_bytes=1000, max_count=100)
    for k in range(10):
        cache.get(k, lambda k=k: (k, 300))
        assert cache.stats()["bytes"] <= 1000
    assert cache.stats()["versions"] == 3  # the least recently used went
    with pytest.raises(PinnedBusy) as big:
        cache.reserve(1001)
    assert big.value.field == "version" and "max_pinned_bytes" in str(big.value)
    assert cache.stats()["versions"] == 3  # nothing dropped for a version that cannot fit
    cache.reserve(900)  # room made before a decode
    assert cache.stats()["bytes"] <= 100
