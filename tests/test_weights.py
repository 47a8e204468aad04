"""Importance weights (issue 39, item 3; docs/weights.md): each algorithm's weighted step against
a brute-force re-computation of one update, w = 0 learns nothing, bad weights change nothing,
and the pipeline carries weights through its window, buffer and rehearsal memory."""

from __future__ import annotations

import numpy as np
import pytest

from svmstream.solvers import BudgetedSCAClassifier, BudgetedSGDClassifier, PegasosClassifier
from svmstream.solvers.online import StreamingClassifier

#: Weights a model refuses (a negative, NaN, inf, a string; the wrong length), with the message
#: that names them: shared with tests/test_task_weights.py.
BAD_SAMPLE_WEIGHTS = [
    ([1.0, -1.0, 1.0], r"sample_weight\[1\]"),
    ([1.0, 1.0, np.nan], r"sample_weight\[2\]"),
    ([np.inf, 1.0, 1.0], r"sample_weight\[0\]"),
    ([1.0, "a", 1.0], r"sample_weight\[1\]"),
    ([1.0, 1.0], r"2 weights for 3 examples"),
]


def _data(n=60, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, "yes", "no")
    return X, y


def _rbf(a, B, gamma):
    return np.exp(-gamma * ((B - a) ** 2).sum(axis=1))


def _states_equal(a, b):
    sa, sb = a.get_state(), b.get_state()
    assert sorted(sa[0]) == sorted(sb[0])
    for name in sa[0]:
        np.testing.assert_array_equal(sa[0][name], sb[0][name], err_msg=name)


@pytest.mark.parametrize("k", [1.0, 3.0, 0.25])
def test_bsgd_weighted_step_equals_brute_force(k):
    """Pegasos-schedule BSGD: w <- (1 - eta lam) w + eta k y phi(x) on a violation, b += eta k y
    (Wang et al. 2012, Alg. 1 with the loss term scaled by k)."""
    X, y = _data()
    gamma, lam = 0.5, 0.01
    est = BudgetedSGDClassifier(budget=200, gamma=gamma, lambda_=lam, fit_intercept=True, random_state=0)
    est.partial_fit(X[:40], y[:40], classes=["no", "yes"])
    Z = X[40:55]
    x, label = X[55], y[55]
    sign = 1.0 if label == "yes" else -1.0
    f_before = est.decision_function(x[None])[0]
    f_Z = est.decision_function(Z)
    b = est.intercept_[0]
    t = est.t_ + 1
    eta = 1.0 / (lam * t)
    violated = sign * f_before < 1
    est.partial_fit(X[55:56], y[55:56], sample_weight=[k])
    expected = (1 - eta * lam) * (f_Z - b) + b
    if violated:
        expected = expected + eta * k * sign * _rbf(x, Z, gamma) + eta * k * sign
    np.testing.assert_allclose(est.decision_function(Z), expected, rtol=1e-10, atol=1e-12)
    assert est.t_ == t


