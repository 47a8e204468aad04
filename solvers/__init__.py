"""svmstream numerical core: numba kernels, scikit-learn estimators and persistence.

Three families, each a subpackage with private numba kernels under a public estimator:

* :mod:`.budgeted` — :class:`BudgetedSGDClassifier` (BSGD), :class:`BudgetedSCAClassifier` (BSCA);
* :mod:`.exact` — :class:`DCSVMClassifier` (DC-SVM over kernel dual CD);
* :mod:`.linear` — :class:`LinearDualCDClassifier` (LIBLINEAR dual CD, AVSF).

Nothing in this package imports web or service code.  Importing it registers every
estimator with :mod:`.persistence`, so saved states of any of them can be loaded.  The option
sets below are the single source the service's schemas and the CLI read.
"""

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
from .budgeted import (
    BudgetedSCAClassifier,
    BudgetedSGDClassifier,
    PegasosClassifier,
    WarmingUp,
    model_bytes,
    resolve_sv_storage,
)
from .exact import DCSVMClassifier
from .exceptions import Cancelled
from .linear import LinearDualCDClassifier
from .online import StreamingClassifier

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
    "BudgetedSCAClassifier",
    "BudgetedSGDClassifier",
    "PegasosClassifier",
    "StreamingClassifier",
    "Cancelled",
    "DCSVMClassifier",
    "LinearDualCDClassifier",
    "WarmingUp",
    "model_bytes",
    "resolve_sv_storage",
]
