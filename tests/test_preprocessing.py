"""The streaming preprocessing of budgeted models (the stages of ``StreamingClassifier``):
warm-up window, max-abs scaling, γ = "scale", the shuffle buffer that learns while it fills,
and the run guard."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

from svmstream.solvers import BudgetedSCAClassifier, BudgetedSGDClassifier, StreamingClassifier
from svmstream.solvers._params import DEFAULT_SHUFFLE_BUFFER, REFERENCE_N
from svmstream.solvers.budgeted._preprocessing import GUARD_MIN_RUN, GUARD_RESERVOIR, buffer_capacity
from svmstream.solvers.online.stages import OrderStage
from svmstream.solvers.online.stages.scaler import fit_scaler
from svmstream.solvers.persistence import estimator_from_state


def streaming(cls=BudgetedSGDClassifier, stages=None, **params):
    """``StreamingClassifier(cls(**params), **stages)``: the plain estimator in the stages."""
    return StreamingClassifier(cls(**params), **(stages or {}))


def _raw_data(n=600, d=5, seed=0):
    """Unscaled features with very different ranges, labels from a nonlinear rule."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.array([1.0, 100.0, 0.01, 5.0, 1e3])[:d] + np.arange(d)
    score = X[:, 0] + X[:, 1] / 100.0 - (X[:, 2] * 100.0) ** 2 / 2
    return X, np.where(score > np.median(score), 1, 0)


def _feed(est, X, y, sizes, classes=(0, 1)):
    """partial_fit over consecutive batches of the given sizes; returns the learned labels."""
    learned, start = [], 0
    for size in sizes:
        est.partial_fit(X[start : start + size], y[start : start + size], classes=list(classes))
        learned.append(est.last_y_)
        start += size
    assert start == X.shape[0]
    return learned


def _breast_cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


# --------------------------------------------------------------------------- scaling and γ
def test_auto_scaling_is_maxabs_for_dense_and_sparse():
    X, _ = _raw_data()
    X[:, 3] = 0.0  # a feature that is 0 throughout keeps factor 1
    for data in (X, sp.csr_matrix(X)):
        kind, offset, factor = fit_scaler(data, "auto")
        assert kind == "maxabs"
        top = np.abs(X).max(axis=0)
        expected = np.where(top > 0, 1.0 / np.where(top > 0, top, 1.0), 1.0)
        np.testing.assert_array_equal(factor, expected)
        np.testing.assert_array_equal(offset, 0.0)
    assert fit_scaler(X, "standard")[0] == "standard"  # still available explicitly


def test_window_fixes_maxabs_scaling_and_gamma_scale():
    X, y = _raw_data(n=700)
    est = streaming(stages=dict(warmup=500), random_state=0)
    _feed(est, X, y, [300, 400])  # the window closes inside the second batch, after row 500
    window = X[:500]
    top = np.abs(window).max(axis=0)
    scaled = window / top
    assert est.scaling_ == "maxabs"
    np.testing.assert_allclose(est._scaler.factor, 1.0 / top, rtol=0, atol=0)
    assert est.gamma_ == pytest.approx(1.0 / (X.shape[1] * scaled.var()), rel=1e-12)
    # predictions scale with the frozen window statistics, never with later rows
    np.testing.assert_allclose(est._scaler.transform(X[500:]), X[500:] / top, rtol=1e-15)


def test_lambda_is_fixed_by_reference_n():
    X, y = _raw_data()
    for sizes in ([600], [1] * 5 + [595]):
        est = streaming(random_state=0)
        _feed(est, X, y, sizes)
        assert est.lambda_eff_ == 1.0 / REFERENCE_N


