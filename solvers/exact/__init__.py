"""Exact kernel SVMs: dual coordinate descent with shrinking and a kernel cache, kernel k-means, DC-SVM."""

from ._classes import DCSVMClassifier

__all__ = ["DCSVMClassifier"]
