"""Registry (single writer, published views) and snapshot files, without HTTP."""

from __future__ import annotations

import logging
import os
import threading
import time

import numpy as np
import pytest

from svmstream.app.errors import ModelNotFitted
from svmstream.app.models.config import ModelConfig
from svmstream.app.models.factory import make_estimator
from svmstream.app.models.registry import Registry
from svmstream.app.models.snapshots import SnapshotStore
from svmstream.app.settings import Settings
from svmstream.solvers.persistence import CorruptStateError, encode_state
from tests.conftest import two_moons_like

#: the raw step these tests pin: no scaling, warm-up window, shuffle buffer or run guard
RAW = dict(scaling="none", warmup=0, shuffle_buffer=0, run_guard=False)
CFG = ModelConfig(budget=30, gamma=1.0, C=10.0, n_samples=600, random_state=7, **RAW)


def _registry(tmp_path, keep: int = 3) -> Registry:
    return Registry(Settings(snapshot_dir=tmp_path, keep_versions=keep), SnapshotStore(tmp_path, keep=keep))


def _direct(X, y, batch: int):
    """The solver alone (``make_estimator(CFG)``) fed the first 600 rows in batches of ``batch``."""
    direct = make_estimator(CFG)
    for start in range(0, 600, batch):
        direct.partial_fit(X[start : start + batch], y[start : start + batch], classes=np.arange(2))
    return direct


def _learn(reg: Registry, name: str, X, y, batch: int = 100, **kw):
    view = None
    for start in range(0, X.shape[0], batch):
        view = reg.learn(name, X[start : start + batch], y[start : start + batch], **kw).result()
    return view


@pytest.fixture
def data():
    X, y = two_moons_like(600, d=5, seed=21)
    return X, (y > 0).astype(np.int64)  # class indices of classes [-1, 1]


def test_service_applies_exactly_the_estimators_partial_fit_sequence(tmp_path, data):
    X, y = data
    reg = _registry(tmp_path)
    reg.create("m", CFG)
    _learn(reg, "m", X, y, batch=150)
    direct = _direct(X, y, batch=150)
    view = reg.get("m").view
    assert view.version == 4 and view.stats["n_seen"] == 600 == direct.n_seen_
    np.testing.assert_array_equal(view.decision_function(X), direct.decision_function(X))
    reg.close()


def test_published_views_are_immutable(tmp_path, data):
    X, y = data
    reg = _registry(tmp_path)
    handle, _ = reg.create("m", CFG)
    with pytest.raises(ModelNotFitted):
        handle.view.decision_function(X)
    _learn(reg, "m", X[:300], y[:300])
    old = handle.view
    old_decision = old.decision_function(X)
    _learn(reg, "m", X[300:], y[300:])
    assert handle.view.version == old.version + 3 and handle.view is not old
    np.testing.assert_array_equal(old.decision_function(X), old_decision)  # untouched by later learning
    assert not np.array_equal(handle.view.decision_function(X), old_decision)
    reg.close()


def test_predict_does_not_wait_for_the_learner(tmp_path):
    X, y = two_moons_like(40_000, d=10, seed=2)
    reg = _registry(tmp_path)
    reg.create("m", ModelConfig(budget=200, gamma=0.5, C=1.0, **RAW))
    reg.learn("m", X[:200], (y[:200] > 0).astype(np.int64)).result()
    future = reg.learn("m", X, (y > 0).astype(np.int64))  # ~1 s of solver work
    view, decision = reg.predict("m", X[:500])
    assert not future.done()  # answered from the published view while the batch is applied
    assert view.version == 1 and decision.shape == (500,)
    assert future.result().version == 2
    reg.close()


def test_learn_from_many_threads_applies_every_batch_once(tmp_path, data):
    X, y = data
    reg = _registry(tmp_path)
    reg.create("m", CFG)
    errors = []

    def worker(part):
        try:
            for start in range(part * 150, part * 150 + 150, 50):
                reg.learn("m", X[start : start + 50], y[start : start + 50]).result()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    view = reg.get("m").view
    learned = view.stats["t"] - view.stats["statistics"]["rehearsal_steps"]
    assert view.version == 12 and view.stats["n_seen"] == 600 == learned
    reg.close()


