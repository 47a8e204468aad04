"""svmstream numerical core: numba kernels, scikit-learn estimators and persistence.

Nothing in this package imports web or service code.  Importing it registers every
estimator with :mod:`solvers.persistence`, so saved states of any of them can be loaded.
"""

from .bsca_estimator import BudgetedSCAClassifier  # noqa: E402
from .dcsvm_estimator import DCSVMClassifier  # noqa: E402
from .estimators import BudgetedSGDClassifier  # noqa: E402
from .linear_cd import Cancelled as LinearCancelled, DualCDResult, dual_cd  # noqa: E402
from .linear_estimator import LinearDualCDClassifier  # noqa: E402

__all__ = [
    "BudgetedSGDClassifier",
    "BudgetedSCAClassifier",
    "DCSVMClassifier",
    "LinearDualCDClassifier",
    "dual_cd",
    "DualCDResult",
    "LinearCancelled",
]
