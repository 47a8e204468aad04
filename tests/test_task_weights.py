"""Importance weights on the regression and novelty models (issues 38 and 39; docs/weights.md):
each task kernel's weighted step against a brute-force re-computation of one update, w = 0
learns nothing (the state equal array for array), bad weights change nothing, and the streaming
pipelines carry each row's weight through the warm-up window, its order and the rehearsal
memory, saved with the rows (an older state loads with ones)."""

from __future__ import annotations

import numpy as np
import pytest

from svmstream.solvers.budgeted.tasks import BudgetedOneClassSVM, BudgetedSCARegressor, BudgetedSGDRegressor
from svmstream.solvers.online.novelty import StreamingNovelty
from svmstream.solvers.online.tasks import StreamingRegressor
from svmstream.solvers.persistence import estimator_from_state
from tests.test_weights import BAD_SAMPLE_WEIGHTS

GAMMA = 0.3


def _data(n=80, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=n)
    return X, y


def _rbf(x, Z, gamma=GAMMA):
    return np.exp(-gamma * ((Z - x) ** 2).sum(axis=1))


def _arrays_equal(a, b):
    sa, sb = a.get_state()[0], b.get_state()[0]
    assert sorted(sa) == sorted(sb)
    for name in sa:
        np.testing.assert_array_equal(sa[name], sb[name], err_msg=name)


def _fit(est, X, y):
    return est.partial_fit(X) if isinstance(est, BudgetedOneClassSVM) else est.partial_fit(X, y)


# ------------------------------------------------------------------ one weighted step, brute force
@pytest.mark.parametrize("k", [0.25, 1.0, 3.0])
@pytest.mark.parametrize("row", [40, 47, 53])
def test_sgd_regressor_weighted_step_equals_brute_force(k, row):
    """ε-insensitive BSGD: w <- (1 - ηλ)w, then + η·k·sign(y - f)·φ(x) and b += η·k·sign(y - f)
    when |y - f| > ε (the loss's gradient term scaled by k; t and the shrink unweighted)."""
    X, y = _data()
    lam, eps = 0.02, 0.05
    est = BudgetedSGDRegressor(budget=200, gamma=GAMMA, lambda_=lam, epsilon=eps, fit_intercept=True)
    est.partial_fit(X[:40], y[:40])
    Z, x = X[60:], X[row]
    b, f_Z = est.intercept_, est.predict(Z)
    f = est.predict(x[None])[0]
    t = est.n_steps_ + 1
    eta = 1.0 / (lam * t)
    expected = (1 - eta * lam) * (f_Z - b) + b
    violated = abs(y[row] - f) > eps
    if violated:
        sign = np.sign(y[row] - f)
        expected = expected + eta * k * sign * (_rbf(x, Z) + 1.0)
    est.partial_fit(X[row : row + 1], y[row : row + 1], sample_weight=[k])
    assert violated  # the rows chosen step: the weight is tested
    np.testing.assert_allclose(est.predict(Z), expected, rtol=1e-10, atol=1e-12)
    assert est.n_steps_ == t


@pytest.mark.parametrize("k", [0.2, 1.0, 4.0])
@pytest.mark.parametrize("row", [40, 48, 53])
def test_sca_regressor_weighted_box_equals_brute_force(k, row):
    """ε-SVR dual step (streaming, α = 0): δ = clip(soft(y - f, ε), -C·k, C·k) (box C·w_i)."""
    X, y = _data()
    C, eps = 0.3, 0.05
    est = BudgetedSCARegressor(budget=200, gamma=GAMMA, C=C, epsilon=eps)
    est.partial_fit(X[:40], y[:40])
    Z, x = X[60:], X[row]
    f_Z = est.predict(Z)
    z = y[row] - est.predict(x[None])[0]
    delta = float(np.clip(np.sign(z) * max(abs(z) - eps, 0.0), -C * k, C * k))
    est.partial_fit(X[row : row + 1], y[row : row + 1], sample_weight=np.array([k]))
    assert delta != 0.0
    np.testing.assert_allclose(est.predict(Z), f_Z + delta * _rbf(x, Z), rtol=1e-10, atol=1e-12)
    assert np.all(np.abs(est.dual_coef_) <= C * max(k, 1.0) + 1e-12)


