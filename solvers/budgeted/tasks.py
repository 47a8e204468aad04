"""Budgeted kernel models of the tasks beyond classification (issue 38): regression and novelty.

:class:`BudgetedSGDRegressor` (BSGD, ε-insensitive loss), :class:`BudgetedSCARegressor` (dual
coordinate ascent of the bias-free ε-SVR) and :class:`BudgetedOneClassSVM` (ν one-class SVM by
NORMA's step).  Plain estimators: no scaling, no warm-up, every row learned in the order given;
``docs/regression.md`` and ``docs/novelty.md`` describe them and the streaming stages around them.
"""

from ._novelty import BudgetedOneClassSVM
from ._regressors import BudgetedSCARegressor, BudgetedSGDRegressor

__all__ = ["BudgetedOneClassSVM", "BudgetedSCARegressor", "BudgetedSGDRegressor"]
