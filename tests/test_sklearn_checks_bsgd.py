"""scikit-learn estimator checks for the budgeted SGD classifier: the plain estimator and the
streaming pipeline around it (the BSCA and linear ones, with the same known failures, are in
test_bsca.py and test_linear_online.py)."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from svmstream.solvers import BudgetedSGDClassifier, StreamingClassifier

#: checks StreamingClassifier.fit fails (solvers/online/pipeline.py, fit: y is used before it is
#: validated — np.unique on the original y, np.asarray(None)); strict: an xpass fails the run,
#: so these entries go when the pipeline is fixed
PIPELINE_KNOWN_FAILURES = {
    "check_classifier_data_not_an_array": "StreamingClassifier.fit calls np.unique on y as given",
    "check_requires_y_none": "StreamingClassifier.fit does not say that y is required",
}


def expected_failed_checks(estimator):
    return PIPELINE_KNOWN_FAILURES if isinstance(estimator, StreamingClassifier) else {}


@parametrize_with_checks(
    [
        BudgetedSGDClassifier(budget=50, epochs=5, random_state=0),
        StreamingClassifier(BudgetedSGDClassifier(budget=50, epochs=5, random_state=0)),
    ],
    expected_failed_checks=expected_failed_checks,
    xfail_strict=True,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)