@pytest.mark.parametrize("k", [0.5, 1.0, 2.5])
@pytest.mark.parametrize("far", [False, True])
def test_oneclass_weighted_step_equals_brute_force(k, far):
    """NORMA novelty step: w <- (1 - ην)w; if f(x) < ρ: + η·k·φ(x) and ρ -= η(k - ν), else
    ρ += ην (the hinge term scaled by k)."""
    X, _ = _data()
    nu = 0.3
    est = BudgetedOneClassSVM(budget=200, gamma=GAMMA, nu=nu).partial_fit(X[:40])
    Z = X[60:]
    x = X[45] * (4.0 if far else 0.0)  # far: outside the boundary (a step); 0: the centre
    s_Z, rho = est.score_samples(Z), est.offset_
    f = est.score_samples(x[None])[0]
    t = est.n_steps_ + 1
    eta = 1.0 / (nu * t)
    inside = f >= rho
    assert inside != far
    expected = (1 - eta * nu) * s_Z + (0.0 if inside else eta * k * _rbf(x, Z))
    rho_new = rho + eta * nu if inside else rho - eta * (k - nu)
    est.partial_fit(x[None], sample_weight=[k])
    np.testing.assert_allclose(est.score_samples(Z), expected, rtol=1e-10, atol=1e-12)
    assert est.offset_ == pytest.approx(rho_new, rel=1e-12, abs=1e-12)


# ------------------------------------------------------------------ w = 0, unit weights, bad weights
ESTIMATORS = [
    lambda: BudgetedSGDRegressor(budget=30, random_state=0),
    lambda: BudgetedSCARegressor(budget=30, random_state=0),
    lambda: BudgetedOneClassSVM(budget=30, random_state=0),
]
PIPELINES = [
    lambda: StreamingRegressor(BudgetedSCARegressor(budget=30), warmup=20, rehearsal=2, random_state=0),
    lambda: StreamingRegressor(BudgetedSGDRegressor(budget=30), warmup=20, rehearsal=0, random_state=0),
    lambda: StreamingNovelty(BudgetedOneClassSVM(budget=30), warmup=20, random_state=0),
]


@pytest.mark.parametrize("make", ESTIMATORS + PIPELINES)
def test_zero_weight_learns_nothing(make):
    """w = 0: every saved array after the batch equals the one before it (a pipeline counts the
    rows as received and learned, and as zero_weight)."""
    X, y = _data(n=120)
    a, b = make(), make()
    for est in (a, b):
        _fit(est, X[:80], y[:80])
    a.partial_fit(X[80:], y[80:], sample_weight=np.zeros(40))
    _arrays_equal(a, b)
    if hasattr(a, "report"):
        examples = a.report().examples
        assert examples.received == 120 == examples.learned + examples.pending + examples.refused
        assert examples.learned == b.report().examples.learned + 40
        assert a.weight_figures() == {"sum": 80.0, "weighted": True, "zero_weight": 40}


@pytest.mark.parametrize("make", PIPELINES)
def test_zero_weight_rows_are_as_if_not_sent(make):
    """Rows of weight 0 inside the window and after it: the model of the other rows alone."""
    X, y = _data(n=200, seed=1)
    w = np.where(np.arange(200) % 3 == 0, 0.0, 1.0)
    a, b = make(), make()
    a.partial_fit(X, y, sample_weight=w)
    b.partial_fit(X[w > 0], y[w > 0])
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    assert a.report().examples.received == 200 == a.report().examples.learned


@pytest.mark.parametrize("make", ESTIMATORS + PIPELINES)
def test_unit_weights_equal_no_weights(make):
    X, y = _data(n=150, seed=2)
    a, b = make(), make()
    a.partial_fit(X, y, sample_weight=np.ones(150))
    _fit(b, X, y)
    _arrays_equal(a, b)


