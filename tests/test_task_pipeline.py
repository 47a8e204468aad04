"""The streaming pipelines of regression and novelty (issue 38, item 2): warm-up scaling of X and
y, rehearsal, split-conformal intervals, the false-alarm threshold, drift, the count of every row,
saved state, and the stages off = the plain estimator."""

import numpy as np
import pytest

from svmstream.solvers.budgeted.tasks import BudgetedOneClassSVM, BudgetedSCARegressor, BudgetedSGDRegressor
from svmstream.solvers.online.novelty import StreamingNovelty
from svmstream.solvers.online.stages.recent import ConformalIntervals, ScoreThreshold
from svmstream.solvers.online.tasks import StreamingRegressor
from svmstream.solvers.persistence import estimator_from_state


def _regression(n, seed=0, scale=1000.0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (n, 3)) * np.array([1.0, 50.0, 0.01])  # raw, unscaled features
    y = scale * (np.sin(X[:, 0]) + 0.02 * X[:, 1]) + 0.1 * scale * rng.normal(size=n)
    return X, y


def _feed(model, X, y=None, batch=500):
    for lo in range(0, X.shape[0], batch):
        model.partial_fit(X[lo : lo + batch], None if y is None else y[lo : lo + batch])
    return model


def test_conformal_quantile_is_the_finite_sample_one():
    stage = ConformalIntervals(window=10)
    stage.observe(np.arange(1.0, 20.0))  # keeps the last 10: 10..19
    assert sorted(stage.values) == list(np.arange(10.0, 20.0))
    assert stage.half_width(0.5) == 15.0  # ceil(11 * 0.5) = 6th smallest
    assert stage.half_width(0.95) == np.inf  # ceil(11 * 0.95) = 11 > 10
    threshold = ScoreThreshold(window=100)
    threshold.observe(np.arange(100.0))
    assert threshold.threshold(0.05) == 95.0  # ceil(101 * 0.95) = 96th smallest


def test_target_scale_does_not_change_the_model():
    """ε and C mean the same on any scale of y (TransformedTargetRegressor(SVR(), StandardScaler()))."""
    X, y = _regression(1500)
    small = _feed(StreamingRegressor(random_state=0), X, y)
    large = _feed(StreamingRegressor(random_state=0), X, y * 1e6)
    np.testing.assert_allclose(large.predict(X[:200]), small.predict(X[:200]) * 1e6, rtol=1e-6)


@pytest.mark.parametrize("order", ["file", "feature-sorted"])
def test_intervals_cover_and_model_learns(order):
    """A stream sorted by a feature is learned (rehearsal; a target-sorted one: the growing
    scales, test_target_sorted_stream_grows_the_scales)."""
    X, y = _regression(6000)
    Xtr, ytr, Xte, yte = X[:4000], y[:4000], X[4000:], y[4000:]
    if order != "file":
        idx = np.argsort(Xtr[:, 2])  # a field y does not depend on
        Xtr, ytr = Xtr[idx], ytr[idx]
    model = _feed(StreamingRegressor(random_state=0), Xtr, ytr)
    rmse = np.sqrt(np.mean((model.predict(Xte) - yte) ** 2))
    assert rmse < 0.5 * np.std(yte)
    if order == "file":  # exchangeable residuals: the conformal guarantee holds
        lower, upper = model.predict_interval(Xte, 0.9)
        coverage = np.mean((lower <= yte) & (yte <= upper))
        assert 0.86 <= coverage <= 0.94, coverage


def test_novelty_threshold_and_scores():
    rng = np.random.default_rng(1)
    inliers = rng.normal(size=(5000, 4)) * np.array([1.0, 10.0, 100.0, 0.1])
    outliers = rng.normal(size=(500, 4)) * np.array([1.0, 10.0, 100.0, 0.1]) * 4.0
    model = _feed(StreamingNovelty(random_state=0), inliers[:4000])
    held = model.outlier(inliers[4000:]).mean()
    assert 0.01 <= held <= 0.09, held
    assert model.outlier(outliers).mean() > 0.5
    from sklearn.metrics import roc_auc_score

    scores = model.score_samples(np.vstack([inliers[4000:], outliers]))
    assert roc_auc_score(np.r_[np.zeros(1000), np.ones(500)], scores) > 0.9


