"""Every option set and parameter constraint of the solvers, in one place.

The estimators validate with these helpers.  The option sets of the online models'
hyperparameters are defined with their table, :mod:`svmstream.solvers._hyperparameters` (which the
service's schemas and the CLI are built from), and re-exported here and by
:mod:`svmstream.solvers`, so a new option is added once.

Option sets map a public name to the integer code the numba kernels use.
"""

from __future__ import annotations

import numbers
from typing import Any

# The option sets of the online models' hyperparameters live with their table (one definition);
# re-exported here for the estimators.
from ._hyperparameters import (  # noqa: F401
    BATCH_ALGORITHMS,
    BUDGET_MIN,
    BY_NAME,
    C_MAX,
    DEFAULT_REHEARSAL,
    DEFAULT_REHEARSAL_MEMORY,
    DEFAULT_SHUFFLE_BUFFER,
    DEFAULT_WARMUP,
    ESTIMATOR_ONLY,
    KERNELS_ONLINE,
    LAMBDA_MIN,
    MAINTENANCE,
    MERGE_SOLVERS,
    ON_DRIFT,
    ONLINE_ALGORITHMS,
    REFERENCE_N,
    REFERENCE_N_LINEAR,
    SCALINGS,
    SCHEDULES,
    SV_STORAGES,
)

#: How BSCA's ``fit`` picks the coordinates of an epoch.
_ESTIMATOR_ROWS = {**BY_NAME, **{row.name: row for row in ESTIMATOR_ONLY}}


def _constraint(row) -> list:
    """scikit-learn's constraint list of one table row: its type and bounds, its words and
    choices, None when it is nullable (``random_state``: scikit-learn's ``"random_state"``)."""
    from numbers import Integral, Real

    from sklearn.utils._param_validation import Interval, StrOptions

    if row.name == "random_state":
        return ["random_state"]
    if row.type is bool:
        out: list = ["boolean"]
    elif row.type is str:
        out = [StrOptions(set(row.choices))]
    elif row.type is dict:
        out = [dict, StrOptions(set(row.words))]
    else:
        left = row.ge if row.ge is not None else row.gt
        right = row.le if row.le is not None else row.lt
        closed = {
            (True, True): "both",
            (True, False): "left",
            (False, True): "right",
            (False, False): "neither",
        }[(row.ge is not None, row.le is not None)]
        out = [Interval(Integral if row.type is int else Real, left, right, closed=closed)]
        if row.words:
            out.append(StrOptions(set(row.words)))
    if row.nullable and row.null_in_estimator:
        out.append(None)
    return out


def keep_params(estimator, values: dict) -> None:
    """The body of a scikit-learn ``__init__``: each parameter stored as given, unvalidated
    (``values``: the ``__init__``'s ``locals()``; ``self`` is skipped)."""
    for name, value in values.items():
        if name != "self":
            setattr(estimator, name, value)


def parameter_constraints(names) -> dict[str, list]:
    """``_parameter_constraints`` of an estimator whose parameters are ``names``: each from its
    row of the hyperparameter table (:data:`._hyperparameters.HYPERPARAMETERS`, or
    :data:`._hyperparameters.ESTIMATOR_ONLY` for the estimators' own), so each bound is
    declared once.  Raises KeyError for a name without a row."""
    return {name: _constraint(_ESTIMATOR_ROWS[name]) for name in names}


SAMPLINGS = {
    "permutation": "each coordinate once per epoch, in a fresh random order",
    "uniform": "n independent uniform draws with replacement per epoch",
}
#: Linear dual CD coordinate selection: LIBLINEAR's, AVSF with shrinking, AVSF as published.
SELECTIONS = ("uniform", "avsf", "avsf-paper")
#: Kernels of the exact solvers (DC-SVM, kernel dual CD).
KERNELS = {"rbf": 0, "poly": 1, "linear": 2}
#: ``sv_storage="auto"`` stores SVs sparse when the first input is CSR with more features than
#: this and at most SPARSE_MAX_DENSITY of its entries nonzero (``docs/defaults.md``).
SPARSE_MIN_FEATURES = 256
SPARSE_MAX_DENSITY = 0.10


def check_choice(name: str, value: Any, options) -> Any:
    """Return ``options[value]`` (or ``value`` for a tuple of options).

    Raises
    ------
    ValueError
        ``"{name} must be one of [...], got {value!r}"`` when ``value`` is not an option.
    """
    if value not in options:
        raise ValueError(f"{name} must be one of {sorted(options)}, got {value!r}")
    return options[value] if isinstance(options, dict) else value


def check_positive(name: str, value: Any, kind=numbers.Real, allow_none: bool = False) -> None:
    """Check that ``value`` is a positive number of type ``kind`` (booleans are not numbers).

    Raises
    ------
    ValueError
        ``"{name} must be a positive {kind}, got {value!r}"``.
    """
    if value is None and allow_none:
        return
    if not isinstance(value, kind) or isinstance(value, bool) or not value > 0:
        raise ValueError(f"{name} must be a positive {kind.__name__}, got {value!r}")
