"""BudgetedSGDClassifier: budget, decision function, determinism, persistence, bad input."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.preprocessing import MinMaxScaler

from svmstream.solvers import BudgetedSGDClassifier
from svmstream.solvers.persistence import decode_state, encode_state, estimator_from_state

# These tests check the solver itself: the plain estimator learns from the features as given,
# the examples in the order they arrive (the algorithms as published, no streaming stages).


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    X = MinMaxScaler().fit_transform(X)
    return X, np.where(y == 1, 1, -1)


def reference_pegasos(X, y, gamma, lam):
    """Slow textbook kernel Pegasos (no budget): explicit (1 − ηλ) rescaling of every α."""
    svs, alphas = [], []
    for t, (x, yt) in enumerate(zip(X, y), start=1):
        f = sum(a * np.exp(-gamma * np.sum((s - x) ** 2)) for s, a in zip(svs, alphas))
        eta = 1.0 / (lam * t)
        alphas = [a * (1 - eta * lam) for a in alphas]
        if yt * f < 1:
            svs.append(x.copy())
            alphas.append(eta * yt)
    return np.array(svs), np.array(alphas)


def test_scale_trick_matches_textbook_pegasos(cancer):
    """Without budget pressure BSGD is kernel Pegasos; the lazy scale must give the same α."""
    X, y = cancer[0][:300], cancer[1][:300]
    est = BudgetedSGDClassifier(budget=300, gamma=2.0, lambda_=1e-3).partial_fit(X, y, classes=[-1, 1])
    ref_sv, ref_alpha = reference_pegasos(X, y, 2.0, 1e-3)
    assert est.n_merges_ == 0 and est.n_support_vectors_ == len(ref_alpha) > 30
    np.testing.assert_array_equal(est.support_vectors_, ref_sv)
    np.testing.assert_allclose(est.dual_coef_, ref_alpha, rtol=1e-9)


def test_merging_keeps_model_close_to_unbudgeted_pegasos(cancer):
    """Each merge moves w by √WD in the RKHS; the budgeted model tracks Pegasos closely."""
    X, y = cancer
    budgeted = BudgetedSGDClassifier(budget=15, gamma=3.0, C=10.0, random_state=0).fit(X, y)
    full = BudgetedSGDClassifier(budget=1000, gamma=3.0, C=10.0, random_state=0).fit(X, y)
    assert budgeted.n_merges_ > 20 and full.n_merges_ == 0
    agreement = np.mean(budgeted.predict(X) == full.predict(X))
    assert agreement > 0.95


def test_budget_is_never_exceeded(cancer):
    X, y = cancer
    est = BudgetedSGDClassifier(budget=7, gamma=5.0, C=10.0)
    for start in range(0, X.shape[0], 37):
        est.partial_fit(X[start : start + 37], y[start : start + 37], classes=[-1, 1])
        assert est.n_support_vectors_ <= 7
        assert est.support_vectors_.shape == (est.n_support_vectors_, X.shape[1])
    assert est.n_merges_ > 0


def test_decision_function_equals_kernel_expansion(cancer):
    X, y = cancer
    est = BudgetedSGDClassifier(budget=30, gamma=1.5, C=5.0, random_state=0).fit(X, y)
    sv, alpha = est.support_vectors_, est.dual_coef_
    K = np.exp(-1.5 * ((X[:, None, :] - sv[None, :, :]) ** 2).sum(-1))
    np.testing.assert_allclose(est.decision_function(X), K @ alpha, rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(est.predict(X), np.where(K @ alpha > 0, 1, -1))


def test_partial_fit_in_two_halves_equals_one_pass(cancer):
    X, y = cancer
    whole = BudgetedSGDClassifier(budget=20, gamma=2.0, C=3.0, n_samples=len(y))
    whole.partial_fit(X, y, classes=[-1, 1])
    halves = BudgetedSGDClassifier(budget=20, gamma=2.0, C=3.0, n_samples=len(y))
    halves.partial_fit(X[:200], y[:200], classes=[-1, 1]).partial_fit(X[200:], y[200:])
    np.testing.assert_array_equal(whole.support_vectors_, halves.support_vectors_)
    np.testing.assert_array_equal(whole.dual_coef_, halves.dual_coef_)
    assert (whole.t_, whole.n_merges_) == (halves.t_, halves.n_merges_)


def test_fit_reaches_good_accuracy_and_is_seeded(cancer):
    X, y = cancer
    a = BudgetedSGDClassifier(budget=50, gamma=1.0, C=10.0, epochs=3, random_state=4).fit(X, y)
    b = BudgetedSGDClassifier(budget=50, gamma=1.0, C=10.0, epochs=3, random_state=4).fit(X, y)
    assert a.score(X, y) > 0.95
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))


def test_sparse_input_equals_dense(cancer):
    X, y = cancer
    Xs = sp.csr_matrix(np.where(X > 0.3, X, 0.0))
    dense = BudgetedSGDClassifier(budget=25, gamma=2.0, C=4.0, random_state=1).fit(Xs.toarray(), y)
    sparse = BudgetedSGDClassifier(budget=25, gamma=2.0, C=4.0, random_state=1).fit(Xs, y)
    np.testing.assert_array_equal(dense.dual_coef_, sparse.dual_coef_)
    np.testing.assert_allclose(dense.decision_function(Xs.toarray()), sparse.decision_function(Xs))


def test_any_two_labels(cancer):
    X, y = cancer
    labels = np.where(y > 0, "spam", "ham")
    est = BudgetedSGDClassifier(budget=40, gamma=1.0, C=10.0, epochs=2, random_state=0).fit(X, labels)
    assert est.classes_.tolist() == ["ham", "spam"]
    assert set(est.predict(X)) <= {"ham", "spam"}
    assert est.score(X, labels) > 0.9


def test_state_round_trip_continues_exactly(cancer):
    X, y = cancer
    a = BudgetedSGDClassifier(budget=15, gamma=2.0, C=3.0, n_samples=569, random_state=3)
    a.partial_fit(X[:300], y[:300], classes=[-1, 1])
    arrays, meta = a.get_state()
    b = estimator_from_state(*decode_state(encode_state(arrays, meta)))
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    a.partial_fit(X[300:], y[300:])
    b.partial_fit(X[300:], y[300:])
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    assert b.rng_.bit_generator.state == a.rng_.bit_generator.state


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda X, y: (np.where(np.arange(X.size).reshape(X.shape) == 40, np.nan, X), y), "NaN"),
        (lambda X, y: (np.where(np.arange(X.size).reshape(X.shape) == 7, np.inf, X), y), "infinity"),
        (lambda X, y: (X[:, :-1], y), "features"),
        (lambda X, y: (X, np.where(np.arange(len(y)) == 3, 7, y)), "y\\[3\\]: unknown label 7"),
    ],
)
def test_bad_input_raises_and_changes_nothing(cancer, mutate, message):
    X, y = cancer
    est = BudgetedSGDClassifier(budget=20, gamma=2.0, C=3.0).partial_fit(X[:100], y[:100], classes=[-1, 1])
    before = est.get_state()
    Xb, yb = mutate(X[100:120].copy(), y[100:120].copy())
    with pytest.raises(ValueError, match=message):
        est.partial_fit(Xb, yb)
    after = est.get_state()
    for key in before[0]:
        np.testing.assert_array_equal(before[0][key], after[0][key])
    assert before[1] == after[1]


def test_first_partial_fit_needs_classes():
    X, y = make_classification(n_samples=60, n_classes=3, n_informative=4, random_state=0)
    with pytest.raises(ValueError, match="classes must be passed"):
        BudgetedSGDClassifier().partial_fit(X, y)
    with pytest.raises(ValueError, match="at least 2 classes"):
        BudgetedSGDClassifier().fit(X, np.zeros(60))


@pytest.mark.parametrize(
    "params", [{"budget": 1}, {"gamma": 0}, {"C": -1.0}, {"epochs": 0}, {"gss_eps": 2.0}]
)
def test_invalid_parameters_are_rejected(cancer, params):
    X, y = cancer
    with pytest.raises(ValueError):
        BudgetedSGDClassifier(**params).fit(X, y)


def test_concurrent_predictions_are_consistent(cancer):
    from concurrent.futures import ThreadPoolExecutor

    X, y = cancer
    est = BudgetedSGDClassifier(budget=60, gamma=1.0, C=10.0, random_state=0).fit(X, y)
    expected = est.decision_function(X)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: est.decision_function(X), range(16)))
    for result in results:
        np.testing.assert_array_equal(result, expected)


def test_a_repeated_point_adds_to_its_own_support_vector():
    X = np.array([[0.2, 0.4], [0.9, 0.1], [0.2, 0.4]])
    y = np.array([1, -1, 1])
    est = BudgetedSGDClassifier(budget=10, gamma=1.0, lambda_=0.5).partial_fit(X, y, classes=[-1, 1])
    assert est.n_violations_ == 3 and est.n_support_vectors_ == 2
    # same function as the textbook expansion with the point twice: α = η_t·y after shrinking
    ref_sv, ref_alpha = reference_pegasos(X, y, 1.0, 0.5)
    K = np.exp(-((X[:, None, :] - ref_sv[None, :, :]) ** 2).sum(-1))
    np.testing.assert_allclose(est.decision_function(X), K @ ref_alpha, rtol=1e-12)
