"""Publishing without copying the model: published copies predict exactly as
the estimator did, share what the learner never rewrites, and the learner's rollback
(checkpoint + journal) and snapshots (``capture_state``) stay exact without per-batch copies."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits

from svmstream.app.models import rollback as rollback_module
from svmstream.app.models.config import ModelConfig
from svmstream.app.models.factory import copy_estimator, make_estimator
from svmstream.app.models.registry import Registry
from svmstream.app.models.snapshots import SnapshotStore
from svmstream.app.settings import Settings
from svmstream.solvers import (
    BudgetedSCAClassifier,
    BudgetedSGDClassifier,
    PegasosClassifier,
    StreamingClassifier,
    WarmingUp,
)
from svmstream.solvers.persistence import estimator_from_state
from tests.conftest import two_moons_like


def _digits():
    X, y = load_digits(return_X_y=True)  # raw pixel values 0..16, 10 classes, in file order
    return X, y


def _binary():
    X, y = two_moons_like(3000, d=5, seed=2)
    return X * 40.0 + 7.0, np.where(y > 0, "yes", "no")  # raw, unscaled, string labels


def _sparse_text(n=3000, d=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.01, random_state=seed, format="csr") * 5.0
    w = rng.normal(size=d)
    y = (X @ w > 0).astype(int)
    return sp.csr_matrix(X), y


def streaming(plain, **stages):
    """The service's model: the plain estimator in the streaming stages (defaults unless given)."""
    return StreamingClassifier(plain, **stages)


