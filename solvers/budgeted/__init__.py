"""Budgeted online kernel SVMs: BSGD and BSCA with budget maintenance (merge, remove, project)."""

from ._base import WarmingUp, model_bytes, window_bytes
from ._classes import StreamingBSCA, StreamingBSGD
from ._estimators import BudgetedSCAClassifier, BudgetedSGDClassifier, PegasosClassifier
from ._rehearsal import RehearsalMemory, memory_capacity
from ._sparse_pool import resolve_sv_storage

__all__ = [
    "BudgetedSCAClassifier",
    "BudgetedSGDClassifier",
    "PegasosClassifier",
    "RehearsalMemory",
    "StreamingBSCA",
    "StreamingBSGD",
    "WarmingUp",
    "memory_capacity",
    "model_bytes",
    "window_bytes",
    "resolve_sv_storage",
]
