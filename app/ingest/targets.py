"""The targets of the tasks beyond classification, read as a label codec reads labels (the same
methods as :class:`~svmstream.app.ingest.labels.LabelCodec`, so ``/learn``, the stream, feedback and
the learner take a model's ``y`` through ``handle.codec`` whatever the task):

* :class:`NumericTargets` (regression): every ``y[i]`` a finite JSON number (not a boolean, not a
  string: ``"3.5"`` is refused, no coercion), float64;
* :class:`EvaluationLabels` (novelty): no ``y`` at all, or ``y[i]`` 0 (inlier) or 1 (outlier),
  JSON integers, for evaluation only (the model never learns them); float64 with NaN where none.

:func:`target_codec` picks the codec of a model once, from its configuration's task
(:data:`CODECS`); classification keeps its label codec.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from svmstream.app.errors import InvalidInput
from svmstream.app.ingest.decode import describe
from svmstream.app.ingest.labels import shared_codec


class _Targets:
    """What a task without classes answers for the label-codec methods the service calls."""

    classes: list[Any] = []
    public_classes: list[Any] = []
    public_order = np.zeros(0, dtype=np.int64)
    learn = False
    numeric = True
    identity = True
    has_classes = False
    requires_y = True
    kind = "targets"

    def public_decision(self, decision: np.ndarray) -> np.ndarray:
        return decision

    def public_columns(self, values: np.ndarray) -> np.ndarray:
        return values

    def extended(self, labels: Sequence[Any]):
        return self

    def index_of(self, label: Any) -> None:
        return None

    def decode(self, values: np.ndarray) -> list[Any]:
        return np.asarray(values, dtype=np.float64).tolist()

    def _bad(self, v: Any) -> str | None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _fast_bad(self, arr: np.ndarray) -> np.ndarray:  # pragma: no cover - overridden
        raise NotImplementedError

    def absent(self, n: int) -> np.ndarray:
        """The ``y`` of ``n`` rows sent without one (novelty only; otherwise refused)."""
        raise InvalidInput("y: field required", field="y")

    def values(self, labels: list) -> tuple[np.ndarray, list[tuple[int, Any]]]:
        """float64 (n,) of ``labels`` and the positions refused (with their values)."""
        try:
            arr = np.asarray(labels)
        except (ValueError, TypeError):
            arr = np.zeros(0, dtype=object)
        if arr.shape == (len(labels),) and arr.dtype.kind in "iuf":
            out = arr.astype(np.float64)
            bad = set(np.flatnonzero(self._fast_bad(arr)).tolist())
            bad.update(i for i, v in enumerate(labels) if v.__class__ is bool)
            return out, [(i, labels[i]) for i in sorted(bad)]
        out = np.zeros(len(labels))
        bad = []
        for i, v in enumerate(labels):
            if self._bad(v) is not None:
                bad.append((i, v))
            else:
                out[i] = float(v)
        return out, bad

    def encode_with_new(self, labels: Any) -> tuple[np.ndarray, None]:
        """``y`` of a request (a JSON list) -> float64 (n,); InvalidInput naming ``y[i]``."""
        if not isinstance(labels, list):
            raise InvalidInput(f"y: expected a list of {self.kind}, got {describe(labels)}", field="y")
        out, bad = self.values(labels)
        if bad:
            i, v = bad[0]
            raise InvalidInput(f"y[{i}]: {self._bad(v)}", field=f"y[{i}]", index=i)
        return out, None

    def encode(self, labels: Any) -> np.ndarray:
        return self.encode_with_new(labels)[0]

    def encode_each(self, labels: Sequence[Any]) -> tuple[np.ndarray, list[tuple[int, str]], None]:
        """Stream entries' values one by one: ``(y, [(position, "y: ..."), ...], None)``."""
        out, bad = self.values(list(labels))
        return out, [(i, f"y: {self._bad(v)}") for i, v in bad], None


class NumericTargets(_Targets):
    """The targets of a regression model: finite numbers."""

    kind = "numbers"

    def _bad(self, v: Any) -> str | None:
        if v.__class__ is bool or not isinstance(v, (int, float)):
            return f"{describe(v)} is not a number (a regression model learns numeric targets)"
        if not math.isfinite(v):
            return f"{describe(v)} is not a finite number"
        return None

    def _fast_bad(self, arr: np.ndarray) -> np.ndarray:
        return ~np.isfinite(arr.astype(np.float64))


class EvaluationLabels(_Targets):
    """The optional labels of a novelty model: 1 outlier, 0 inlier (evaluation only)."""

    kind = "0/1 evaluation labels"
    requires_y = False

    def _bad(self, v: Any) -> str | None:
        if v.__class__ is bool or not isinstance(v, int) or v not in (0, 1):
            return (
                f"{describe(v)} is not an evaluation label: a novelty model learns rows without y; "
                "a y may only say 1 (outlier) or 0 (inlier), for evaluation"
            )
        return None

    def _fast_bad(self, arr: np.ndarray) -> np.ndarray:
        if arr.dtype.kind == "f":
            return np.ones(arr.shape, dtype=bool)
        return (arr != 0) & (arr != 1)

    def absent(self, n: int) -> np.ndarray:
        return np.full(int(n), np.nan)


#: The codec of each task beyond classification (one object each: they hold nothing per model).
CODECS: dict[str, _Targets] = {"regression": NumericTargets(), "novelty": EvaluationLabels()}


def target_codec(config, classes: Sequence[Any] | None = None):
    """The codec of a model's ``y``: its task's (:data:`CODECS`), else the label codec of its
    declared ``classes`` or of the classes it learned so far (``classes``)."""
    codec = CODECS.get(config.task)
    if codec is not None:
        return codec
    if config.learns_classes:
        return shared_codec(classes or [], learn=True)
    return shared_codec(config.classes)