@pytest.mark.parametrize("kind", ["regression", "novelty"])
def test_every_row_is_counted_and_state_round_trips(kind):
    X, y = _regression(1400)
    make = (
        (lambda: StreamingRegressor(random_state=3))
        if kind == "regression"
        else (lambda: StreamingNovelty(random_state=3))
    )
    model = make()
    model.partial_fit(X[:150], y[:150] if kind == "regression" else None)
    assert (model.n_received_, model.n_learned_, model.n_pending_) == (150, 0, 150)  # warming up
    copy_warm = estimator_from_state(*model.get_state())
    _feed(model, X[150:700], y[150:700] if kind == "regression" else None, batch=137)
    assert model.n_received_ == model.n_learned_ + model.n_pending_ == 700
    copy = estimator_from_state(*model.get_state())
    for m in (model, copy):
        _feed(m, X[700:], y[700:] if kind == "regression" else None, batch=211)
    _feed(copy_warm, X[150:], y[150:] if kind == "regression" else None, batch=300)
    out = (lambda m: m.predict(X)) if kind == "regression" else (lambda m: m.score_samples(X))
    np.testing.assert_array_equal(out(copy), out(model))
    np.testing.assert_array_equal(out(copy_warm), out(model))  # batch cuts do not matter


@pytest.mark.parametrize(
    "plain",
    [
        BudgetedSCARegressor(budget=40, gamma=0.3, C=2.0, epsilon=0.05),
        BudgetedSGDRegressor(budget=40, gamma=0.3, C=2.0, epsilon=0.05, fit_intercept=True),
        BudgetedOneClassSVM(budget=40, gamma=0.3, nu=0.3),
    ],
)
def test_stages_off_equal_the_plain_estimator(plain):
    X, y = _regression(900, scale=1.0)
    X = X / X.std(axis=0)
    novelty = isinstance(plain, BudgetedOneClassSVM)
    cls = StreamingNovelty if novelty else StreamingRegressor
    off = dict(warmup=0, scaling="none", rehearsal=0) | ({} if novelty else {"target_scaling": False})
    model = _feed(cls(plain, **off), X, None if novelty else y, batch=128)
    ref = _feed(type(plain)(**plain.get_params()), X, None if novelty else y, batch=300)
    got = -model.score_samples(X) if novelty else model.predict(X)
    want = ref.decision_function(X) if novelty else ref.predict(X)
    assert np.max(np.abs(got - want)) <= 1e-12


def test_bad_input_is_refused_and_changes_nothing():
    X, y = _regression(300)
    model = _feed(StreamingRegressor(random_state=0), X, y)
    before = model.predict(X[:5])
    with pytest.raises(ValueError, match="finite numbers"):
        model.partial_fit(X[:2], np.array(["a", "b"]))
    with pytest.raises(ValueError, match="finite"):
        model.partial_fit(X[:2], np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="NaN or infinity"):
        model.partial_fit(np.where(X[:2] > 0, np.inf, X[:2]), y[:2])
    assert model.n_received_ == 300
    np.testing.assert_array_equal(model.predict(X[:5]), before)


