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
                f"{field}[{i}]: a weight must be a finite number >= 0, got {what}",
                field=f"{field}[{i}]",
                index=i,
            )
    return np.asarray(raw, dtype=np.float64)


def class_weights(mapping, labels: list, y: np.ndarray, weights: np.ndarray | None) -> np.ndarray | None:
    """The weights of a batch of class indices ``y`` (n,) into ``labels`` times the class
    weights of ``mapping`` (a model's ``class_weight`` mapping: the label as a string -> its
    weight; a class not named weighs 1).  ``weights`` None: ones; ``mapping`` not a dict (None,
    ``"balanced"``: the model applies it): ``weights`` unchanged."""
    if not isinstance(mapping, dict) or not mapping:
        return weights
    table = np.array([float(mapping.get(_key(label), 1.0)) for label in labels])
    factor = table[np.asarray(y, dtype=np.intp)]
    return factor if weights is None else weights * factor


def _key(label) -> str:
    """A label as a JSON object key names it: ``"fraud"``, ``"1"`` (an integer label 1), ``"0.5"``."""
    return label if isinstance(label, str) else repr(label)


def weight_figures(weights: np.ndarray | None, n: int) -> tuple[float, bool]:
    """``(sum of the weights, whether any differs from 1)`` of a batch of ``n`` examples."""
    if weights is None:
        return float(n), False
    return float(weights.sum()), bool((weights != 1.0).any())
