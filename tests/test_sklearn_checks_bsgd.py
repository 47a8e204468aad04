"""scikit-learn estimator checks for the budgeted SGD classifier: the plain estimator and the
streaming pipeline around it (the BSCA and linear ones are in test_bsca.py and
test_linear_online.py).  No check is expected to fail."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from svmstream.solvers import BudgetedSGDClassifier, StreamingClassifier


@parametrize_with_checks(
    [
        BudgetedSGDClassifier(budget=50, epochs=5, random_state=0),
        StreamingClassifier(BudgetedSGDClassifier(budget=50, epochs=5, random_state=0)),
    ],
    expected_failed_checks=lambda estimator: {},
    xfail_strict=True,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)