# --------------------------------------------------------------------------- batching
@pytest.mark.parametrize(
    "params",
    [
        {},  # defaults: the 600 rows stay in the window until flush
        {"warmup": 150, "shuffle_buffer": 200},  # window closes mid-batch, buffer fills and swaps
        {"warmup": 150, "shuffle_buffer": 0},
    ],
)
def test_model_does_not_depend_on_batch_sizes(params):
    X, y = _raw_data()
    models, learned = [], []
    for sizes in ([600], [100] * 6, [37, 250, 13, 300]):
        est = streaming(stages=params, budget=30, random_state=3)
        labels = _feed(est, X, y, sizes)
        est.flush()
        labels.append(est.last_y_)
        models.append(est)
        learned.append(np.concatenate(labels))
    for est, labels in zip(models[1:], learned[1:]):
        assert est.lambda_eff_ == models[0].lambda_eff_ == 1 / REFERENCE_N
        assert est.gamma_ == models[0].gamma_
        assert est.t_ == models[0].t_ == 600 * (1 + est.rehearsal)  # each example + its rehearsal
        np.testing.assert_array_equal(labels, learned[0])  # the same order of learned examples
        diff = np.abs(est.decision_function(X) - models[0].decision_function(X)).max()
        assert diff == 0.0


# --------------------------------------------------------------------------- buffer
def test_buffer_learns_before_it_is_full():
    X, y = _raw_data(n=4000, d=3)
    est = streaming(stages=dict(warmup=500), budget=50, random_state=0)
    assert buffer_capacity(est.shuffle_buffer, 3) == DEFAULT_SHUFFLE_BUFFER == 20_000
    learned = _feed(est, X, y, [500] + [500] * 7)
    assert len(learned[0]) > 0  # learning starts with the batch that closes the window
    n = 4000
    assert est.t_ - est.n_rehearsed_ + est.n_pending_ == est.n_seen_ == n
    assert est.n_pending_ < DEFAULT_SHUFFLE_BUFFER  # far from full
    # every row leaves with probability 1/K per arrival: about n − K(1 − e^(−n/K)) learned
    K = DEFAULT_SHUFFLE_BUFFER
    expected = n - K * (1 - np.exp(-n / K))
    assert 0.7 * expected < est.t_ - est.n_rehearsed_ < 1.3 * expected
    assert est.t_ - est.n_rehearsed_ == sum(len(part) for part in learned)
    est.flush()
    assert est.t_ - est.n_rehearsed_ == n and est.n_pending_ == 0


def test_buffer_releases_each_row_exactly_once():
    n, d = 3000, 2
    X = np.column_stack([np.arange(n, dtype=float), np.zeros(n)])
    labels = np.where(np.arange(n) % 3 == 0, 1.0, -1.0)
    pp = OrderStage(250, False, d, random_state=0)
    out = []
    for start in range(0, n, 400):
        Xo, yo, orig, _ = pp.feed(None, (X[start : start + 400], labels[start : start + 400], np.ones(400)))
        assert orig.all()
        out.append(Xo[:, 0])
        assert pp.pending == min(start + 400, n) - sum(len(o) for o in out)
    assert pp.pending == 250  # full after 3000 arrivals (expected fill: K(1 − e^(−12)))
    Xo, yo, orig, _ = pp.drain()
    out.append(Xo[:, 0])
    ids = np.concatenate(out).astype(int)
    np.testing.assert_array_equal(np.sort(ids), np.arange(n))
    assert np.mean(np.abs(ids - np.arange(n))) > 50  # the order is mixed


# --------------------------------------------------------------------------- state
def _run_with_restart(make, X, y, sizes, cut, classes=(0, 1)):
    """Feed batches; after ``cut`` batches save and restore the model; returns (restarted, straight)."""
    straight = make()
    _feed(straight, X, y, sizes, classes)
    first = make()
    head = sum(sizes[:cut])
    _feed(first, X[:head], y[:head], sizes[:cut], classes)
    restored = type(first).from_state(*first.get_state())
    _feed(restored, X[head:], y[head:], sizes[cut:], classes)
    return restored, straight


