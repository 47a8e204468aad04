"""The regression selector (:class:`SelectionRegressor`): candidates that differ by γ race by
successive halving on prequential squared error.  Each piece is checked against a computation
made here: a candidate is the plain pipeline with that γ factor, γ = factor × "scale" of the
scaled window, a rung keeps the lowest segment mean squared error, the race does not depend on
how the stream is cut, a restored race continues exactly, and bad input changes nothing."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_friedman1
from sklearn.utils.estimator_checks import parametrize_with_checks

from svmstream.solvers.budgeted.tasks import BudgetedSCARegressor
from svmstream.solvers.online.race.core import Race
from svmstream.solvers.online.race.loss_halving import LossHalving
from svmstream.solvers.online.selection import DEFAULT_REGRESSION_CANDIDATES, SelectionRegressor
from svmstream.solvers.online.tasks import StreamingRegressor
from svmstream.solvers.persistence import estimator_from_state


@parametrize_with_checks(
    [SelectionRegressor(BudgetedSCARegressor(budget=30), pipeline_params={"warmup": 10}, random_state=0)],
    expected_failed_checks=lambda estimator: {
        "check_regressors_no_decision_function": "the model contract's decision_function (ŷ, what the "
        "service asks every model for: solvers/contract.py)"
    },
    xfail_strict=True,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.fixture(scope="module")
def friedman():
    X, y = make_friedman1(n_samples=3000, noise=1.0, random_state=0)
    return X * 50.0 + 10.0, y * 100.0  # raw, unscaled features and target


def feed(model, X, y, sizes):
    lo, k = 0, 0
    while lo < X.shape[0]:
        hi = min(X.shape[0], lo + sizes[k % len(sizes)])
        model.partial_fit(X[lo:hi], y[lo:hi])
        lo, k = hi, k + 1
    return model


def engine():
    return BudgetedSCARegressor(budget=60, merge_solver="lookup-wd", random_state=0)


def race(**kw):
    params = {"pipeline_params": {"rehearsal": 1}, "first_rung": 600, "random_state": 7}
    params.update(kw)
    return SelectionRegressor(engine(), **params)


def test_each_candidate_is_the_plain_pipeline_with_its_gamma_factor(friedman):
    """Every candidate learns exactly what a StreamingRegressor with its γ factor and the shared
    seed learns from the same batches (max |Δ| = 0), so their errors are paired."""
    X, y = friedman
    sel = feed(race(first_rung=10**9), X, y, [500])
    for i, setting in enumerate(sel.settings_):
        alone = feed(
            StreamingRegressor(engine(), rehearsal=1, gamma_factor=setting["gamma_factor"], random_state=7),
            X, y, [500],
        )  # fmt: skip
        assert np.max(np.abs(sel.race_.models[i].predict(X[:300]) - alone.predict(X[:300]))) == 0.0


def test_gamma_factor_multiplies_the_scale_gamma_of_the_scaled_window(friedman):
    X, y = friedman
    model = StreamingRegressor(engine(), gamma_factor=0.5, random_state=0).partial_fit(X[:400], y[:400])
    window = X[:200]
    std = window.std(axis=0)
    scaled = (window - window.mean(axis=0)) / np.where(std > 0, std, 1.0)
    by_hand = 0.5 / (scaled.shape[1] * scaled.var())
    assert model.engine_.gamma_ == pytest.approx(by_hand, rel=1e-12)
    assert model.report().gamma == pytest.approx(by_hand, rel=1e-12)
    with pytest.raises(ValueError, match="gamma_factor multiplies"):
        StreamingRegressor(BudgetedSCARegressor(gamma=0.3), gamma_factor=0.5).partial_fit(X[:10], y[:10])
    with pytest.raises(ValueError, match="gamma_factor must be a number > 0"):
        StreamingRegressor(gamma_factor=0).partial_fit(X[:10], y[:10])


def test_a_rung_keeps_the_lowest_segment_mean_squared_error():
    """Three models, first rung 8, eta 2: the segment opens at 4 learned; at 8 the two of lowest
    mean squared error over rows 4..8 (computed here) are kept; at 16 one is left."""
    rng = np.random.default_rng(0)
    errors = rng.exponential(size=(3, 16)) * np.array([[3.0], [1.0], [2.0]])
    rule = LossHalving(3, first_rung=8, eta=2.0)
    race_ = Race(["a", "b", "c"], grid=4, rule=rule)
    for lo in range(0, 16, 4):
        for i in race_.racing():
            rule.record(i, errors[i, lo : lo + 4])
        race_.advance(4)
        race_.decide()
    first = errors[:, 4:8].mean(axis=1)
    assert rule.rungs[0]["mse"] == pytest.approx({str(i): first[i] for i in range(3)})
    assert rule.rungs[0]["kept"] == sorted(np.argsort(first)[:2].tolist())
    kept = rule.rungs[0]["kept"]
    second = errors[kept, 12:16].mean(axis=1)  # the segment of rung 2 opens at 8 (rung 1's count)
    assert rule.rungs[1]["kept"] == [kept[int(np.argmin(second))]]
    assert race_.racing() == rule.rungs[1]["kept"]


def test_the_leader_rules(friedman):
    """``recent``: the lowest mean squared error over the second half of what each learned;
    ``evidence``: the first candidate unless another has the smaller error on significantly more
    rows (the sign test), counted here."""
    X, y = friedman
    for leader in ("recent", "evidence"):
        sel = feed(race(first_rung=10**9, leader=leader), X[:1500], y[:1500], [500])
        rule = sel.race_.rule
        losses = rule.recent_losses([0, 1])
        if leader == "recent":
            assert sel.leader_ == int(np.argmin(losses.mean(axis=1)))
        else:
            test = rule.leader_test(sel.race_)
            better = int(np.count_nonzero(losses[1] < losses[0]))
            assert test["challengers"]["1"]["better"] == better
            assert sel.leader_ == (1 if test["challengers"]["1"]["passes"] else 0)
        assert sel.race()["leader"] == sel.leader_


def test_the_race_does_not_depend_on_how_the_stream_is_cut(friedman):
    X, y = friedman
    a = feed(race(), X, y, [500])
    b = feed(race(), X, y, [137, 1, 911])
    assert a.race_.rule.rungs == b.race_.rule.rungs
    assert a.race_.racing() == b.race_.racing() and len(a.race_.rule.rungs) >= 1
    assert np.max(np.abs(a.predict(X[:500]) - b.predict(X[:500]))) == 0.0
    assert a.n_received_ == b.n_received_ == X.shape[0]


def test_a_restored_race_continues_exactly(friedman):
    X, y = friedman
    whole = feed(race(), X, y, [300])
    for cut in (150, 900, 2100):  # inside the window, racing, after the first rung
        first = feed(race(), X[:cut], y[:cut], [300])
        arrays, meta = first.get_state()
        back = estimator_from_state(arrays, meta)
        assert type(back) is SelectionRegressor
        feed(back, X[cut:], y[cut:], [300])
        assert back.race_.rule.rungs == whole.race_.rule.rungs
        assert np.max(np.abs(back.predict(X[:500]) - whole.predict(X[:500]))) == 0.0
        assert back.report().examples == whole.report().examples


def test_the_contract_answers_for_the_serving_candidate(friedman):
    X, y = friedman
    sel = feed(race(), X[:1000], y[:1000], [250])
    leader = sel.race_.models[sel.leader_]
    report = sel.report()
    assert report.task == "regression" and not report.has_classes
    assert report.examples.received == 1000 == report.examples.learned + report.examples.pending
    assert report.statistics["selection"]["leader"] == sel.leader_
    lower, upper = sel.predict_interval(X[:50], 0.9)
    ref_lower, ref_upper = leader.predict_interval(X[:50], 0.9)
    assert np.array_equal(lower, ref_lower) and np.array_equal(upper, ref_upper)
    assert np.array_equal(sel.paired_loss(X[:20], y[:20]), np.abs(y[:20] - leader.predict(X[:20])))
    last = sel.last_learned()
    assert last.outputs.shape == last.targets.shape == (250,)
    copy = sel.published_copy()
    assert np.array_equal(copy.predict(X[:50]), sel.predict(X[:50]))
    with pytest.raises(TypeError):
        copy.get_state()
    assert sel.estimate_bytes(10, 0) == 2 * StreamingRegressor(engine(), rehearsal=1).estimate_bytes(10, 0)
    racing = feed(race(first_rung=10**9), X[:1000], y[:1000], [250])
    assert racing.warm_start() is None and racing.serving_settings() is None  # still racing
    done = feed(race(), X, y, [500])
    assert done.n_survivors_ == 1
    assert done.serving_settings() == {"gamma": done.survivor_.engine_.gamma_, "rehearsal": 1}
    assert isinstance(done.warm_start(), StreamingRegressor)


def test_bad_input_changes_nothing(friedman):
    X, y = friedman
    sel = feed(race(), X[:600], y[:600], [300])
    state = sel.get_state()[1]["n_received"]
    bad = X[600:900].copy()
    bad[250, 3] = np.nan  # in the second grid piece of the batch
    with pytest.raises(ValueError, match="NaN"):
        sel.partial_fit(bad, y[600:900])
    with pytest.raises(ValueError, match="finite numbers"):
        sel.partial_fit(X[600:900], np.array(["1"] * 300))
    with pytest.raises(ValueError):
        sel.partial_fit(X[600:900, :5], y[600:900])
    assert sel.n_received_ == state == 600
    for params, match in (
        ({"candidates": []}, "at least one"),
        ({"candidates": [{"gamma_factor": -1}]}, r"candidates\[0\].gamma_factor"),
        ({"candidates": [{"C": 1}]}, r"candidates\[0\]: unknown"),
        ({"pipeline_params": {"gamma_factor": 2.0}}, "selector's own"),
    ):
        with pytest.raises(ValueError, match=match):
            SelectionRegressor(**params).partial_fit(X[:10], y[:10])
    with pytest.raises(ValueError, match="varies gamma"):
        SelectionRegressor(BudgetedSCARegressor(gamma=0.5)).partial_fit(X[:10], y[:10])


def test_default_candidates():
    assert [c["gamma_factor"] for c in DEFAULT_REGRESSION_CANDIDATES] == [1.0, 0.5]


def test_max_bytes_starts_only_the_candidates_that_fit(friedman):
    X, y = friedman
    one = StreamingRegressor(engine(), rehearsal=1).estimate_bytes(X.shape[1], 0)
    for max_bytes, racing in ((None, 2), (2 * one, 2), (2 * one - 1, 1), (0, 1)):
        sel = race(max_bytes=max_bytes).partial_fit(X[:300], y[:300])
        assert sel.race_.racing() == list(range(racing)), max_bytes
        assert sel.estimate_bytes(X.shape[1], 0) == racing * one
