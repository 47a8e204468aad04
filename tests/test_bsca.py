"""BudgetedSCAClassifier: Algorithm 2 against a direct implementation, objectives, modes."""

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import MinMaxScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from svmstream.solvers import BudgetedSCAClassifier, StreamingClassifier
from svmstream.solvers.persistence import decode_state, encode_state, estimator_from_state

# These tests check the solver itself: the plain estimator learns from the features as given,
# the examples in the order they arrive (the algorithms as published, no streaming stages).


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    X = MinMaxScaler().fit_transform(X)
    return train_test_split(X, np.where(y == 1, 1, -1), test_size=0.3, random_state=0)


def rbf(a, b, gamma):
    return np.exp(-gamma * np.sum((np.asarray(a) - np.asarray(b)) ** 2, axis=-1))


def reference_bsca(X, y, order, C, gamma):
    """Algorithm 2 without budget pressure, written directly (no maintenance needed).

    Adding (δ·y_i, x_i) to a model that already holds x_i adds to that entry's β."""
    alpha = np.zeros(len(y))
    svs, betas, slot = [], [], {}
    for i in order:
        f = sum(b * rbf(s, X[i], gamma) for s, b in zip(svs, betas))
        new = np.clip(alpha[i] + (1 - y[i] * f) / 1.0, 0, C)
        delta = new - alpha[i]
        if delta != 0:
            alpha[i] = new
            if i in slot:
                betas[slot[i]] += delta * y[i]
            else:
                slot[i] = len(svs)
                svs.append(X[i])
                betas.append(delta * y[i])
    return alpha, np.array(svs), np.array(betas)


@pytest.mark.parametrize("sampling", ["uniform", "permutation"])
def test_dataset_mode_matches_algorithm_2(cancer, sampling):
    X, _, y, _ = cancer
    X, y = X[:120], y[:120]
    est = BudgetedSCAClassifier(
        budget=10_000, gamma=2.0, C=3.0, epochs=2, random_state=7, sampling=sampling
    ).fit(X, y)
    rng = np.random.default_rng(7)
    if sampling == "uniform":  # n draws with replacement per epoch
        order = np.concatenate([rng.integers(0, 120, 120), rng.integers(0, 120, 120)])
    else:  # each coordinate once per epoch
        order = np.concatenate([rng.permutation(120), rng.permutation(120)])
    alpha, svs, betas = reference_bsca(X, y, order, 3.0, 2.0)
    np.testing.assert_allclose(est.dual_alpha_, alpha, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(est.support_vectors_, svs)
    np.testing.assert_allclose(est.dual_coef_, betas, rtol=1e-10, atol=1e-12)
    # without budget pressure the model is exactly w(α) = Σ α_i y_i φ(x_i)
    K = rbf(X[:, None, :], X[None, :, :], 2.0)
    np.testing.assert_allclose(est.decision_function(X), K @ (alpha * y), rtol=1e-8, atol=1e-8)


def test_streaming_mode_is_one_fresh_coordinate_per_example(cancer):
    X, _, y, _ = cancer
    est = BudgetedSCAClassifier(budget=10_000, gamma=2.0, C=0.7)
    est.partial_fit(X[:60], y[:60], classes=[-1, 1])
    _, svs, betas = reference_bsca(X[:60], y[:60], range(60), 0.7, 2.0)
    np.testing.assert_allclose(est.dual_coef_, betas, rtol=1e-10)
    assert np.all(np.abs(est.dual_coef_) <= 0.7 + 1e-12)


def test_first_permutation_epoch_is_the_stream_in_that_order(cancer):
    """With every α_i = 0 at its first visit, one permutation epoch is streaming mode over
    the permuted data (the budget is reached, so maintenance is compared too)."""
    X, _, y, _ = cancer
    fitted = BudgetedSCAClassifier(budget=30, gamma=2.0, C=2.0, random_state=3).fit(X, y)
    order = np.random.default_rng(3).permutation(len(y))
    streamed = BudgetedSCAClassifier(budget=30, gamma=2.0, C=2.0).partial_fit(
        X[order], y[order], classes=[-1, 1]
    )
    assert fitted.statistics()["maintenance_events"] > 0
    np.testing.assert_array_equal(fitted.support_vectors_, streamed.support_vectors_)
    np.testing.assert_array_equal(fitted.dual_coef_, streamed.dual_coef_)


def test_unknown_sampling_is_rejected(cancer):
    X, _, y, _ = cancer
    with pytest.raises(ValueError, match="sampling"):
        BudgetedSCAClassifier(sampling="cyclic").fit(X, y)


def test_budget_and_dual_objective_rises_per_epoch(cancer):
    Xtr, Xte, ytr, yte = cancer
    duals, accs = [], []

    def monitor(est, epoch):
        duals.append(est.objectives(Xtr, ytr)["dual"])
        accs.append(est.score(Xte, yte))

    est = BudgetedSCAClassifier(budget=40, gamma=2.0, C=10.0, epochs=6, random_state=0)
    est.fit(Xtr, ytr, callback=monitor)
    assert est.n_support_vectors_ <= 40 and est.n_merges_ > 0
    assert all(b > a for a, b in zip(duals, duals[1:]))
    assert accs[-1] > 0.93
    obj = est.objectives(Xtr, ytr)
    assert obj["dual"] <= obj["primal_C"]  # weak duality


def test_one_vs_rest_multiclass_and_round_trip():
    X, y = load_iris(return_X_y=True)
    X = MinMaxScaler().fit_transform(X)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    est = BudgetedSCAClassifier(budget=15, gamma=2.0, C=10.0, epochs=5, random_state=0).fit(X, names)
    assert len(est.estimators_) == 3 and all(b.n_support_vectors_ <= 15 for b in est.estimators_)
    assert est.decision_function(X).shape == (150, 3)
    assert est.score(X, names) > 0.9
    clone = estimator_from_state(*decode_state(encode_state(*est.get_state())))
    np.testing.assert_array_equal(clone.decision_function(X), est.decision_function(X))
    # streaming one-vs-rest
    stream = BudgetedSCAClassifier(budget=15, gamma=2.0, C=10.0)
    for start in range(0, 150, 30):
        idx = np.random.default_rng(start).permutation(150)[:30]
        stream.partial_fit(X[idx], names[idx], classes=np.unique(names))
    assert stream.score(X, names) > 0.8
    with pytest.raises(ValueError, match="unknown label"):
        stream.partial_fit(X[:3], np.array(["setosa", "rose", "setosa"]))


def test_binary_round_trip_continues_exactly(cancer):
    X, _, y, _ = cancer
    a = BudgetedSCAClassifier(budget=20, gamma=2.0, C=5.0).partial_fit(X[:150], y[:150], classes=[-1, 1])
    b = estimator_from_state(*decode_state(encode_state(*a.get_state())))
    a.partial_fit(X[150:], y[150:])
    b.partial_fit(X[150:], y[150:])
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))


@parametrize_with_checks(
    [
        BudgetedSCAClassifier(budget=50, epochs=3, random_state=0),
        StreamingClassifier(BudgetedSCAClassifier(budget=50, epochs=3, random_state=0)),
    ],
    expected_failed_checks=lambda estimator: {},
    xfail_strict=True,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)