@pytest.mark.parametrize("cut", [1, 3, 5], ids=["mid-window", "mid-buffer", "buffer-full"])
def test_state_round_trip_continues_bit_identically(cut):
    X, y = _raw_data(n=1200)
    order = np.argsort(y, kind="stable")  # label-sorted: the guard's state matters too
    X, y = X[order], y[order]
    sizes = [200] * 6

    def make():
        return streaming(stages=dict(warmup=300, shuffle_buffer=300), budget=40, random_state=1)

    restored, straight = _run_with_restart(make, X, y, sizes, cut)
    assert restored.n_pending_ == straight.n_pending_
    np.testing.assert_array_equal(restored.last_margins_, straight.last_margins_)
    for est in (restored, straight):
        est.flush()
    assert restored.t_ == straight.t_ and restored.n_replayed_ == straight.n_replayed_
    diff = np.abs(restored.decision_function(X) - straight.decision_function(X)).max()
    assert diff == 0.0


def test_state_round_trip_with_guard_firing():
    X_tr, X_te, y_tr, y_te = _breast_cancer()
    order = _sorted_tiled(y_tr, 8)
    X, y = X_tr[order], y_tr[order]
    sizes = [500] * (len(y) // 500) + ([len(y) % 500] if len(y) % 500 else [])

    def make():
        return streaming(stages=dict(shuffle_buffer=0), budget=50, random_state=0)

    restored, straight = _run_with_restart(make, X, y, sizes, len(sizes) - 2)
    assert straight.n_replayed_ > 0
    assert restored.n_replayed_ == straight.n_replayed_
    diff = np.abs(restored.decision_function(X_te) - straight.decision_function(X_te)).max()
    assert diff == 0.0


def test_version_3_state_loads_with_the_guard_off():
    """A version-3 state, saved when the engine was the public ``BudgetedSGDClassifier`` with
    the stages: it loads as a StreamingClassifier with the guard (and rehearsal) off."""
    X, y = _raw_data()
    est = streaming(stages=dict(warmup=100, shuffle_buffer=100, rehearsal=0), budget=30, random_state=0)
    _feed(est, X[:300], y[:300], [300])
    arrays, pipeline_meta = est.get_state()
    scaler, order = pipeline_meta["stages"]["scaler"], pipeline_meta["stages"]["order"]
    meta = dict(pipeline_meta["model"], estimator="BudgetedSGDClassifier")  # the engine's state, old name
    meta["params"] = dict(meta["params"], scaling=scaler["scaling"], warmup=100, shuffle_buffer=100)
    for name in ("pp_state", "pp_res_X", "pp_res_n", "pp_seen"):
        del arrays[name]
    # the engine ran the scaler and the buffer then: their meta was the engine's
    preprocessing = {name: scaler[name] for name in ("ready", "kind", "gamma", "warmup", "needs_window")}
    preprocessing["buffer_capacity"] = order["buffer_capacity"]
    meta = dict(meta, state_version=3, preprocessing=preprocessing, rng_state=order["rng_state"])
    del meta["gamma"], meta["pool"]
    old = estimator_from_state(arrays, meta)
    assert isinstance(old, StreamingClassifier) and isinstance(old.estimator, BudgetedSGDClassifier)
    assert old.run_guard is False and old.n_pending_ == est.n_pending_ and old.n_replayed_ == 0
    assert old._order.guard is False and (old.warmup, old.shuffle_buffer) == (100, 100)
    assert old.rehearsal == 0  # an old model keeps learning as it did
    np.testing.assert_array_equal(old.decision_function(X), est.decision_function(X))
    old.partial_fit(X[300:], y[300:])
    assert old.flush().n_seen_ == old.t_ == 600


# --------------------------------------------------------------------------- run guard
def _sorted_tiled(y, copies, seed=0):
    """Indices of a label-sorted stream: each class's rows repeated ``copies`` times."""
    rng = np.random.default_rng(seed)
    blocks = []
    for label in np.unique(y):
        idx = np.flatnonzero(y == label)
        blocks.append(np.concatenate([rng.permutation(idx) for _ in range(copies)]))
    return np.concatenate(blocks)


def test_label_sorted_breast_cancer_with_no_hyperparameters():
    # 398 raw training rows sorted by label: all of them fit into the warm-up window, which
    # is learned in a shuffled order
    X_tr, X_te, y_tr, y_te = _breast_cancer()
    order = np.argsort(y_tr, kind="stable")
    est = streaming(random_state=0)
    for start in range(0, len(order), 100):
        est.partial_fit(X_tr[order[start : start + 100]], y_tr[order[start : start + 100]], classes=[0, 1])
    est.flush()
    # the target: within 2 pp of scikit-learn's SVC() on the same raw features
    target = SVC().fit(X_tr, y_tr).score(X_te, y_te) - 0.02
    assert est.score(X_te, y_te) >= target  # 0.912 (0.91–0.95 over seeds) vs 0.906 − 0.02


def test_run_guard_rescues_a_label_sorted_stream():
    # runs of 4,240 malignant then 7,140 benign examples; no buffer, so only the guard helps
    X_tr, X_te, y_tr, y_te = _breast_cancer()
    order = _sorted_tiled(y_tr, 20)
    majority = max(np.mean(y_te), 1 - np.mean(y_te))  # 0.626
    scores = {}
    for guard in (True, False):
        est = streaming(
            stages=dict(shuffle_buffer=0, run_guard=guard, rehearsal=0), random_state=0
        )  # the guard alone
        received = 0
        for start in range(0, len(order), 1000):
            rows = order[start : start + 1000]
            est.partial_fit(X_tr[rows], y_tr[rows], classes=[0, 1])
            received += len(est.last_y_)
        est.flush()
        received += len(est.last_y_)
        assert received == est.n_seen_ == len(order)  # replayed steps are not in last_y_
        assert est.t_ - est.n_rehearsed_ == len(order) + est.n_replayed_
        scores[guard] = est.score(X_te, y_te)
        if not guard:
            assert est.n_replayed_ == 0
    assert scores[True] > majority + 0.25  # 0.95–0.97 over seeds
    assert scores[False] < majority + 0.10  # 0.67–0.70: the last run takes over


def test_guard_replays_only_after_a_run_and_only_other_classes():
    n, d = 6000, 2
    labels = np.r_[np.full(2000, -1.0), np.full(4000, 1.0)]
    X = np.column_stack([np.arange(n, dtype=float), labels])
    pp = OrderStage(0, True, d, 2, random_state=0)
    Xo, yo, orig, _ = pp.feed(None, (X, labels, np.ones(n)))
    replayed = ~orig
    assert np.array_equal(Xo[orig, 0], np.arange(n))  # no buffer: originals in order
    # the positive run fires from its GUARD_MIN_RUN-th example on: one replay per example
    assert replayed.sum() == pp.n_replayed == 4000 - GUARD_MIN_RUN + 1
    assert np.all(yo[replayed] == -1.0) and np.all(Xo[replayed, 1] == -1.0)
    # the first run does not fire (no other class yet); replays come from the reservoir
    first = np.flatnonzero(replayed)[0]
    assert orig[:first].sum() == 2000 + GUARD_MIN_RUN
    assert len(np.unique(Xo[replayed, 0])) <= GUARD_RESERVOIR


def test_guard_does_not_fire_on_a_rare_minority():
    # i.i.d. stream with 0.05% positives: runs of negatives longer than 1,000 are normal and
    # must not trigger replay (a fixed run length would)
    rng = np.random.default_rng(0)
    n = 60_000
    labels = np.where(rng.random(n) < 5e-4, 1.0, -1.0)
    change = np.flatnonzero(np.diff(labels)) + 1
    runs = np.diff(np.r_[0, change, n])
    assert runs.max() > GUARD_MIN_RUN
    pp = OrderStage(0, True, 1, 2, random_state=rng)
    _, _, orig, _ = pp.feed(None, (np.zeros((n, 1)), labels, np.ones(n)))
    assert orig.all() and pp.n_replayed == 0


# --------------------------------------------------------------------------- one-vs-rest
def test_bsca_one_vs_rest_shares_the_preprocessing():
    X, y = load_iris(return_X_y=True)
    X = X * np.array([1.0, 10.0, 100.0, 1000.0])  # raw features of very different ranges
    order = _sorted_tiled(y, 30)  # 1,500 rows of each class in turn
    est = streaming(BudgetedSCAClassifier, dict(warmup=300, shuffle_buffer=100), budget=30, random_state=0)
    received = 0
    for start in range(0, len(order), 250):
        rows = order[start : start + 250]
        est.partial_fit(X[rows], y[rows], classes=[0, 1, 2])
        assert est.last_margins_.shape == (len(est.last_y_), 3)
        received += len(est.last_y_)
    est.flush()
    received += len(est.last_y_)
    assert received == est.n_seen_ == len(order)
    assert est.n_replayed_ > 0  # runs of 1,500 outlast the buffer of 100
    assert est.t_ - est.n_rehearsed_ == len(order) + est.n_replayed_
    assert est.scaling_ == "maxabs"
    for binary in est.estimators_:
        assert binary.scaling_ == "none" and binary.gamma_ == est.gamma_
        assert binary.t_ == est.t_ and binary.n_replayed_ == 0
    assert est.score(X, y) > 0.8
    # one shared state round trip
    restored = StreamingClassifier.from_state(*est.get_state())
    np.testing.assert_array_equal(restored.decision_function(X), est.decision_function(X))
    assert restored.n_seen_ == est.n_seen_ and restored.n_replayed_ == est.n_replayed_


# ----------------------------------------------------------------------------- growing sparse input


@pytest.mark.parametrize("cls", [BudgetedSGDClassifier, BudgetedSCAClassifier])
def test_grow_features_keeps_decisions_and_learning_continues(cls):
    """A grown model decides old rows (zeros in the new features) exactly as before, keeps
    learning from wider rows, and round-trips its state."""
    X, y = _raw_data(3000, d=5, seed=3)
    est = streaming(cls, dict(shuffle_buffer=800), budget=40, random_state=0)
    est.partial_fit(sp.csr_matrix(X[:1500]), y[:1500], classes=[0, 1])
    pending, seen = est.n_pending_, est.n_seen_
    before = est.decision_function(X[1500:1700])
    assert est.grow_features(9) is est and est.n_features_in_ == 9
    assert (est.n_pending_, est.n_seen_) == (pending, seen)
    np.testing.assert_array_equal(
        est.decision_function(np.hstack([X[1500:1700], np.zeros((200, 4))])), before
    )
    wide = np.hstack([X[1500:], np.random.default_rng(1).normal(size=(1500, 4)) * 0.01])
    t = est.t_
    est.partial_fit(sp.csr_matrix(wide), y[1500:])
    assert est.n_seen_ == 3000 and est.t_ >= t + 1500 - est.n_pending_
    copy = type(est).from_state(*est.get_state())
    np.testing.assert_array_equal(copy.decision_function(wide), est.decision_function(wide))
    with pytest.raises(ValueError, match="n_features must be >= the model's 9"):
        est.grow_features(8)


def test_grow_features_in_the_window_and_when_the_buffer_bound_shrinks():
    """Growing while the window is open pads its rows; growing so wide that the buffer's
    64 MiB bound holds fewer rows learns the excess at once (nothing is lost)."""
    X, y = _raw_data(2500, d=5, seed=4)
    est = streaming(budget=30, random_state=0)
    est.partial_fit(sp.csr_matrix(X[:600]), y[:600], classes=[0, 1])
    est.grow_features(6)
    assert est.warming_up_ and est.n_pending_ == 600
    est.partial_fit(sp.csr_matrix(np.hstack([X[600:], np.ones((1900, 1))])), y[600:])
    assert not est.warming_up_
    held, seen = est.n_pending_, est.n_seen_
    d_new = 20_000  # 64 MiB / (8 * 20,000) = 419 rows fit the buffer now
    assert held > buffer_capacity(DEFAULT_SHUFFLE_BUFFER, d_new)
    learned = est.t_ - est.n_rehearsed_ - est.n_replayed_
    est.grow_features(d_new)
    assert est.n_pending_ == buffer_capacity(DEFAULT_SHUFFLE_BUFFER, d_new) and est.n_seen_ == seen
    assert est.t_ - est.n_rehearsed_ - est.n_replayed_ == learned + held - est.n_pending_
    assert est.last_y_.shape[0] == held - est.n_pending_
