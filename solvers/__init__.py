"""svmstream numerical core: numba kernels, scikit-learn estimators and persistence.

Three families, each a subpackage with private numba kernels under a public estimator:

* :mod:`.budgeted` — :class:`BudgetedSGDClassifier` (BSGD), :class:`BudgetedSCAClassifier` (BSCA);
* :mod:`.exact` — :class:`DCSVMClassifier` (DC-SVM over kernel dual CD);
* :mod:`.linear` — :class:`LinearDualCDClassifier` (LIBLINEAR dual CD, AVSF).

Nothing in this package imports web or service code.  The estimators are imported on first use;
:func:`load_estimators` imports them all, registering each with :mod:`.persistence` (so saved
states of any of them can be loaded).  The option sets below are the single source the service's
schemas and the CLI read (defined with the hyperparameter table, :mod:`._hyperparameters`).
"""

import importlib

from ._params import (
    BATCH_ALGORITHMS,
    BUDGET_MIN,
    C_MAX,
    DEFAULT_REHEARSAL,
    DEFAULT_REHEARSAL_MEMORY,
    DEFAULT_SHUFFLE_BUFFER,
    DEFAULT_WARMUP,
    KERNELS,
    KERNELS_ONLINE,
    LAMBDA_MIN,
    MAINTENANCE,
    MERGE_SOLVERS,
    ON_DRIFT,
    ONLINE_ALGORITHMS,
    SAMPLINGS,
    SCALINGS,
    SCHEDULES,
    SELECTIONS,
    SV_STORAGES,
)
from .exceptions import Cancelled

#: The estimators, imported on first use (PEP 562): a family compiles or loads its numba kernels,
#: and light readers of the option sets (``svmstream.solvers._hyperparameters``: the service's
#: configuration, ``svmstream healthcheck``) must not pay for it.
_LAZY = {
    "BudgetedSCAClassifier": ".budgeted",
    "BudgetedSGDClassifier": ".budgeted",
    "PegasosClassifier": ".budgeted",
    "StreamingClassifier": ".online",
    "SelectionClassifier": ".online",
    "WarmingUp": ".budgeted",
    "model_bytes": ".budgeted",
    "window_bytes": ".budgeted",
    "resolve_sv_storage": ".budgeted",
    "DCSVMClassifier": ".exact",
    "LinearDualCDClassifier": ".linear",
    # the tasks beyond classification (issue 38; docs/regression.md, docs/novelty.md)
    "BudgetedSCARegressor": ".budgeted.tasks",
    "BudgetedSGDRegressor": ".budgeted.tasks",
    "BudgetedOneClassSVM": ".budgeted.tasks",
    "StreamingRegressor": ".online.tasks",
    "StreamingNovelty": ".online.novelty",
    "SelectionRegressor": ".online.selection",
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


def load_estimators() -> None:
    """Import every family, registering its estimators with :mod:`.persistence`."""
    for name in _LAZY:
        __getattr__(name)


__all__ = [
    "BATCH_ALGORITHMS",
    "BUDGET_MIN",
    "C_MAX",
    "DEFAULT_REHEARSAL",
    "DEFAULT_REHEARSAL_MEMORY",
    "DEFAULT_SHUFFLE_BUFFER",
    "DEFAULT_WARMUP",
    "KERNELS",
    "KERNELS_ONLINE",
    "LAMBDA_MIN",
    "MAINTENANCE",
    "MERGE_SOLVERS",
    "ON_DRIFT",
    "ONLINE_ALGORITHMS",
    "SAMPLINGS",
    "SCALINGS",
    "SCHEDULES",
    "SELECTIONS",
    "SV_STORAGES",
    "BudgetedOneClassSVM",
    "BudgetedSCAClassifier",
    "BudgetedSCARegressor",
    "BudgetedSGDClassifier",
    "BudgetedSGDRegressor",
    "Cancelled",
    "DCSVMClassifier",
    "PegasosClassifier",
    "StreamingClassifier",
    "StreamingNovelty",
    "StreamingRegressor",
    "SelectionClassifier",
    "SelectionRegressor",
    "LinearDualCDClassifier",
    "WarmingUp",
    "model_bytes",
    "window_bytes",
    "resolve_sv_storage",
]
