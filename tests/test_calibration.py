"""MarginCalibrator: the fit is the documented minimiser, probabilities never contradict the
predicted class, refits do not depend on how rows are split into calls, exact state round
trip, class addition, and the ECE helper."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import log_expit, logsumexp
from sklearn.datasets import load_digits, make_classification
from sklearn.svm import LinearSVC

from svmstream.solvers.calibration import MIN_ROWS, MarginCalibrator, expected_calibration_error


# ----------------------------------------------------------------------------- data
def _binary_margins(n=1200, seed=0):
    """Held-out margins of a linear SVM on a noisy binary problem, class indices 0/1."""
    X, y = make_classification(n_samples=2 * n, n_features=10, flip_y=0.1, random_state=seed)
    clf = LinearSVC(C=0.5, random_state=seed).fit(X[:n], y[:n])
    return clf.decision_function(X[n:]), y[n:].astype(np.int64)


def _multi_margins():
    """Held-out one-vs-rest margins of a linear SVM on the digits (10 classes)."""
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    clf = LinearSVC(C=0.05, random_state=0).fit(X[:900], y[:900])
    return clf.decision_function(X[900:]), y[900:].astype(np.int64)


def _brute_force_slope(margins, y):
    """Minimiser of the documented smoothed log-loss, by bounded Brent on the raw objective."""
    n = margins.shape[0]
    eps = 1.0 / (n + 2.0)
    if margins.ndim == 1:
        t = np.where(y == 1, 1.0 - eps, eps)
        loss = lambda a: -np.sum(t * log_expit(a * margins) + (1 - t) * log_expit(-a * margins))
    else:
        K = margins.shape[1]
        q = np.full(margins.shape, eps / (K - 1))
        q[np.arange(n), y] = 1.0 - eps
        loss = lambda a: np.sum(logsumexp(a * margins, axis=1) - a * np.sum(q * margins, axis=1))
    res = minimize_scalar(loss, bounds=(1e-4, 100.0), method="bounded", options={"xatol": 1e-12})
    return res.x


# ----------------------------------------------------------------------------- fitting
def test_binary_fit_is_the_log_loss_minimiser():
    f, y = _binary_margins()
    cal = MarginCalibrator(2).fit(f, y)
    assert cal.fitted_ and cal.n_fitted_ == f.shape[0] and cal.n_fits_ == 1
    assert cal.slope_ == pytest.approx(_brute_force_slope(f, y), rel=1e-4)
    assert cal.temperature_ == pytest.approx(1.0 / cal.slope_)


def test_multiclass_fit_is_the_log_loss_minimiser():
    f, y = _multi_margins()
    cal = MarginCalibrator(10).fit(f, y)
    assert cal.fitted_
    assert cal.slope_ == pytest.approx(_brute_force_slope(f, y), rel=1e-4)


@pytest.mark.parametrize("start", [1e-3, 1.0, 50.0])
def test_fit_does_not_depend_on_the_starting_slope(start):
    f, y = _multi_margins()
    cal = MarginCalibrator(10)
    cal.slope_ = start  # the warm start of the next fit
    cal._refit(f, y)
    assert cal.slope_ == pytest.approx(_brute_force_slope(f, y), rel=1e-6)


def test_separable_window_gives_a_finite_slope():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 500)
    f = np.where(y == 1, 1.0, -1.0) * rng.uniform(0.5, 2.0, 500)  # every row on its side
    cal = MarginCalibrator(2).fit(f, y)
    assert cal.fitted_ and np.isfinite(cal.slope_) and 0 < cal.slope_ < 100
    assert cal.slope_ == pytest.approx(_brute_force_slope(f, y), rel=1e-4)
    # the most confident probability reflects n rows, not certainty
    assert cal.predict_proba(np.array([0.5]))[0, 1] < 1.0 - 1e-6


def test_defaults_before_enough_data():
    f, y = _binary_margins()
    cal = MarginCalibrator(2)
    cal.update(f[: MIN_ROWS - 1], y[: MIN_ROWS - 1])
    assert not cal.fitted_ and cal.slope_ == 1.0 and cal.n_fitted_ == 0
    np.testing.assert_allclose(cal.predict_proba(np.array([2.0]))[0, 1], 1.0 / (1.0 + np.exp(-2.0)))
    one_class = MarginCalibrator(2).fit(f[y == 1], y[y == 1])
    assert not one_class.fitted_ and one_class.slope_ == 1.0
    zeros = MarginCalibrator(2).fit(np.zeros(100), np.arange(100) % 2)
    assert not zeros.fitted_  # no information about the slope


def test_refit_schedule():
    f, y = _binary_margins(n=2000)
    cal = MarginCalibrator(2, window=2000, refit_every=500)
    fits = []
    for i in range(1600):
        before = cal.n_fits_
        cal.update(f[i : i + 1], y[i : i + 1])
        if cal.n_fits_ != before:
            fits.append(cal.n_seen_)
    assert fits == [50, 100, 200, 400, 500, 1000, 1500]
    assert cal.n_fitted_ == 1500 and cal.n_window_ == 1600


def test_window_keeps_the_most_recent_rows():
    f, y = _binary_margins(n=1200)
    cal = MarginCalibrator(2, window=300, refit_every=100)
    cal.update(f, y)  # refits at 1200: on rows 900..1199
    ref = MarginCalibrator(2).fit(f[900:], y[900:])
    assert cal.slope_ == pytest.approx(ref.slope_, rel=1e-6)
    assert sorted(cal.get_state()[0]["margins"].tolist()) == sorted(f[900:].tolist())


@pytest.mark.parametrize("window, refit_every", [(2000, 500), (300, 700), (128, 50)])
def test_batch_split_independence(window, refit_every):
    f, y = _multi_margins()
    f, y = np.vstack([f, f])[:1000], np.concatenate([y, y])[:1000]  # 1000 rows
    one = MarginCalibrator(10, window=window, refit_every=refit_every)
    one.update(f, y)
    split = MarginCalibrator(10, window=window, refit_every=refit_every)
    for lo, hi in zip([0, 3, 4, 180, 181, 602, 999], [3, 4, 180, 181, 602, 999, 1000]):  # 7 uneven calls
        split.update(f[lo:hi], y[lo:hi])
    assert one.slope_ == split.slope_ and one.n_fits_ == split.n_fits_ > 1
    a1, m1 = one.get_state()
    a2, m2 = split.get_state()
    assert m1 == m2
    for key in a1:
        np.testing.assert_array_equal(a1[key], a2[key])


# ----------------------------------------------------------------------------- predictions
def test_rows_sum_to_one_and_shapes():
    f, y = _binary_margins()
    cal = MarginCalibrator(2).fit(f, y)
    p = cal.predict_proba(f)
    assert p.shape == (f.shape[0], 2) and p.dtype == np.float64
    np.testing.assert_array_equal(p.sum(axis=1), 1.0)  # binary: exactly
    fm, ym = _multi_margins()
    pm = MarginCalibrator(10).fit(fm, ym).predict_proba(fm)
    assert pm.shape == fm.shape
    np.testing.assert_allclose(pm.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert MarginCalibrator(3).predict_proba(np.zeros((0, 3))).shape == (0, 3)


@pytest.mark.parametrize("slope", [1e-300, 1e-9, 1.0, 7.3, 1e9])
def test_binary_argmax_is_the_prediction(slope):
    rng = np.random.default_rng(1)
    f = np.concatenate(
        [rng.normal(size=2000), [0.0, -0.0, 1e-300, -1e-300, 5e-324, -5e-324, 1e-17, -1e-17, 800.0, -800.0]]
    )
    cal = MarginCalibrator(2)
    cal.slope_ = slope
    p = cal.predict_proba(f)
    np.testing.assert_array_equal(p[:, 1] > 0.5, f > 0)
    np.testing.assert_array_equal(np.argmax(p, axis=1), (f > 0).astype(int))
    assert np.all(p >= 0) and np.all(p <= 1)


@pytest.mark.parametrize("slope", [1e-300, 1e-12, 1.0, 3.0, 1e12])
def test_multiclass_argmax_is_the_prediction(slope):
    rng = np.random.default_rng(2)
    f = rng.normal(size=(3000, 6))
    f[:500] = np.round(f[:500])  # many exact ties, resolved to the lowest index
    f[500:600] = 0.0
    f[600:700, 3] = f[600:700, 1] = f[600:700].max(axis=1) + 1.0  # tie for the top
    top = f[700:900].max(axis=1)
    f[700:800, 0] = np.nextafter(top[:100], np.inf)  # beats the rest by one ulp
    f[800:900, 5] = np.nextafter(top[100:], np.inf)
    f[900:1000] *= 1e-300
    cal = MarginCalibrator(6)
    cal.slope_ = slope
    p = cal.predict_proba(f)
    np.testing.assert_array_equal(np.argmax(p, axis=1), np.argmax(f, axis=1))
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert np.all(p >= 0)


def test_probabilities_are_temperature_softmax():
    f, y = _multi_margins()
    cal = MarginCalibrator(10).fit(f, y)
    z = cal.slope_ * f
    expected = np.exp(z - logsumexp(z, axis=1, keepdims=True))
    np.testing.assert_allclose(cal.predict_proba(f), expected, rtol=1e-12, atol=1e-15)
    fb, yb = _binary_margins()
    calb = MarginCalibrator(2).fit(fb, yb)
    np.testing.assert_allclose(calb.predict_proba(fb)[:, 1], 1 / (1 + np.exp(-calb.slope_ * fb)), rtol=1e-12)


def test_calibration_improves_log_loss():
    f, y = _multi_margins()
    half = f.shape[0] // 2
    cal = MarginCalibrator(10).fit(f[:half], y[:half])
    p_cal = cal.predict_proba(f[half:])
    p_raw = MarginCalibrator(10).predict_proba(f[half:])
    ll = lambda p: -np.mean(np.log(p[np.arange(p.shape[0]), y[half:]]))
    assert ll(p_cal) < ll(p_raw)


# ----------------------------------------------------------------------------- errors
def test_invalid_input():
    with pytest.raises(ValueError, match="n_classes"):
        MarginCalibrator(1)
    with pytest.raises(ValueError, match="window"):
        MarginCalibrator(2, window=0)
    cal = MarginCalibrator(3)
    with pytest.raises(ValueError, match="shape"):
        cal.predict_proba(np.zeros(4))
    with pytest.raises(ValueError, match="finite"):
        cal.predict_proba(np.array([[0.0, np.nan, 1.0]]))
    with pytest.raises(ValueError, match="y_index"):
        cal.update(np.zeros((2, 3)), np.array([0, 3]))
    with pytest.raises(ValueError, match="y_index"):
        cal.update(np.zeros((2, 3)), np.array([0.0, 1.0]))
    assert cal.n_seen_ == 0
    with pytest.raises(ValueError, match="shape"):
        MarginCalibrator(2).fit(np.zeros((4, 2)), np.zeros(4, dtype=int))


# ----------------------------------------------------------------------------- state
def _round_trip(cal):
    arrays, meta = cal.get_state()
    meta = json.loads(json.dumps(meta))  # JSON-able
    for value in arrays.values():
        assert isinstance(value, np.ndarray) and value.dtype != object
    return MarginCalibrator.from_state({k: v.copy() for k, v in arrays.items()}, meta)


@pytest.mark.parametrize("kind", ["binary", "multi"])
def test_state_round_trip(kind):
    f, y = _binary_margins() if kind == "binary" else _multi_margins()
    K = 2 if kind == "binary" else 10
    cal = MarginCalibrator(K, window=400, refit_every=150)
    cal.update(f[:700], y[:700])
    copy = _round_trip(cal)
    np.testing.assert_array_equal(copy.predict_proba(f), cal.predict_proba(f))
    for name in ("slope_", "fitted_", "n_fitted_", "n_fits_", "n_seen_", "n_window_", "n_classes"):
        assert getattr(copy, name) == getattr(cal, name)
    # later refits are identical too (same window layout, same warm start)
    cal.update(f[700:], y[700:])
    copy.update(f[700:], y[700:])
    assert copy.slope_ == cal.slope_
    np.testing.assert_array_equal(copy.predict_proba(f), cal.predict_proba(f))
    fresh = _round_trip(MarginCalibrator(K))
    assert not fresh.fitted_ and fresh.slope_ == 1.0


def test_state_errors():
    arrays, meta = MarginCalibrator(2).get_state()
    with pytest.raises(ValueError, match="version"):
        MarginCalibrator.from_state(arrays, {**meta, "version": 99})
    with pytest.raises(ValueError, match="do not match"):
        MarginCalibrator.from_state({**arrays, "margins": np.zeros(3)}, meta)


# ----------------------------------------------------------------------------- add_class
def test_add_class_from_binary():
    f, y = _binary_margins()
    cal = MarginCalibrator(2, window=500)
    cal.update(f, y)
    slope, p_bin = cal.slope_, cal.predict_proba(f)
    window = cal.get_state()[0]["margins"].copy()
    cal.add_class()
    assert cal.n_classes == 3 and cal.slope_ == slope
    converted = cal.get_state()[0]["margins"]
    np.testing.assert_array_equal(
        converted, np.column_stack([-window / 2, window / 2, np.zeros_like(window)])
    )
    rows = np.column_stack([-f / 2, f / 2, np.zeros_like(f)])
    p = cal.predict_proba(rows)
    # the old classes keep their binary probabilities, scaled by what the new class leaves
    np.testing.assert_allclose(p[:, :2], p_bin * (1.0 - p[:, 2:]), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(p[:, :2] / p[:, :2].sum(axis=1, keepdims=True), p_bin, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(np.argmax(p, axis=1), np.argmax(rows, axis=1))
    # it keeps learning with three classes
    y3 = np.where(np.arange(f.shape[0]) % 7 == 0, 2, y)
    cal.update(rows, y3)
    assert cal.fitted_ and cal.n_classes == 3


def test_add_class_multiclass():
    f, y = _multi_margins()
    cal = MarginCalibrator(10, window=300)
    cal.update(f, y)
    window, slope = cal.get_state()[0]["margins"].copy(), cal.slope_
    cal.add_class()
    assert cal.n_classes == 11 and cal.slope_ == slope
    np.testing.assert_array_equal(
        cal.get_state()[0]["margins"], np.column_stack([window, np.zeros(len(window))])
    )
    p = cal.predict_proba(np.column_stack([f, np.zeros(len(f))]))
    p10 = MarginCalibrator(10)
    p10.slope_ = slope
    q = p10.predict_proba(f)
    np.testing.assert_allclose(p[:, :10] / p[:, :10].sum(axis=1, keepdims=True), q, rtol=1e-12, atol=1e-15)
    assert _round_trip(cal).n_classes == 11


# ----------------------------------------------------------------------------- ECE
def test_expected_calibration_error_matches_a_direct_computation():
    rng = np.random.default_rng(3)
    n, K = 5000, 4
    proba = rng.dirichlet(np.full(K, 0.5), size=n)
    proba[:10] = np.eye(K)[rng.integers(0, K, 10)]  # confidence exactly 1
    proba[10:20] = 0.25  # exactly 1/K, the lowest confidence
    proba[20:30] = [0.3, 0.3, 0.2, 0.2]  # 0.3 and 0.7: bin edges
    proba[30:40] = [0.7, 0.1, 0.1, 0.1]
    y = rng.integers(0, K, n)
    conf, pred = proba.max(axis=1), proba.argmax(axis=1)
    ece = 0.0
    for b in range(10):
        lo, hi = b / 10, (b + 1) / 10
        inside = (conf > lo) & (conf <= hi) if b else conf <= hi
        if inside.any():
            ece += inside.sum() / n * abs(np.mean(pred[inside] == y[inside]) - np.mean(conf[inside]))
    assert expected_calibration_error(proba, y) == pytest.approx(ece, rel=1e-9, abs=1e-15)
    assert expected_calibration_error(np.eye(3), np.arange(3)) == 0.0
    assert expected_calibration_error(np.eye(3), np.array([1, 2, 0])) == pytest.approx(1.0)
    assert expected_calibration_error(np.zeros((0, 2)), np.zeros(0, dtype=int)) == 0.0
    with pytest.raises(ValueError):
        expected_calibration_error(proba, y[:-1])
