"""The BSGD family: maintenance strategies, merge solvers, schedules, multi-class, bias."""

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import MinMaxScaler

from svmstream.solvers import BudgetedSGDClassifier
from svmstream.solvers.budgeted._merging import (
    D_EVENTS,
    D_SAME_PARTNER,
    D_WD,
    D_WD_REF,
    merge_smallest_multiclass,
)

# These tests check the solver itself: the plain estimators learn from the features as given,
# the examples in the order they arrive (no streaming stages).


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    X = MinMaxScaler().fit_transform(X)
    return train_test_split(X, y, test_size=0.3, random_state=0)


def rbf(a, b, gamma):
    return np.exp(-gamma * np.sum((np.asarray(a) - np.asarray(b)) ** 2, axis=-1))


def test_multiclass_merge_minimises_the_exact_weight_degradation():
    rng = np.random.default_rng(5)
    d, n, k, gamma = 3, 7, 4, 0.7
    sv = rng.normal(size=(n, d))
    coef = rng.normal(size=(n, k))
    coef[2] *= 0.05  # the smallest ‖α_p‖²
    sv_t = np.zeros((d, n + 1))
    sv_t[:, :n] = sv.T
    sv_sq = np.zeros(n + 1)
    sv_sq[:n] = (sv**2).sum(1)
    c = np.zeros((n + 1, k))
    c[:n] = coef
    n_new, wd = merge_smallest_multiclass(sv_t, sv_sq, c, n, gamma, 1e-10, np.zeros(d), np.zeros(2 * (n + 1)))
    assert n_new == n - 1
    # brute force over partners q and a fine grid of h
    hs = np.linspace(0, 1, 4001)
    best = np.inf
    for q in range(n):
        if q == 2:
            continue
        z = hs[:, None] * sv[2] + (1 - hs[:, None]) * sv[q]
        a_z = np.outer(rbf(sv[2], z, gamma), coef[2]) + np.outer(rbf(sv[q], z, gamma), coef[q])
        norm2 = (coef[2] ** 2 + coef[q] ** 2 + 2 * coef[2] * coef[q] * rbf(sv[2], sv[q], gamma)).sum()
        best = min(best, (norm2 - (a_z**2).sum(1)).min())
    assert wd == pytest.approx(best, rel=1e-4, abs=1e-10)

    # the reported WD is the RKHS distance between old and new expansions, summed over classes
    def gram(A, B):
        return rbf(A[:, None, :], B[None, :, :], gamma)

    new_sv, new_coef = sv_t[:, :n_new].T, c[:n_new]
    dist2 = sum(
        coef[:, j] @ gram(sv, sv) @ coef[:, j]
        + new_coef[:, j] @ gram(new_sv, new_sv) @ new_coef[:, j]
        - 2 * coef[:, j] @ gram(sv, new_sv) @ new_coef[:, j]
        for j in range(k)
    )
    assert dist2 == pytest.approx(wd, rel=1e-6, abs=1e-10)


def test_multiclass_crammer_singer_learns_digits():
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
    est = BudgetedSGDClassifier(budget=150, gamma=0.05, C=10.0, epochs=3, random_state=0).fit(Xtr, ytr)
    assert est.n_support_vectors_ <= 150 and est.n_merges_ > 0
    assert est.decision_function(Xte).shape == (len(yte), 10)
    assert est.score(Xte, yte) > 0.9
    # decision function is the kernel expansion per class
    K = rbf(Xte[:20, None, :], est.support_vectors_[None, :, :], 0.05)
    np.testing.assert_allclose(est.decision_function(Xte[:20]), K @ est.dual_coef_, rtol=1e-9, atol=1e-9)


def test_multiclass_merging_precision_follows_the_merge_solver():
    """No lookup table exists for the multi-class WD: "gss" runs GSS to gss_eps, every other
    solver runs GSS-precise, i.e. exactly what "gss" does with gss_eps = 1e-10."""
    X, y = load_digits(return_X_y=True)
    X, y = X[:600] / 16.0, y[:600]
    kw = dict(budget=40, gamma=0.05, C=10.0, random_state=0)
    precise = BudgetedSGDClassifier(merge_solver="gss", gss_eps=1e-10, **kw).fit(X, y)
    assert precise.n_merges_ > 100
    for solver in ("gss-precise", "lookup-h", "lookup-wd"):
        est = BudgetedSGDClassifier(merge_solver=solver, **kw).fit(X, y)
        np.testing.assert_array_equal(est.dual_coef_, precise.dual_coef_)
        np.testing.assert_array_equal(est.support_vectors_, precise.support_vectors_)
    standard = BudgetedSGDClassifier(merge_solver="gss", **kw).fit(X, y)
    assert not np.array_equal(standard.dual_coef_, precise.dual_coef_)


def test_multiclass_string_labels_and_removal():
    X, y = load_wine(return_X_y=True)
    X = MinMaxScaler().fit_transform(X)
    names = np.array(["barolo", "grignolino", "barbera"])[y]
    est = BudgetedSGDClassifier(
        budget=20, gamma=1.0, C=10.0, epochs=5, maintenance="remove", random_state=0
    ).fit(X, names)
    assert set(est.classes_) == set(names) and est.n_merges_ == 0 and est.n_maintenance_ > 0
    assert est.score(X, names) > 0.85


