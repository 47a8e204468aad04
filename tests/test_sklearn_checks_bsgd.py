"""scikit-learn estimator checks for the budgeted SGD classifier."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from svmstream.solvers import BudgetedSGDClassifier


@parametrize_with_checks([BudgetedSGDClassifier(budget=50, epochs=5, random_state=0)])
def test_sklearn_compatible(estimator, check):
    check(estimator)