def test_snapshot_restore_roundtrip_with_extra_metadata_and_listener(tmp_path, data):
    X, y = data
    reg = _registry(tmp_path)
    reg.create("m", CFG)
    seen = []
    reg.snapshot_listeners.append(lambda handle, view, path: seen.append((view.extra.get("stream_id"), path)))
    _learn(reg, "m", X[:200], y[:200], extra={"stream_id": "1700000000000-3"})
    written = reg.snapshot_changed()
    assert reg.snapshot_changed() == []  # nothing changed since
    assert len(written) == 1 and seen == [("1700000000000-3", written[0])]
    reg.close()

    reg2 = _registry(tmp_path)
    assert reg2.restore() == ["m"]
    view = reg2.get("m").view
    assert view.extra == {"stream_id": "1700000000000-3"} and view.version == 2 and view.config == CFG
    np.testing.assert_array_equal(view.decision_function(X), reg.get("m").view.decision_function(X))
    # the restored model continues exactly like the original would have
    _learn(reg2, "m", X[200:], y[200:])
    direct = _direct(X, y, batch=100)
    np.testing.assert_array_equal(reg2.get("m").view.decision_function(X), direct.decision_function(X))
    reg2.close()


def test_retention_keeps_the_newest_k(tmp_path, data):
    X, y = data
    reg = _registry(tmp_path, keep=2)
    reg.create("m", CFG)  # snapshot 1
    for start in range(0, 400, 100):
        _learn(reg, "m", X[start : start + 100], y[start : start + 100])
        reg.snapshot_changed()  # snapshots 2..5
    names = [p.name for _, p in reg.store.files("m")]
    assert names == ["m-000000000005.svmstate", "m-000000000004.svmstate"]
    reg.close()


def _two_snapshots(tmp_path, data):
    X, y = data
    reg = _registry(tmp_path)
    reg.create("m", CFG)
    _learn(reg, "m", X[:300], y[:300])
    reg.snapshot_changed()
    _learn(reg, "m", X[300:], y[300:])
    reg.snapshot_changed()
    reg.close()
    files = [p for _, p in reg.store.files("m")]
    return files[0], files[1]  # newest, previous


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda b: b[: len(b) - 10], "truncated payload"),
        (lambda b: b[:-100] + bytes([b[-100] ^ 0xFF]) + b[-99:], "payload checksum mismatch"),
        (lambda b: b"garbage" * 10, "bad magic"),
        (lambda b: b"", "bad magic"),
    ],
    ids=["truncated", "bit-flip", "garbage", "empty"],
)
def test_corrupt_newest_snapshot_is_skipped_with_a_log_line(tmp_path, data, caplog, damage, reason):
    newest, previous = _two_snapshots(tmp_path, data)
    newest.write_bytes(damage(newest.read_bytes()))
    reg = _registry(tmp_path)
    with caplog.at_level(logging.WARNING, logger="svmstream.snapshots"):
        assert reg.restore() == ["m"]
    assert f"skipping snapshot {newest}: " in caplog.text and reason in caplog.text
    view = reg.get("m").view
    assert view.stats["n_seen"] == 300 and reg.get("m").last_snapshot_path == str(previous)
    # the next snapshot gets a new sequence number: the damaged file is never overwritten
    _learn(reg, "m", *[a[:50] for a in data])
    path = reg.snapshot(reg.get("m"))
    assert path.endswith("m-000000000004.svmstate")
    reg.close()


def test_snapshot_that_decodes_but_does_not_rebuild_is_skipped(tmp_path, data, caplog):
    newest, previous = _two_snapshots(tmp_path, data)
    bad_meta = {"estimator": "BudgetedSGDClassifier", "service": {"model": "m", "config": {"budget": -1}}}
    newest.write_bytes(encode_state({"x": np.zeros(3)}, bad_meta))
    with caplog.at_level(logging.WARNING, logger="svmstream.snapshots"):
        found = SnapshotStore(tmp_path).load_newest("m")
    assert found is not None and found.path == previous
    assert f"skipping snapshot {newest}: cannot rebuild model" in caplog.text
    with pytest.raises(CorruptStateError):
        SnapshotStore(tmp_path).read(newest)


def test_no_valid_snapshot_means_not_restored(tmp_path, data, caplog):
    newest, previous = _two_snapshots(tmp_path, data)
    newest.write_bytes(b"")
    previous.write_bytes(b"x")
    for _, p in SnapshotStore(tmp_path).files("m")[2:]:
        p.write_bytes(b"")
    reg = _registry(tmp_path)
    with caplog.at_level(logging.WARNING):
        assert reg.restore() == []
    assert "no valid snapshot" in caplog.text and "m" not in reg


def test_replace_and_delete_are_durable(tmp_path, data):
    X, y = data
    reg = _registry(tmp_path)
    reg.create("m", CFG)
    _learn(reg, "m", X, y)
    reg.snapshot_changed()
    reg.create("m", ModelConfig(budget=5, classes=["a", "b"]))  # replace: written at once
    reg.create("gone", CFG)
    reg.delete("gone")
    assert not (tmp_path / "gone").exists()
    reg.close()
    reg2 = _registry(tmp_path)
    assert reg2.restore() == ["m"]
    view = reg2.get("m").view
    assert view.config.budget == 5 and view.config.classes == ["a", "b"] and view.estimator is None
    reg2.close()


