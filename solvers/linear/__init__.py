"""Linear SVMs: LIBLINEAR dual coordinate descent and AVSF (adaptive variable selection frequencies)."""

from ._classes import LinearDualCDClassifier

__all__ = ["LinearDualCDClassifier"]
