"""Budgeted online kernel SVMs: BSGD and BSCA with budget maintenance (merge, remove, project)."""

from ._classes import BudgetedSCAClassifier, BudgetedSGDClassifier

__all__ = ["BudgetedSCAClassifier", "BudgetedSGDClassifier"]