@pytest.mark.parametrize(
    ("weights", "message"),
    BAD_SAMPLE_WEIGHTS,
)
@pytest.mark.parametrize("make", ESTIMATORS + PIPELINES)
def test_bad_weights_change_nothing(weights, message, make):
    X, y = _data(n=50)
    a, b = make(), make()
    for est in (a, b):
        _fit(est, X[:40], y[:40])
    with pytest.raises(ValueError, match=message):
        a.partial_fit(X[40:43], y[40:43], sample_weight=weights)
    _arrays_equal(a, b)
    if hasattr(a, "report"):
        assert a.report().examples == b.report().examples


# ------------------------------------------------------------------ weights travel with their rows
@pytest.mark.parametrize("make", PIPELINES)
def test_weights_travel_with_their_rows(make):
    """The window's random order and the reservoir keep each row's weight: the same weights in
    two calls equal one call, doubling them changes the model, and a restart mid-window (the
    window's weights saved) equals the uninterrupted run."""
    X, y = _data(n=300, seed=3)
    w = np.random.default_rng(0).uniform(0.1, 3.0, 300)
    a, b, c, d = make(), make(), make(), make()
    a.partial_fit(X, y, sample_weight=w)
    b.partial_fit(X[:13], y[:13], sample_weight=w[:13])  # inside the window
    b = estimator_from_state(*b.get_state())
    b.partial_fit(X[13:130], y[13:130], sample_weight=w[13:130])
    b = estimator_from_state(*b.get_state())
    b.partial_fit(X[130:], y[130:], sample_weight=w[130:])
    c.partial_fit(X, y, sample_weight=2 * w)
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    assert np.abs(a.decision_function(X) - c.decision_function(X)).max() > 1e-6
    d.partial_fit(X, y)
    assert np.abs(a.decision_function(X) - d.decision_function(X)).max() > 1e-6
    fa, fb = a.weight_figures(), b.weight_figures()
    assert fa["sum"] == pytest.approx(fb["sum"], rel=1e-12) == pytest.approx(w.sum(), rel=1e-12)
    assert fa["weighted"] is fb["weighted"] is True and fa["zero_weight"] == fb["zero_weight"] == 0


def test_rehearsal_memory_keeps_each_rows_weight():
    """The reservoir remembers each row with its own weight (found back by its target), and the
    rehearsal steps on it use that weight: weighted rehearsal differs from unweighted."""
    X, y = _data(n=200, seed=4)
    w = np.random.default_rng(1).uniform(0.2, 3.0, 200)

    def mk():
        return StreamingRegressor(
            BudgetedSCARegressor(budget=60, C=0.5),
            warmup=10,
            rehearsal=3,
            rehearsal_memory=50,
            random_state=0,
        )

    a, b = mk().partial_fit(X, y, sample_weight=w), mk().partial_fit(X, y)
    held = int(a._mem_n[0])
    assert held == 50
    original = a._target.inverse(a._mem_y[:held])
    index = np.array([int(np.argmin(np.abs(y - v))) for v in original])
    np.testing.assert_allclose(y[index], original, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(a._mem_w[:held], w[index])
    assert np.abs(a.decision_function(X) - b.decision_function(X)).max() > 1e-6


def test_an_older_state_loads_with_unit_weights():
    """A state saved before weights (no window_w, no _mem_w, no weight figures): its held rows
    weigh 1, and it learns on as the model that never stopped."""
    X, y = _data(n=300, seed=5)
    a = StreamingRegressor(BudgetedSCARegressor(budget=30), warmup=50, rehearsal=2, random_state=0)
    a.partial_fit(X[:30], y[:30])  # inside the window
    arrays, meta = a.get_state()
    old = {k: v for k, v in arrays.items() if k not in ("window_w", "_mem_w")}
    old_meta = {k: v for k, v in meta.items() if k != "weights"}
    b = estimator_from_state(old, old_meta)
    assert b.weight_figures() == {"sum": 30.0, "weighted": False, "zero_weight": 0}
    for est in (a, b):
        est.partial_fit(X[30:], y[30:])
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    a.partial_fit(X[:100], y[:100])
    arrays, meta = a.get_state()
    old = {k: v for k, v in arrays.items() if k not in ("window_w", "_mem_w")}
    c = estimator_from_state(old, {k: v for k, v in meta.items() if k != "weights"})
    np.testing.assert_array_equal(c._mem_w, np.ones_like(c._mem_w))
