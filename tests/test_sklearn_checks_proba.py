"""scikit-learn estimator checks for the batch estimators with ``probability=True`` (the
``probability=False`` defaults are checked in test_dcsvm.py and test_linear_cd.py):
``predict_proba`` rows sum to 1, their argmax is ``predict``, they are rank-consistent with
``decision_function``, and fit/predict_proba survive pickling, subsets and sparse input."""

import warnings

from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import parametrize_with_checks

from svmstream.solvers import DCSVMClassifier, LinearDualCDClassifier


@parametrize_with_checks(
    [
        DCSVMClassifier(probability=True),
        DCSVMClassifier(n_levels=2, early_level=1, probability=True),
        LinearDualCDClassifier(selection="avsf", probability=True),
    ]
)
def test_sklearn_compatible_with_probability(estimator, check):
    with warnings.catch_warnings():
        # some checks fit on tiny noisy data with a low max_iter on purpose
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)