@pytest.mark.parametrize("k", [1.0, 2.0, 0.5])
def test_pegasos_weighted_step_equals_brute_force(k):
    X, y = _data()
    lam = 0.05
    est = PegasosClassifier(lambda_=lam, fit_intercept=False, random_state=0)
    est.partial_fit(X[:40], y[:40], classes=["no", "yes"])
    Z, x, label = X[40:55], X[55], y[55]
    sign = 1.0 if label == "yes" else -1.0
    w_old = est.coef_.ravel().copy()
    t = est.t_ + 1
    eta = 1.0 / (lam * t)
    violated = sign * (w_old @ x) < 1
    est.partial_fit(X[55:56], y[55:56], sample_weight=np.array([k]))
    w_new = (1 - eta * lam) * w_old + (eta * k * sign * x if violated else 0.0)
    np.testing.assert_allclose(est.decision_function(Z), Z @ w_new, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("k", [0.3, 1.0, 4.0])
def test_bsca_weighted_box_equals_brute_force(k):
    """Streaming BSCA: delta = clip(1 - y f, 0, C k) (Qaadan et al. 2019, Alg. 2, box C w_i)."""
    X, y = _data()
    gamma, C = 0.5, 0.4
    est = BudgetedSCAClassifier(budget=200, gamma=gamma, C=C, random_state=0)
    est.partial_fit(X[:40], y[:40], classes=["no", "yes"])
    Z, x, label = X[40:55], X[55], y[55]
    sign = 1.0 if label == "yes" else -1.0
    C_eff = est.C_eff_
    f = est.decision_function(x[None])[0]
    f_Z = est.decision_function(Z)
    delta = min(max(1.0 - sign * f, 0.0), C_eff * k)
    est.partial_fit(X[55:56], y[55:56], sample_weight=[k])
    np.testing.assert_allclose(est.decision_function(Z), f_Z + delta * sign * _rbf(x, Z, gamma), rtol=1e-10)


@pytest.mark.parametrize(
    "make",
    [
        lambda: BudgetedSGDClassifier(budget=30, random_state=0),
        lambda: BudgetedSCAClassifier(budget=30, random_state=0),
        lambda: PegasosClassifier(random_state=0),
        lambda: StreamingClassifier(
            BudgetedSGDClassifier(budget=30, random_state=0), warmup=20, shuffle_buffer=10
        ),
        lambda: StreamingClassifier(
            BudgetedSCAClassifier(budget=30, random_state=0), warmup=20, shuffle_buffer=10
        ),
    ],
)
def test_zero_weight_learns_nothing(make):
    """w = 0: the state after the batch is the state before it (counts of received examples
    aside: a pipeline counts them, learned as nothing)."""
    X, y = _data(n=120)
    a, b = make(), make()
    for est in (a, b):
        est.partial_fit(X[:80], y[:80], classes=["no", "yes"])
    a.partial_fit(X[80:], y[80:], sample_weight=np.zeros(40))
    if isinstance(a, StreamingClassifier):
        assert a.n_received_ == 120 and a.n_weightless_ == 40
        assert a.n_received_ == a.n_learned_ + a.n_pending_
        a.n_received_, a._n_weightless = b.n_received_, 0
    _states_equal(a, b)


def test_mixed_zero_weights_equal_the_rows_left_out():
    """Rows of weight 0 in a batch are as if they had not been sent (a pipeline: counted)."""
    X, y = _data(n=200)
    w = np.where(np.arange(200) % 3 == 0, 0.0, 1.0)
    keep = w > 0
    mk = lambda: StreamingClassifier(
        BudgetedSGDClassifier(budget=40, random_state=1), warmup=30, shuffle_buffer=25
    )  # noqa: E731
    a, b = mk(), mk()
    a.partial_fit(X, y, classes=["no", "yes"], sample_weight=w).flush()
    b.partial_fit(X[keep], y[keep], classes=["no", "yes"]).flush()
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    assert a.n_received_ == 200 == a.n_learned_ and a.n_weightless_ == int((~keep).sum())


def test_unit_weights_equal_no_weights():
    X, y = _data(n=300)
    for make in (
        lambda: StreamingClassifier(
            BudgetedSGDClassifier(budget=40, random_state=2), warmup=50, shuffle_buffer=30
        ),
        lambda: StreamingClassifier(
            BudgetedSCAClassifier(budget=40, random_state=2), warmup=50, shuffle_buffer=30
        ),
    ):
        a, b = make(), make()
        a.partial_fit(X, y, classes=["no", "yes"], sample_weight=np.ones(300)).flush()
        b.partial_fit(X, y, classes=["no", "yes"]).flush()
        np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))


def test_weights_travel_with_their_rows_through_the_buffer():
    """A pipeline with a shuffle buffer and rehearsal applies each row's own weight: doubling
    every weight of a BSCA pipeline doubles the box of every row, which changes the model; the
    same weights given twice over two calls equal one call (weights follow the rows)."""
    X, y = _data(n=300, seed=3)
    w = np.random.default_rng(0).uniform(0.1, 3.0, 300)
    mk = lambda: StreamingClassifier(
        BudgetedSCAClassifier(budget=40, C=0.05, random_state=2), warmup=50, shuffle_buffer=60
    )  # noqa: E731
    a, b, c = mk(), mk(), mk()
    a.partial_fit(X, y, classes=["no", "yes"], sample_weight=w).flush()
    b.partial_fit(X[:130], y[:130], classes=["no", "yes"], sample_weight=w[:130])
    b.partial_fit(X[130:], y[130:], sample_weight=w[130:]).flush()
    c.partial_fit(X, y, classes=["no", "yes"], sample_weight=2 * w).flush()
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    assert np.abs(a.decision_function(X) - c.decision_function(X)).max() > 1e-6


def test_weights_survive_a_restart_mid_buffer():
    from svmstream.solvers.persistence import estimator_from_state

    X, y = _data(n=300, seed=4)
    w = np.random.default_rng(1).uniform(0.1, 3.0, 300)
    mk = lambda: StreamingClassifier(
        BudgetedSGDClassifier(budget=40, random_state=2), warmup=50, shuffle_buffer=60
    )  # noqa: E731
    a, b = mk(), mk()
    a.partial_fit(X[:40], y[:40], classes=["no", "yes"], sample_weight=w[:40])  # inside the window
    b.partial_fit(X[:40], y[:40], classes=["no", "yes"], sample_weight=w[:40])
    b = estimator_from_state(*b.get_state())
    a.partial_fit(X[40:150], y[40:150], sample_weight=w[40:150])  # inside the buffer
    b.partial_fit(X[40:150], y[40:150], sample_weight=w[40:150])
    b = estimator_from_state(*b.get_state())
    for est in (a, b):
        est.partial_fit(X[150:], y[150:], sample_weight=w[150:]).flush()
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))