CASES = {
    "bsgd-binary": (lambda: streaming(BudgetedSGDClassifier(budget=50, random_state=0)), _binary),
    "bsgd-multiclass": (lambda: streaming(BudgetedSGDClassifier(budget=60, random_state=0)), _digits),
    "bsca-binary": (lambda: streaming(BudgetedSCAClassifier(budget=50, random_state=0)), _binary),
    "bsca-one-vs-rest": (lambda: streaming(BudgetedSCAClassifier(budget=40, random_state=0)), _digits),
    "linear-sparse": (lambda: streaming(PegasosClassifier(random_state=0)), _sparse_text),
    "bsgd-sparse-svs": (lambda: streaming(BudgetedSGDClassifier(budget=40, random_state=0)), _sparse_text),
    "bsca-sparse-svs": (lambda: streaming(BudgetedSCAClassifier(budget=40, random_state=0)), _sparse_text),
    # the plain estimators publish the same way
    "plain-bsgd-binary": (lambda: BudgetedSGDClassifier(budget=50, random_state=0), _binary),
    "plain-bsca-one-vs-rest": (lambda: BudgetedSCAClassifier(budget=40, random_state=0), _digits),
    "plain-linear-sparse": (lambda: PegasosClassifier(random_state=0), _sparse_text),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_published_copy_predicts_as_the_estimator_did_whatever_it_learns_next(case):
    make, data = CASES[case]
    X, y = data()
    half = X.shape[0] // 2
    est = make()
    for start in range(0, half, 200):
        est.partial_fit(X[start : start + 200], y[start : start + 200], classes=np.unique(y))
    pub = est.published_copy()
    reference = copy_estimator(est)  # the old way: a full copy through get_state
    probe = X[half:]
    np.testing.assert_array_equal(pub.decision_function(probe), est.decision_function(probe))
    np.testing.assert_array_equal(pub.predict_proba(probe), est.predict_proba(probe))
    for start in range(half, X.shape[0], 200):  # the learner goes on
        est.partial_fit(X[start : start + 200], y[start : start + 200])
    assert not np.array_equal(est.decision_function(probe), reference.decision_function(probe))
    np.testing.assert_array_equal(pub.decision_function(probe), reference.decision_function(probe))
    np.testing.assert_array_equal(pub.predict_proba(probe), reference.predict_proba(probe))
    np.testing.assert_array_equal(pub.predict(probe), reference.predict(probe))


def test_a_sparse_pool_is_shared_not_copied():
    """Sparse SV storage: the published copy shares the append-only arena (the learner only
    appends past its fill mark, or moves to a new arena) and copies the O(B) slot arrays."""
    X, y = _sparse_text()
    est = streaming(BudgetedSGDClassifier(budget=40, random_state=0), shuffle_buffer=300)
    est.partial_fit(X, y, classes=[0, 1])
    assert est.sv_storage_ == "sparse" and est.n_support_vectors_ == 40
    pub = est.published_copy()
    engine, published = est.model_, pub.model_
    assert published._sv_data is engine._sv_data and published._sv_idx is engine._sv_idx
    assert published._sv_start.shape == (40,) and not np.shares_memory(published._sv_start, engine._sv_start)
    before = pub.decision_function(X[:300])
    est.partial_fit(X[:2000], y[:2000])  # many merges: appended z's, possibly a new arena
    np.testing.assert_array_equal(pub.decision_function(X[:300]), before)


def test_a_published_copy_shares_the_buffers_and_copies_only_the_live_svs():
    X, y = _binary()
    est = streaming(BudgetedSGDClassifier(budget=50, random_state=0), shuffle_buffer=500)
    est.partial_fit(X, y, classes=["no", "yes"])
    pub = est.published_copy()
    assert pub is not est and pub.model_ is not est.model_
    engine, published = est.model_, pub.model_
    n_sv = est.n_support_vectors_
    assert n_sv == 50 and engine._sv_t.shape[1] == 51
    assert published._sv_t.shape == (5, n_sv) and published._coef.shape[0] == n_sv  # live SVs only
    assert not np.shares_memory(published._sv_t, engine._sv_t)
    assert not np.shares_memory(published._coef, engine._coef)
    assert pub._order.buf_X is est._order.buf_X and est._order.buf_X.size > 0  # the shuffle buffer: shared
    assert pub._scaler is not est._scaler and pub.calibrator_ is not est.calibrator_


def test_a_published_copy_of_a_warming_up_model_says_so():
    X, y = _binary()
    est = streaming(BudgetedSGDClassifier(budget=50)).partial_fit(X[:100], y[:100], classes=["no", "yes"])
    with pytest.raises(WarmingUp, match="warming up: 100 of 1000"):
        est.published_copy().decision_function(X[:3])


# ---------------------------------------------------------------------------- the service side
CFG = ModelConfig(budget=30, random_state=7)  # no settings but the budget: window, buffer, guard on


def _registry(tmp_path) -> Registry:
    return Registry(Settings(snapshot_dir=tmp_path, keep_versions=3), SnapshotStore(tmp_path, keep=3))


def _direct(X, y, stop, batch=100):
    """The estimator alone fed rows [0, stop) in batches of ``batch`` (labels as class indices)."""
    direct = make_estimator(CFG)
    for start in range(0, stop, batch):
        direct.partial_fit(X[start : start + batch], y[start : start + batch], classes=np.arange(2))
    return direct


def _poison(y):
    bad = y.copy()
    bad[3] = 5  # not a class index: the estimator raises inside partial_fit, after the window
    return bad


@pytest.mark.parametrize("journal_bytes", [rollback_module.JOURNAL_MAX_BYTES, 1])
def test_a_failed_batch_is_undone_from_the_checkpoint_and_the_journal(tmp_path, monkeypatch, journal_bytes):
    """Rollback after a snapshot (checkpoint) and several batches (journal), with the default
    journal bound and with a checkpoint after every batch (bound of 1 byte)."""
    monkeypatch.setattr(rollback_module, "JOURNAL_MAX_BYTES", journal_bytes)
    X, y = _binary()
    y = (y == "yes").astype(np.int64)
    reg = _registry(tmp_path)
    reg.create("m", CFG)
    for start in range(0, 1200, 100):
        reg.learn("m", X[start : start + 100], y[start : start + 100]).result()
        if start == 400:
            assert reg.snapshot(reg.get("m")) is not None  # a checkpoint mid-way
    before = reg.get("m").view
    with pytest.raises(ValueError):
        reg.learn("m", X[1200:1300], _poison(y[1200:1300])).result()
    assert reg.get("m").view is before
    for start in range(1200, 1500, 100):  # continues as if the bad batch never came
        reg.learn("m", X[start : start + 100], y[start : start + 100]).result()
    direct = _direct(X, y, 1500)
    np.testing.assert_array_equal(reg.get("m").view.decision_function(X), direct.decision_function(X))
    reg.close()


def test_the_journal_holds_at_most_a_share_of_max_model_bytes_and_rolls_back_exactly(tmp_path):
    """The journal is the model's memory: with max_model_bytes = 4 MiB it keeps at most 256 KiB
    of input (``journal_limit``) before a checkpoint replaces it — here several times, where the
    flat 64 MiB bound would never have — and each step it keeps holds its batch's rows only (not
    the contest's margins or warm copies); a failed batch is still undone exactly."""
    X, y = two_moons_like(12000, d=5, seed=3)
    X, y = X * 40.0 + 7.0, (y > 0).astype(np.int64)
    settings = Settings(snapshot_dir=tmp_path, keep_versions=3, max_model_bytes=4 << 20)
    limit = rollback_module.journal_limit(settings.max_model_bytes)
    assert limit == (4 << 20) // 16 < rollback_module.JOURNAL_MAX_BYTES
    reg = Registry(settings, SnapshotStore(tmp_path, keep=3))
    reg.create("m", CFG)
    handle, checkpoints, last = reg.get("m"), 0, None
    for start in range(0, 11000, 500):
        reg.learn("m", X[start : start + 500], y[start : start + 500]).result()
        assert handle._journal_bytes <= limit
        held = sum(rollback_module.input_bytes(c.cell_contents) for s in handle._journal for c in s.__closure__
                   if isinstance(c.cell_contents, np.ndarray))  # fmt: skip
        assert held <= handle._journal_bytes + 8 * 500 * len(handle._journal)  # X, y (and no margins)
        checkpoints += handle._checkpoint is not last and isinstance(handle._checkpoint, tuple)
        last = handle._checkpoint
    assert checkpoints >= 2
    before = handle.view
    with pytest.raises(ValueError):
        reg.learn("m", X[11000:11500], _poison(y[11000:11500])).result()
    assert handle.view is before
    reg.learn("m", X[11000:11500], y[11000:11500]).result()
    direct = make_estimator(CFG)
    for start in range(0, 11500, 500):
        direct.partial_fit(X[start : start + 500], y[start : start + 500], classes=np.arange(2))
    np.testing.assert_array_equal(handle.view.decision_function(X[:2000]), direct.decision_function(X[:2000]))
    reg.close()


def test_snapshots_taken_while_learning_hold_the_state_of_their_view(tmp_path):
    """``capture_state`` runs while the learner applies batches: every captured state restores
    to the model its view published (same decisions), and its version is the view's."""
    X, y = _binary()
    y = (y == "yes").astype(np.int64)
    reg = _registry(tmp_path)
    reg.create("m", CFG)
    handle = reg.get("m")
    captured = []
    done = threading.Event()

    def snapshotter():
        while not done.is_set():
            view, state = handle.capture_state()
            if state is not None:
                captured.append((view, state))

    thread = threading.Thread(target=snapshotter)
    thread.start()
    for start in range(0, 1500, 50):
        reg.learn("m", X[start : start + 50], y[start : start + 50]).result()
    done.set()
    thread.join()
    assert len({view.version for view, _ in captured}) >= 5, "the snapshotter never ran between batches"
    for view, state in captured[:: max(1, len(captured) // 12)]:
        if view.stats["warming_up"]:
            continue
        restored = estimator_from_state(*state)
        np.testing.assert_array_equal(restored.decision_function(X[:300]), view.decision_function(X[:300]))
        assert restored.n_seen_ == view.stats["n_seen"]
    reg.close()


def test_linear_published_copies_recycle_free_weight_arrays_and_patch_only_changed_rows():
    """A linear model's published copies reuse weight arrays no view holds any more, patched
    with the rows changed since: every copy still predicts exactly as the model did when it
    was published, also across a new class (a change of shape)."""
    X, y = _sparse_text(n=4000)
    y = y.astype(str).astype(object)
    y[3000::5] = "new"  # a third class appears late
    est = streaming(PegasosClassifier(random_state=0), shuffle_buffer=0, warmup=200)
    probe = X[:300]
    kept = []  # (published copy, full copy at the same moment): the last two of every third batch
    returned, recycled, checked = set(), 0, 0
    for start in range(0, X.shape[0], 100):
        Xb, yb = X[start : start + 100], y[start : start + 100]
        if start == 0:
            est.partial_fit(Xb, yb, classes=["0", "1"])
        else:
            if "new" in set(yb) and "new" not in est.classes_:
                est.add_class("new")
            est.partial_fit(Xb, yb)
        if est.warming_up_:
            continue
        pub = est.published_copy()  # the previous one, unless kept, is dropped: its array is free
        pooled = {id(entry[0]) for entry in est.model_._w_pool}  # pooled arrays stay alive: stable ids
        recycled += id(pub.model_._W) in returned and id(pub.model_._W) in pooled
        returned.add(id(pub.model_._W))
        if (start // 100) % 3 == 0:
            kept.append((pub, copy_estimator(est)))
            if len(kept) > 2:  # checked after it outlived several batches, then released
                old, full = kept.pop(0)
                np.testing.assert_array_equal(old.decision_function(probe), full.decision_function(probe))
                checked += 1
        del pub
    assert recycled >= 15, f"free weight arrays were reused {recycled} times in 39 publications"
    assert checked >= 9
    for old, full in kept:
        np.testing.assert_array_equal(old.decision_function(probe), full.decision_function(probe))


def test_a_restored_model_rolls_back_from_its_snapshot_file(tmp_path):
    """A restored model keeps no copy of its state for rollback: its checkpoint is the snapshot
    file it came from (and after each snapshot, that file); a failed batch is undone from it."""
    X, y = _binary()
    y = (y == "yes").astype(np.int64)
    reg = _registry(tmp_path)
    reg.create("m", CFG)
    for start in range(0, 1200, 100):
        reg.learn("m", X[start : start + 100], y[start : start + 100]).result()
    assert reg.snapshot(reg.get("m")) is not None
    assert isinstance(reg.get("m")._checkpoint, Path)  # the written file, not arrays
    reg.close()
    restored = _registry(tmp_path)
    assert restored.restore() == ["m"]
    handle = restored.get("m")
    assert not handle.loaded and handle._checkpoint is None  # lazy restore: nothing decoded yet
    handle.ensure_loaded()
    assert isinstance(handle._checkpoint, Path)
    restored.learn("m", X[1200:1300], y[1200:1300]).result()
    with pytest.raises(ValueError):
        restored.learn("m", X[1300:1400], _poison(y[1300:1400])).result()
    for start in range(1300, 1500, 100):
        restored.learn("m", X[start : start + 100], y[start : start + 100]).result()
    direct = _direct(X, y, 1500)
    np.testing.assert_array_equal(restored.get("m").view.decision_function(X), direct.decision_function(X))
    restored.close()
