"""The budgeted regressor and one-class SVM (issue 38): scikit-learn checks, every update against
a brute-force NumPy computation, the objectives of LIBSVM's SVR / OneClassSVM within 1 % with a
budget >= n and several epochs, budget maintenance and pickle-free persistence."""

import numpy as np
import pytest
from sklearn.datasets import make_friedman1
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.svm import SVR, OneClassSVM
from sklearn.utils.estimator_checks import parametrize_with_checks

from svmstream.solvers.budgeted.tasks import BudgetedOneClassSVM, BudgetedSCARegressor, BudgetedSGDRegressor
from svmstream.solvers.persistence import estimator_from_state


@parametrize_with_checks(
    [
        BudgetedSGDRegressor(budget=50, epochs=5, random_state=0),
        BudgetedSCARegressor(budget=50, epochs=5, random_state=0),
        BudgetedOneClassSVM(budget=50, epochs=5, random_state=0),
    ],
    expected_failed_checks=lambda estimator: {},
    xfail_strict=True,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _data(n=200, seed=0):
    X, y = make_friedman1(n, noise=0.5, random_state=seed)
    X = (X - X.mean(0)) / X.std(0)
    return X, (y - y.mean()) / y.std()


#: γ of the brute-force checks (the estimators' "scale" would take it from the first batch)
GAMMA = 0.1


def _brute_f(est, X):
    """f(x) from the model's support vectors and effective coefficients, by NumPy."""
    if est.n_support_ == 0:
        return np.zeros(len(X))
    K = rbf_kernel(X, est.support_vectors_, gamma=est.gamma_)
    return K @ est.dual_coef_


# ------------------------------------------------------------------ every update, brute force
def _sgd_reference(X, y, lam, eps, use_bias):
    """Pegasos ε-insensitive steps on an unbounded model, written out in NumPy (Wang et al.
    2012, Alg. 1 with the loss of Kivinen et al. 2004 §III-C)."""
    K = rbf_kernel(X, gamma=GAMMA)
    a = np.zeros(len(y))
    b = 0.0
    before = []
    for t, i in enumerate(range(len(y)), start=1):
        f = K[i] @ a + b
        before.append(f)
        eta = 1.0 / (lam * t)
        a *= 1.0 - eta * lam
        if abs(y[i] - f) > eps:
            a[i] += eta * np.sign(y[i] - f)
            b += eta * np.sign(y[i] - f) if use_bias else 0.0
    return np.array(before), a, b


@pytest.mark.parametrize("use_bias", [False, True])
def test_sgd_regression_steps_match_brute_force(use_bias):
    X, y = _data(120)
    est = BudgetedSGDRegressor(
        budget=200, gamma=GAMMA, C=2.0, n_samples=120, epsilon=0.2, fit_intercept=use_bias
    )
    for lo in range(0, 120, 17):  # uneven batches: the steps do not depend on the cut
        est.partial_fit(X[lo : lo + 17], y[lo : lo + 17])
    before, a, b = _sgd_reference(X, y, 1.0 / (2.0 * 120), 0.2, use_bias)
    f_now = _brute_f(est, X) + est.intercept_
    np.testing.assert_allclose(f_now, rbf_kernel(X, gamma=est.gamma_) @ a + b, rtol=1e-9, atol=1e-9)
    est2 = BudgetedSGDRegressor(
        budget=200, gamma=GAMMA, C=2.0, n_samples=120, epsilon=0.2, fit_intercept=use_bias
    )
    est2.partial_fit(X, y)
    np.testing.assert_allclose(est2.last_predictions_, before, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(est2.predict(X), f_now, rtol=1e-12, atol=1e-12)


def test_sca_regression_steps_match_brute_force():
    X, y = _data(100)
    K = rbf_kernel(X, gamma=GAMMA)
    C, eps = 0.7, 0.15
    a = np.zeros(len(y))
    for i in range(len(y)):  # streaming mode: the exact coordinate step with α_i = 0
        z = y[i] - K[i] @ a
        a[i] = np.clip(np.sign(z) * max(abs(z) - eps, 0.0), -C, C)
    est = BudgetedSCARegressor(budget=150, gamma=GAMMA, C=C, epsilon=eps).partial_fit(X, y)
    np.testing.assert_allclose(est.predict(X), K @ a, rtol=1e-10, atol=1e-10)
    assert np.all(np.abs(est.dual_coef_) <= C + 1e-12)


def test_oneclass_steps_match_brute_force():
    X, _ = _data(150)
    nu = 0.3
    K = rbf_kernel(X, gamma=GAMMA)
    a = np.zeros(len(X))
    rho = 0.0
    before = []
    for t, i in enumerate(range(len(X)), start=1):
        f = K[i] @ a
        before.append(f - rho)
        eta = 1.0 / (nu * t)
        a *= 1.0 - eta * nu
        if f < rho:
            a[i] += eta
            rho -= eta * (1.0 - nu)
        else:
            rho += eta * nu
    est = BudgetedOneClassSVM(budget=200, gamma=GAMMA, nu=nu).partial_fit(X)
    np.testing.assert_allclose(est.last_decisions_, before, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(est.score_samples(X), K @ a, rtol=1e-9, atol=1e-9)
    assert est.offset_ == pytest.approx(rho, rel=1e-9, abs=1e-12)
    assert np.all(est.dual_coef_ > 0.0)


@pytest.mark.parametrize(
    "make",
    [
        lambda: BudgetedSGDRegressor(budget=15, C=5.0, epsilon=0.05),
        lambda: BudgetedSCARegressor(budget=15, C=5.0, epsilon=0.05),
        lambda: BudgetedOneClassSVM(budget=15, nu=0.2),
    ],
)
@pytest.mark.parametrize("maintenance", ["merge", "remove", "project"])
def test_budgeted_prediction_before_each_step_is_the_models(make, maintenance):
    """With the budget full, f(x) before each step is the model's (brute force over its SVs)."""
    X, y = _data(160)
    est = make().set_params(maintenance=maintenance)
    novelty = isinstance(est, BudgetedOneClassSVM)
    rho = 0.0
    for i in range(160):
        expected = _brute_f(est, X[i : i + 1]) + getattr(est, "intercept_", 0.0) if i else None
        if novelty:
            est.partial_fit(X[i : i + 1])
            got = est.last_decisions_ + rho  # score − ρ before the step, ρ before the step
            rho = est.offset_
        else:
            est.partial_fit(X[i : i + 1], y[i : i + 1])
            got = est.last_predictions_
        if i:
            np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)
        assert est.n_support_ <= 15
    assert est.n_violations_ > 15  # the budget was exercised
    if isinstance(est, BudgetedOneClassSVM):
        assert np.all(est.dual_coef_ > 0.0)
    if maintenance == "merge":
        assert est.n_merges_ > 0


# ------------------------------------------------------------------ objectives vs LIBSVM
def _svr_objective(K, y, a, b, C, eps):
    f = K @ a + b
    return 0.5 * a @ K @ a + C * np.maximum(0.0, np.abs(y - f) - eps).sum()


@pytest.mark.parametrize(
    "make, epochs",
    [
        (lambda C, eps: BudgetedSCARegressor(budget=300, C=C, epsilon=eps, random_state=0), 30),
        (lambda C, eps: BudgetedSGDRegressor(budget=300, C=C, epsilon=eps, random_state=0), 200),
    ],
)
def test_regression_reaches_libsvm_objective(make, epochs):
    """ε-SVR primal ½‖w‖² + CΣ max(0, |y − f| − ε) within 1 % of LIBSVM's (budget >= n)."""
    X, y = _data(200)
    C, eps = 1.0, 0.1
    gamma = 1.0 / (X.shape[1] * X.var())
    K = rbf_kernel(X, gamma=gamma)
    ref = SVR(C=C, epsilon=eps, gamma=gamma, tol=1e-8).fit(X, y)
    a = np.zeros(len(y))
    a[ref.support_] = ref.dual_coef_[0]
    p_ref = _svr_objective(K, y, a, ref.intercept_[0], C, eps)
    est = make(C, eps).set_params(epochs=epochs).fit(X, y)
    f = est.predict(X)
    w_norm2 = est.dual_coef_ @ rbf_kernel(est.support_vectors_, gamma=gamma) @ est.dual_coef_
    p_est = 0.5 * w_norm2 + C * np.maximum(0.0, np.abs(y - f) - eps).sum()
    assert p_est <= 1.01 * p_ref, (p_est, p_ref)
    assert np.sqrt(np.mean((f - ref.predict(X)) ** 2)) < 0.1


def test_oneclass_reaches_libsvm_objective():
    """Schölkopf's primal ½‖w‖² + 1/(νn)Σ max(0, ρ − f) − ρ within 1 % of LIBSVM's (its α and ρ
    divided by ν·n)."""
    X, _ = _data(150)
    nu = 0.2
    n = len(X)
    gamma = 1.0 / (X.shape[1] * X.var())
    K = rbf_kernel(X, gamma=gamma)
    ref = OneClassSVM(nu=nu, gamma=gamma, tol=1e-8).fit(X)
    a = np.zeros(n)
    a[ref.support_] = ref.dual_coef_[0] / (nu * n)
    rho_ref = ref.offset_[0] / (nu * n)

    def primal(f, w_norm2, rho):
        return 0.5 * w_norm2 + np.maximum(0.0, rho - f).sum() / (nu * n) - rho

    p_ref = primal(K @ a, a @ K @ a, rho_ref)
    est = BudgetedOneClassSVM(budget=200, nu=nu, epochs=300, random_state=0).fit(X)
    c = est.dual_coef_
    p_est = primal(est.score_samples(X), c @ rbf_kernel(est.support_vectors_, gamma=gamma) @ c, est.offset_)
    assert p_ref < 0.0
    assert abs(p_est - p_ref) <= 0.01 * abs(p_ref), (p_est, p_ref)
    outside = np.mean(est.predict(X) == -1)
    assert outside <= nu + 0.05  # ν bounds the fraction outside (Proposition 4)


# ------------------------------------------------------------------ persistence
@pytest.mark.parametrize(
    "est",
    [
        BudgetedSGDRegressor(budget=20, fit_intercept=True),
        BudgetedSCARegressor(budget=20),
        BudgetedOneClassSVM(budget=20, nu=0.2),
    ],
)
def test_state_round_trip_continues_identically(est):
    X, y = _data(200)
    est.partial_fit(X[:100], y[:100])
    arrays, meta = est.get_state()
    copy = estimator_from_state(arrays, meta)
    for model in (est, copy):
        model.partial_fit(X[100:], y[100:])
    np.testing.assert_array_equal(copy.predict(X), est.predict(X))


def test_bad_input_names_the_problem():
    X, y = _data(20)
    with pytest.raises(ValueError, match="NaN|infinity"):
        BudgetedSGDRegressor().fit(np.where(X > 1.5, np.inf, X), y)
    with pytest.raises(ValueError):
        BudgetedSGDRegressor().fit(X, np.array(["a"] * 20))
    with pytest.raises(ValueError, match="nu"):
        BudgetedOneClassSVM(nu=1.5).fit(X)
    with pytest.raises(ValueError, match="epsilon"):
        BudgetedSCARegressor(epsilon=-1).fit(X, y)
