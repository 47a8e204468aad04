"""Budgeted online kernel SVMs: BSGD and BSCA with budget maintenance (merge, remove, project),
and Pegasos, the online linear SVM.  One class per algorithm: each plain estimator is the
engine the streaming pipeline (:mod:`svmstream.solvers.online`) runs inside its stages."""

from ._base import WarmingUp
from ._pegasos import PegasosClassifier
from ._rehearsal import RehearsalMemory, memory_capacity
from ._sca import BudgetedSCAClassifier
from ._sgd import BudgetedSGDClassifier
from ._sizes import model_bytes, window_bytes
from ._sparse_pool import resolve_sv_storage

__all__ = [
    "BudgetedSCAClassifier",
    "BudgetedSGDClassifier",
    "PegasosClassifier",
    "RehearsalMemory",
    "WarmingUp",
    "memory_capacity",
    "model_bytes",
    "window_bytes",
    "resolve_sv_storage",
]