@pytest.mark.parametrize(
    ("weights", "message"),
    BAD_SAMPLE_WEIGHTS,
)
@pytest.mark.parametrize(
    "make",
    [
        lambda: BudgetedSGDClassifier(budget=30, random_state=0),
        lambda: BudgetedSCAClassifier(budget=30, random_state=0),
        lambda: StreamingClassifier(BudgetedSGDClassifier(budget=30, random_state=0), warmup=20),
    ],
)
def test_bad_weights_change_nothing(weights, message, make):
    X, y = _data(n=50)
    a, b = make(), make()
    for est in (a, b):
        est.partial_fit(X[:40], y[:40], classes=["no", "yes"])
    with pytest.raises(ValueError, match=message):
        a.partial_fit(X[40:43], y[40:43], sample_weight=weights)
    _states_equal(a, b)


def test_selection_candidates_learn_the_weighted_stream():
    """A selector (the model of a service model with no settings) passes every candidate the
    same weights: a weighted selector's candidates equal pipelines fed the same weights, and
    its account holds."""
    from svmstream.solvers.online.selection import SelectionClassifier

    X, y = _data(n=400, seed=5)
    w = np.where(np.arange(400) % 4 == 0, 0.0, np.random.default_rng(2).uniform(0.5, 2.0, 400))
    a = SelectionClassifier(warmup=100)
    b = SelectionClassifier(warmup=100)
    a.partial_fit(X[:150], y[:150], classes=["no", "yes"], sample_weight=w[:150])
    a.partial_fit(X[150:], y[150:], sample_weight=w[150:])
    b.partial_fit(X, y, classes=["no", "yes"], sample_weight=w)
    report = a.report()
    assert report.examples.received == 400
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    c = SelectionClassifier(warmup=100).partial_fit(X, y, classes=["no", "yes"])
    assert np.abs(a.decision_function(X) - c.decision_function(X)).max() > 1e-9


def test_balanced_class_weight_is_the_running_n_over_k_n_c():
    """class_weight="balanced": the i-th example of class c weighs n_i / (K n_c,i) (counts up to
    and including it), whatever the batches; the same model as those weights given as
    sample_weight to a pipeline without class weights."""
    X, y = _data(n=300, seed=6)
    y = np.where(np.arange(300) % 7 == 0, "yes", "no")  # 1 in 7 positives
    n_i = np.arange(1, 301)
    n_c = np.array([np.sum(y[: i + 1] == y[i]) for i in range(300)])
    expected = n_i / (2 * n_c)
    mk = lambda **kw: StreamingClassifier(  # noqa: E731
        BudgetedSGDClassifier(budget=40, random_state=3), warmup=50, shuffle_buffer=30, **kw
    )
    a, b = mk(class_weight="balanced"), mk()
    a.partial_fit(X[:130], y[:130], classes=["no", "yes"])
    a.partial_fit(X[130:], y[130:]).flush()
    b.partial_fit(X, y, classes=["no", "yes"], sample_weight=expected).flush()
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    assert a.weight_received_ == pytest.approx(expected.sum())


def test_class_weight_mapping_and_its_state():
    from svmstream.solvers.persistence import estimator_from_state

    X, y = _data(n=300, seed=7)
    w = np.random.default_rng(3).uniform(0.5, 2.0, 300)
    mk = lambda **kw: StreamingClassifier(  # noqa: E731
        BudgetedSCAClassifier(budget=40, random_state=3), warmup=50, shuffle_buffer=30, **kw
    )
    a, b = mk(class_weight={"yes": 5.0}), mk()
    a.partial_fit(X, y, classes=["no", "yes"], sample_weight=w).flush()
    b.partial_fit(X, y, classes=["no", "yes"], sample_weight=w * np.where(y == "yes", 5.0, 1.0)).flush()
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    c, d = mk(class_weight="balanced"), mk(class_weight="balanced")
    c.partial_fit(X[:100], y[:100], classes=["no", "yes"])
    d.partial_fit(X[:100], y[:100], classes=["no", "yes"])
    d = estimator_from_state(*d.get_state())  # the running counts are saved
    for est in (c, d):
        est.partial_fit(X[100:], y[100:]).flush()
    np.testing.assert_array_equal(c.decision_function(X), d.decision_function(X))


@pytest.mark.parametrize("bad", [{"yes": -1.0}, {"yes": "2"}, {"yes": True}, "auto", [1, 2]])
def test_bad_class_weight_is_refused_naming_it(bad):
    X, y = _data()
    with pytest.raises(ValueError, match="class_weight"):
        StreamingClassifier(BudgetedSGDClassifier(), class_weight=bad).partial_fit(
            X, y, classes=["no", "yes"]
        )
