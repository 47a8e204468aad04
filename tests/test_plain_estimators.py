"""The plain estimators are the papers' algorithms on the features as given.

* no hidden preprocessing: a fitted model's decision is Σ α_j exp(−γ‖sv_j − x‖²) + b with the
  support vectors in the user's feature space and the user's γ (brute force);
* the engine of the streaming pipeline: a pipeline with every stage off decides as the plain
  estimator does (bit for bit), and its engine is an instance of the plain class;
* ``fit`` ≡ ``partial_fit`` over the same rows in fit's order, in any batch sizes;
* keyword-only, parameters validated by ``_parameter_constraints`` (naming the parameter).
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_iris, make_classification

from svmstream.solvers import BudgetedSCAClassifier, BudgetedSGDClassifier, PegasosClassifier
from svmstream.solvers.online import StreamingClassifier

#: a streaming pipeline with every stage off (the scaler, order, rehearsal and drift stages)
STAGES_OFF = dict(scaling="none", warmup=0, shuffle_buffer=0, run_guard=False, rehearsal=0, on_drift="none")


def _raw_data(n=600, seed=0):
    X, y = make_classification(n_samples=n, n_features=6, n_informative=4, random_state=seed)
    # unscaled features, as users send them: one of them in the thousands
    return X * np.array([1.0, 1000.0, 0.01, 5.0, 1.0, 50.0]), y


def _brute_force_decision(est, X):
    sv = est.support_vectors_
    d2 = ((X[:, None, :] - sv[None, :, :]) ** 2).sum(axis=2)
    return np.exp(-est.gamma_ * d2) @ est.dual_coef_.ravel() + est.intercept_[0]


@pytest.mark.parametrize("cls", [BudgetedSGDClassifier, BudgetedSCAClassifier])
def test_decision_is_the_kernel_expansion_on_the_users_features(cls):
    X, y = _raw_data()
    est = cls(budget=40, gamma=1e-4, C=10.0, random_state=0).fit(X, y)
    assert est.gamma_ == 1e-4  # the user's gamma, not rescaled
    assert est.scaling_ == "none"
    np.testing.assert_allclose(est.decision_function(X[:50]), _brute_force_decision(est, X[:50]), atol=1e-9)
    # the SVs are rows of the user's space (the large feature is not divided down)
    assert np.abs(est.support_vectors_[:, 1]).max() > 10.0


@pytest.mark.parametrize(
    ("plain", "params"),
    [
        (BudgetedSGDClassifier, dict(budget=30, gamma=2e-4, C=32.0)),
        (BudgetedSGDClassifier, dict(budget=30, gamma=2e-4, C=32.0, maintenance="project")),
        (BudgetedSCAClassifier, dict(budget=30, gamma=2e-4, C=4.0)),
        (PegasosClassifier, dict(C=1.0)),
    ],
)
def test_the_pipelines_engine_is_the_plain_estimator(plain, params):
    X, y = _raw_data()
    for seed in (0, 1):
        a = plain(**params, random_state=seed)
        b = StreamingClassifier(plain(**params, random_state=seed), **STAGES_OFF)
        for lo in range(0, X.shape[0], 100):
            a.partial_fit(X[lo : lo + 100], y[lo : lo + 100], classes=[0, 1])
            b.partial_fit(X[lo : lo + 100], y[lo : lo + 100], classes=[0, 1])
        assert type(b.model_) is plain  # one class per algorithm: no engine of another class
        assert np.array_equal(a.decision_function(X), b.decision_function(X))


def test_one_class_and_one_init_per_algorithm():
    """Each algorithm is one class with its own ``__init__`` (none copies another's), and
    Pegasos is not a kernel of BSGD: no ``kernel`` parameter anywhere."""
    inits = {
        cls: cls.__dict__.get("__init__")
        for cls in (BudgetedSGDClassifier, BudgetedSCAClassifier, PegasosClassifier)
    }
    assert all(inits.values()) and len(set(inits.values())) == 3
    assert not issubclass(PegasosClassifier, BudgetedSGDClassifier)
    for cls in inits:
        assert "kernel" not in cls().get_params(), cls
    assert (BudgetedSGDClassifier.kernel, PegasosClassifier.kernel) == ("rbf", "linear")


@pytest.mark.parametrize("cls", [BudgetedSGDClassifier, BudgetedSCAClassifier, PegasosClassifier])
def test_fit_equals_partial_fit_over_fits_order_in_any_batch_sizes(cls):
    """The rule (docs/online.md): ``fit(X, y)`` with one epoch learns the rows in the order of
    ``np.random.default_rng(random_state).permutation(n)``, with n = rows in λ = 1/(nC); so
    ``partial_fit`` over those rows, with ``n_samples=n``, gives the same model."""
    X, y = _raw_data(500)
    params = dict(C=8.0, random_state=3, n_samples=X.shape[0])
    if cls is not PegasosClassifier:
        params.update(budget=25, gamma=1e-4)
    fitted = cls(**params).fit(X, y)
    order = np.random.default_rng(3).permutation(X.shape[0])
    for cuts in ([500], [1] * 20 + [480], [7, 93, 200, 200]):
        streamed = cls(**params)
        lo = 0
        for size in cuts:
            streamed.partial_fit(X[order[lo : lo + size]], y[order[lo : lo + size]], classes=[0, 1])
            lo += size
        np.testing.assert_allclose(
            streamed.decision_function(X), fitted.decision_function(X), rtol=0, atol=1e-12
        )


def test_plain_scale_gamma_is_scikit_learns_for_any_number_of_classes():
    X, y = load_iris(return_X_y=True)
    est = BudgetedSGDClassifier(budget=30, random_state=0).fit(X, y)
    assert est.gamma_ == pytest.approx(1.0 / (X.shape[1] * X.var()))


def test_keyword_only_and_parameters_named_when_invalid():
    with pytest.raises(TypeError):
        BudgetedSGDClassifier(500)  # the parameters are keyword-only
    for cls in (BudgetedSGDClassifier, BudgetedSCAClassifier, PegasosClassifier):
        assert "scaling" not in cls().get_params()
        assert "warmup" not in cls().get_params()
    X, y = load_breast_cancer(return_X_y=True)
    with pytest.raises(ValueError, match="budget"):
        BudgetedSGDClassifier(budget=1).fit(X, y)
    with pytest.raises(ValueError, match="gamma"):
        BudgetedSCAClassifier(gamma="auto").fit(X, y)
    with pytest.raises(ValueError, match="schedule"):
        PegasosClassifier(schedule="fast").fit(X, y)
