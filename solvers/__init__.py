"""svmstream numerical core: numba kernels, scikit-learn estimators and persistence.

Nothing in this package imports web or service code.
"""

from .estimators import BudgetedSGDClassifier  # noqa: E402
from .bsca_estimator import BudgetedSCAClassifier  # noqa: E402

__all__ = ["BudgetedSGDClassifier", "BudgetedSCAClassifier"]
