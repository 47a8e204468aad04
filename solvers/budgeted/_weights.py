"""Importance weights of examples (scikit-learn's ``sample_weight``; ``docs/weights.md``).

A weight w >= 0 scales an example's loss term: BSGD and Pegasos scale the step's gradient term
(η·w·y enters the model), BSCA bounds the example's dual variable by C·w.  w = 0 is no step.
"""

from __future__ import annotations

import numpy as np

_ONES = np.ones(0)


def unit_weights(n: int) -> np.ndarray:
    """(n,) float64 ones, shared between calls (the kernels only read them)."""
    global _ONES
    if _ONES.shape[0] < n:
        _ONES = np.ones(max(n, 2 * _ONES.shape[0], 1024))
        _ONES.flags.writeable = False
    return _ONES[:n]


def weight_problem(weights, n: int, name: str = "sample_weight") -> str | None:
    """Why ``weights`` are not n finite numbers >= 0 (naming ``name[i]``), or None.  Strings
    and booleans are refused, not coerced."""
    a = np.asarray(weights)
    if a.ndim != 1:
        return f"{name} must be a list of {n} numbers, got shape {a.shape}"
    if a.dtype.kind not in "iuf":
        for i, v in enumerate(np.asarray(weights, dtype=object).tolist()):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
                return f"{name}[{i}]: a weight must be a number >= 0, got {v!r}"
        a = np.asarray(weights, dtype=np.float64)
    if a.shape[0] != n:
        return f"{name} has {a.shape[0]} weights for {n} examples"
    bad = np.flatnonzero(~np.isfinite(a) | (a < 0)) if a.dtype.kind == "f" else np.flatnonzero(a < 0)
    if bad.size:
        return f"{name}[{int(bad[0])}]: a weight must be finite and >= 0, got {a[bad[0]].item()!r}"
    return None


def checked_weights(weights, n: int, name: str = "sample_weight") -> np.ndarray | None:
    """``weights`` as (n,) float64 (None stays None: unit weights).  Raises ValueError naming
    ``name[i]`` (:func:`weight_problem`)."""
    if weights is None:
        return None
    problem = weight_problem(weights, n, name)
    if problem is not None:
        raise ValueError(problem)
    return np.ascontiguousarray(weights, dtype=np.float64)


def fed_weights(fed) -> np.ndarray | None:
    """The weights of rows a pipeline hands an estimator (``(X, labels, original[, weights])``)."""
    return fed[3] if len(fed) > 3 else None