@pytest.mark.parametrize("solver", ["gss", "gss-precise", "lookup-h", "lookup-wd"])
def test_merge_solvers_agree_with_gss_precise(cancer, solver):
    Xtr, Xte, ytr, yte = cancer
    est = BudgetedSGDClassifier(
        budget=10,
        gamma=4.0,
        C=10.0,
        epochs=2,
        merge_solver=solver,
        compare_merge_solver="gss-precise",
        random_state=0,
    ).fit(Xtr, ytr)
    diag = est.merge_diagnostics_
    assert diag[D_EVENTS] == est.n_merges_ > 50
    assert diag[D_SAME_PARTNER] / diag[D_EVENTS] >= 0.85  # the paper: 91.8% (IJCNN)
    assert diag[D_WD] / diag[D_WD_REF] < 1.01
    assert est.score(Xte, yte) > 0.9


def _small_budget_fit(Xtr, ytr, maintenance: str) -> BudgetedSGDClassifier:
    """B = 10, 2 epochs on the cancer data: the budget is maintained often."""
    return BudgetedSGDClassifier(
        maintenance=maintenance, budget=10, gamma=1.0, C=10.0, epochs=2, random_state=0
    ).fit(Xtr, ytr)


def _mean_degradation(est) -> float:
    """Mean weight degradation per budget-maintenance step."""
    return est.weight_degradation_total_ / est.n_maintenance_


def test_removal_degrades_more_than_merging(cancer):
    Xtr, _, ytr, _ = cancer
    merged = _small_budget_fit(Xtr, ytr, "merge")
    removed = _small_budget_fit(Xtr, ytr, "remove")
    assert removed.n_maintenance_ > 0 and removed.n_merges_ == 0
    assert _mean_degradation(removed) > 2 * _mean_degradation(merged)


def test_norma_schedule_learns(cancer):
    Xtr, Xte, ytr, yte = cancer
    est = BudgetedSGDClassifier(
        budget=50, gamma=2.0, lambda_=1e-3, schedule="norma", eta=0.5, epochs=3, random_state=0
    ).fit(Xtr, ytr)
    assert est.score(Xte, yte) > 0.9


def test_perceptron_stays_in_the_ball(cancer):
    Xtr, Xte, ytr, yte = cancer
    est = BudgetedSGDClassifier(
        budget=30, gamma=2.0, schedule="perceptron", eta=0.5, radius=3.0, epochs=3, random_state=0
    ).fit(Xtr, ytr)
    sv, alpha = est.support_vectors_, est.dual_coef_
    norm = np.sqrt(alpha @ rbf(sv[:, None, :], sv[None, :, :], 2.0) @ alpha)
    assert norm <= 3.0 * (1 + 1e-9)
    assert norm > 2.5  # the constraint is active, not trivially satisfied
    assert est.score(Xte, yte) > 0.9


def test_bias_is_learned_and_used(cancer):
    Xtr, Xte, ytr, yte = cancer
    est = BudgetedSGDClassifier(
        budget=40, gamma=2.0, C=10.0, epochs=3, fit_intercept=True, random_state=0
    ).fit(Xtr, ytr)
    assert est.intercept_[0] != 0.0
    K = rbf(Xte[:, None, :], est.support_vectors_[None, :, :], 2.0)
    np.testing.assert_allclose(est.decision_function(Xte), K @ est.dual_coef_ + est.intercept_[0], rtol=1e-9)
    assert est.score(Xte, yte) > 0.9


def test_profiling_measures_maintenance_time(cancer):
    Xtr, _, ytr, _ = cancer
    est = BudgetedSGDClassifier(budget=10, gamma=4.0, C=10.0, profile=True, random_state=0).fit(Xtr, ytr)
    assert est.n_maintenance_ > 0 and est.maintenance_seconds_ > 0.0
    stats = est.statistics()
    assert stats["merging_frequency"] == pytest.approx(est.n_maintenance_ / est.t_)
    assert stats["average_weight_degradation"] > 0


@pytest.mark.parametrize("cls_name", ["BudgetedSGDClassifier", "BudgetedSCAClassifier"])
def test_projection_maintenance_keeps_the_inverse_and_learns(cancer, cls_name):
    import svmstream.solvers
    from svmstream.solvers.budgeted._projection import DEFAULT_JITTER
    from svmstream.solvers.persistence import decode_state, encode_state, estimator_from_state

    Xtr, Xte, ytr, yte = cancer
    cls = getattr(svmstream.solvers, cls_name)
    est = cls(budget=8, gamma=4.0, C=10.0, n_samples=250, maintenance="project", random_state=0)
    est.partial_fit(Xtr[:250], ytr[:250], classes=np.unique(ytr))
    assert est.n_maintenance_ > 5 and est.n_support_vectors_ == 8
    sv = est.support_vectors_
    K = rbf(sv[:, None, :], sv[None, :, :], 4.0) + DEFAULT_JITTER * np.eye(8)
    np.testing.assert_allclose(est._k_inv[:8, :8], np.linalg.inv(K), rtol=1e-6, atol=1e-6)
    clone = estimator_from_state(*decode_state(encode_state(*est.get_state())))
    est.partial_fit(Xtr[250:], ytr[250:])
    clone.partial_fit(Xtr[250:], ytr[250:])
    np.testing.assert_array_equal(est.decision_function(Xte), clone.decision_function(Xte))
    assert est.score(Xte, yte) > 0.9


def test_projection_degrades_less_than_removal(cancer):
    Xtr, _, ytr, _ = cancer
    projected = _small_budget_fit(Xtr, ytr, "project")
    removed = _small_budget_fit(Xtr, ytr, "remove")
    assert _mean_degradation(projected) < 0.5 * _mean_degradation(removed)
