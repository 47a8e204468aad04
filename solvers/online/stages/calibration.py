"""The calibration stage: decision values → probabilities for ``predict_proba``.

Wraps :class:`~svmstream.solvers.calibration.MarginCalibrator` (a slope/temperature on the
decision values, refitted on a sliding window), learned online from the margins the
estimator computes before each step on the examples received (prequential), so it never
sees a margin of an example already learned.

Saved state: the calibrator's arrays under ``cal__`` and its meta.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from ...calibration import MarginCalibrator

#: Prefix of the stage's arrays in a saved state.
PREFIX = "cal__"


class CalibrationStage:
    """Probability calibration of a streaming pipeline.

    Parameters
    ----------
    n_classes : int >= 2

    Attributes
    ----------
    calibrator : MarginCalibrator
    """

    def __init__(self, n_classes: int):
        self.calibrator = MarginCalibrator(int(n_classes))

    def observe(self, margins: np.ndarray, y_index: np.ndarray) -> None:
        """Prequential margins (n,) or (n, K) float64 and class indices (n,) int of received
        examples (none: nothing changes)."""
        if margins.shape[0]:
            self.calibrator.update(margins, y_index)

    def predict_proba(self, decision: np.ndarray) -> np.ndarray:
        """(n, n_classes) float64 probabilities of decision values (n,) or (n, K)."""
        return self.calibrator.predict_proba(decision)

    def add_class(self) -> None:
        """One more class (it takes the next index)."""
        self.calibrator.add_class()

    def published_copy(self) -> CalibrationStage:
        """A copy that keeps answering as now while this one keeps learning."""
        out = object.__new__(type(self))
        out.calibrator = copy.copy(self.calibrator)
        return out

    # ------------------------------------------------------------------ persistence
    def get_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """``(arrays, meta)``: the calibrator's arrays prefixed :data:`PREFIX`."""
        arrays, meta = self.calibrator.get_state()
        return {PREFIX + k: v for k, v in arrays.items()}, meta

    @classmethod
    def from_state(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any] | None, n_classes: int):
        """Rebuild from :meth:`get_state` (``meta`` None: saved before calibration existed,
        a fresh calibrator)."""
        stage = cls(n_classes)
        if meta is not None:
            own = {k[len(PREFIX) :]: v for k, v in arrays.items() if k.startswith(PREFIX)}
            stage.calibrator = MarginCalibrator.from_state(own, meta)
        return stage
