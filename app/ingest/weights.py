"""The ``w`` of a learn request or stream entry: one importance weight per example
(``docs/weights.md``), validated before anything is learned.

``w`` is a JSON list of ``len(X)`` numbers, each finite and >= 0 (0: the example is received
and learns nothing).  A string, a boolean, null, NaN, an infinity or a negative number is
refused with a 422 naming ``w[i]``; a list of another length names ``w``.  Absent (or
``"w": null`` for the whole list): every example weighs 1.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from svmstream.app.errors import InvalidInput
from svmstream.app.ingest.decode import describe, is_number


def parse_weights(raw: Any, n: int, field: str = "w") -> np.ndarray | None:
    """(n,) float64 weights from the decoded JSON value ``raw`` (None: absent, unit weights).

    Raises InvalidInput naming ``w[i]`` (a value that is not a finite number >= 0) or ``w``
    (not a list, or not one weight per example)."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise InvalidInput(f"{field}: expected a list of {n} weights, got {describe(raw)}", field=field)
    if len(raw) != n:
        raise InvalidInput(f"{field}: has {len(raw)} weights for {n} examples in X", field=field)
    for i, v in enumerate(raw):
        if not is_number(v) or not math.isfinite(v) or v < 0:
            what = describe(v) if not is_number(v) else repr(v)
            raise InvalidInput(
                f"{field}[{i}]: a weight must be a finite number >= 0, got {what}", field=f"{field}[{i}]", index=i
            )
    return np.asarray(raw, dtype=np.float64)


def weight_figures(weights: np.ndarray | None, n: int) -> tuple[float, bool]:
    """``(sum of the weights, whether any differs from 1)`` of a batch of ``n`` examples."""
    if weights is None:
        return float(n), False
    return float(weights.sum()), bool((weights != 1.0).any())