def test_target_sorted_stream_grows_the_scales():
    """A stream sorted by its target (ggplot2::diamonds by price) leaves the warm-up window's
    scale: the target's and the features' factors grow (stages.growth) and the model keeps
    learning; with the scales fixed by the window it learns much worse."""
    X, y = _regression(6000, seed=2)
    y = y + 40.0 * X[:, 1]  # a wide target that the sort puts far outside the window
    Xtr, ytr, Xte, yte = X[:4000], y[:4000], X[4000:], y[4000:]
    idx = np.argsort(ytr)
    Xtr, ytr = Xtr[idx], ytr[idx]
    grown = _feed(StreamingRegressor(random_state=0), Xtr, ytr)
    fixed = _feed(StreamingRegressor(feature_growth=None, target_growth=None, random_state=0), Xtr, ytr)
    assert grown._target.std > 3 * fixed._target.std
    assert np.any(grown._factor > 1.5 * fixed._factor)
    rmse = [np.sqrt(np.mean((m.predict(Xte) - yte) ** 2)) for m in (grown, fixed)]
    assert rmse[0] < 0.6 * rmse[1], rmse
    # the growth checks fall on the same rows however the stream is cut
    other = _feed(StreamingRegressor(random_state=0), Xtr, ytr, batch=233)
    np.testing.assert_array_equal(other.predict(Xte), grown.predict(Xte))
    # a restart mid-stream, after growths, continues exactly
    half = _feed(StreamingRegressor(random_state=0), Xtr[:2100], ytr[:2100])
    assert half._target.std > 1.5 * fixed._target.std
    restored = estimator_from_state(*half.get_state())
    for m in (half, restored):
        _feed(m, Xtr[2100:], ytr[2100:], batch=300)
    np.testing.assert_array_equal(restored.predict(Xte), grown.predict(Xte))
    np.testing.assert_array_equal(half.predict(Xte), grown.predict(Xte))
    # BSGD's steps were measured worse with growing scales: its pipeline keeps the window's
    bsgd = _feed(StreamingRegressor(BudgetedSGDRegressor(budget=100), rehearsal=0, random_state=0), Xtr, ytr)
    assert bsgd._target.std == fixed._target.std
    np.testing.assert_array_equal(bsgd._factor, fixed._factor)


def test_rescaling_the_engine_keeps_its_function():
    """A target growth multiplies the coefficients by old/new: the raw
    prediction is unchanged; a feature growth moves every SV to the same raw point."""
    X, y = _regression(400, scale=1.0)
    X = X / X.std(axis=0)
    est = BudgetedSCARegressor(budget=60, epochs=3, random_state=0).fit(X, y)
    before, svs = est.predict(X), est.support_vectors_
    est.rescale(None, 0.25)
    np.testing.assert_allclose(est.predict(X), 0.25 * before, rtol=0, atol=1e-12)
    ratio = np.array([0.5, 1.0, 0.8])
    est.rescale(ratio, 1.0)
    np.testing.assert_allclose(est.support_vectors_, svs * ratio, rtol=0, atol=1e-15)
    np.testing.assert_allclose(est._sv_sq[: est.n_support_], np.sum((svs * ratio) ** 2, axis=1), rtol=1e-12)


def test_novelty_threshold_from_the_reservoir():
    """The 5 % threshold is the conformal quantile of the remembered rows' out-of-sample scores
    and flags 3-7 % of held inliers; under Pegasos every entered row weighs 1/(νT) (what the
    kernel subtracts as a row's own part)."""
    from svmstream.solvers.online.stages.recent import upper_quantile

    rng = np.random.default_rng(1)
    inliers = rng.normal(size=(7000, 4)) * np.array([1.0, 10.0, 100.0, 0.1])
    model = _feed(StreamingNovelty(random_state=0), inliers[:4000])
    held = model._mem_s[: model._mem_n[0]]
    assert model.threshold_ == upper_quantile(held, 0.95)
    flagged = model.outlier(inliers[4000:]).mean()
    assert 0.03 <= flagged <= 0.07, flagged
    plain = BudgetedOneClassSVM(budget=5000, nu=0.2, random_state=0).partial_fit(inliers[:300])
    np.testing.assert_allclose(plain.dual_coef_, 1.0 / (0.2 * 300), rtol=1e-9)


def test_rehearsal_tol_skips_the_tiny_dual_steps():
    """``rehearsal_tol``: a rehearsal step that would move α by at most tol·C adds no SV (no
    merge); 0 takes every step (the default, the same model as before the setting)."""
    X, y = _regression(3000)
    runs = {
        tol: _feed(
            StreamingRegressor(
                BudgetedSCARegressor(budget=50), rehearsal=4, rehearsal_tol=tol, random_state=0
            ),
            X,
            y,
        )  # fmt: skip
        for tol in (0.0, 0.05)
    }
    plain = _feed(StreamingRegressor(BudgetedSCARegressor(budget=50), rehearsal=4, random_state=0), X, y)
    np.testing.assert_array_equal(runs[0.0].predict(X[:100]), plain.predict(X[:100]))
    assert runs[0.05].engine_.n_violations_ < 0.9 * runs[0.0].engine_.n_violations_
    assert runs[0.05].engine_.n_steps_ == runs[0.0].engine_.n_steps_  # every step is still visited