def test_unfinished_temp_files_are_cleaned_at_restore(tmp_path, data):
    newest, _ = _two_snapshots(tmp_path, data)
    tmp = newest.with_name(f".{newest.name}.tmp-12345")
    tmp.write_bytes(b"partial")
    reg = _registry(tmp_path)
    reg.restore()
    assert not tmp.exists() and newest.exists()
    reg.close()


def test_a_shared_store_keeps_a_temp_file_another_learner_may_be_writing(tmp_path, data):
    """A clustered learner that starts removes only temp files older than its grace period: a
    younger one may be a live learner's write in progress (the shared snapshot directory)."""
    from svmstream.app.cluster.store import FencedSnapshotStore

    newest, _ = _two_snapshots(tmp_path, data)
    fresh = newest.with_name(f".{newest.name}.tmp-12345")
    stale = newest.with_name(f".{newest.name}.tmp-12346")
    fresh.write_bytes(b"partial")
    stale.write_bytes(b"partial")
    old = time.time() - 601
    os.utime(stale, (old, old))
    FencedSnapshotStore(newest.parent.parent).clean_temp_files()
    assert fresh.exists() and not stale.exists() and newest.exists()


def test_a_failing_partial_fit_leaves_the_model_unchanged(tmp_path, data, caplog):
    X, y = data
    reg = _registry(tmp_path)
    reg.create("m", CFG)
    _learn(reg, "m", X[:200], y[:200])
    before = reg.get("m").view
    bad = y[200:300].copy()
    bad[10] = 5  # not a class index: the estimator refuses the batch
    with caplog.at_level(logging.ERROR, logger="svmstream.registry"), pytest.raises(ValueError):
        reg.learn("m", X[200:300], bad).result()
    assert "model rolled back" in caplog.text
    assert reg.get("m").view is before and reg.get("m").pending == 0
    _learn(reg, "m", X[200:], y[200:])  # continues as if the bad batch never came
    direct = _direct(X, y, batch=100)
    np.testing.assert_array_equal(reg.get("m").view.decision_function(X), direct.decision_function(X))
    reg.close()


def test_concurrent_predictions_on_one_view_are_correct(tmp_path, data):
    X, y = data
    reg = _registry(tmp_path)
    reg.create("m", CFG)
    _learn(reg, "m", X, y)
    view = reg.get("m").view
    rng = np.random.default_rng(0)
    probes = [rng.normal(size=(int(rng.integers(1, 400)), 5)) for _ in range(16)]
    expected = [view.estimator.decision_function(P) for P in probes]
    results: dict[int, np.ndarray] = {}

    def worker(k):
        for _ in range(5):
            results[k] = reg.predict("m", probes[k])[1]
            np.testing.assert_array_equal(results[k], expected[k])

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(16):
        np.testing.assert_array_equal(results[k], expected[k])
    reg.close()


def test_wide_sparse_batches_learn_like_dense_ones(tmp_path):
    import scipy.sparse as sp

    rng = np.random.default_rng(4)
    dense = np.where(rng.random((400, 1500)) < 0.01, rng.normal(size=(400, 1500)), 0.0)
    y = (dense[:, :750].sum(axis=1) > dense[:, 750:].sum(axis=1)).astype(np.int64)
    reg = _registry(tmp_path)
    cfg = ModelConfig(budget=50, gamma=0.2, C=10.0, n_samples=400, random_state=1, n_features=1500, **RAW)
    reg.create("dense", cfg)
    reg.create("sparse", cfg)
    _learn(reg, "dense", dense, y)
    _learn(reg, "sparse", sp.csr_matrix(dense), y)  # d > 1024: stays CSR all the way
    a = reg.predict("dense", dense)[1]
    b = reg.predict("sparse", sp.csr_matrix(dense))[1]
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    stats = {name: dict(reg.get(name).view.stats) for name in ("sparse", "dense")}
    storage = {name: stats[name].pop("statistics") for name in stats}  # only the SV storage differs:
    assert (storage["sparse"]["sv_storage"], storage["dense"]["sv_storage"]) == ("sparse", "dense")  # auto
    assert storage["sparse"].pop("sv_nonzeros") < storage["dense"].pop("sv_nonzeros")
    storage["sparse"]["sv_storage"] = "dense"
    assert stats["sparse"] == stats["dense"] and storage["sparse"] == storage["dense"]
    reg.close()
