"""The growing scales and the calibration values of the task pipelines (:mod:`.tasks`):
:class:`TaskStages`, a mixin of :class:`.tasks._StreamingTask`.

* growing scales (:mod:`.stages.growth`): before a batch is learned, the feature and target
  factors widen where the rows learned so far fall outside them, and the engine and the
  reservoir are rescaled consistently;
* calibration values: the remembered rows' latest out-of-sample values (the regressor's absolute
  residuals, the one-class model's anomaly scores; :mod:`svmstream.solvers.budgeted._task_rehearsal`
  keeps them), the calibration set of the intervals or the threshold when
  ``calibration="reservoir"``.  They are copied once per learned batch (the values the model
  states until its next batch), so a published copy keeps its own.
"""

from __future__ import annotations

import numpy as np


class TaskStages:
    """Growing scales and calibration values of :class:`.tasks._StreamingTask` (module docstring)."""

    def _growths(self):
        """(feature growth, target growth) of :mod:`.stages.growth` (None: fixed): only for a
        scale the warm-up window fixed."""
        window = self.warmup > 0 and self.engine_.SCALES_GROW  # the engines it was measured on
        movable = self.engine_.maintenance != "project"  # projection keeps K⁻¹ of its SVs
        fx = self.feature_growth if window and self.scaling == "standard" and movable else None
        return fx, None

    def _learn_rows(self, X, y, w):
        """Learn raw rows X with targets y and weights w (window rows first when it just
        closed): the prequential ``(y, out)``."""
        n = X.shape[0]
        self._target.note(y)  # no warm-up window: the first batch's spread (the loss scale)
        out = np.empty(n)
        start = counted = 0  # rows learned, rows counted into the growing scales
        while start < n:  # in pieces ending where a scale grows (stages.growth)
            hit, fx, fy = self._next_growth(X, y, counted)
            counted = hit + 1
            if hit > start:
                Xs = (X[start:hit] - self._offset) / self._factor
                ys = self._target.transform(y[start:hit])
                part = np.empty(hit - start)
                self._learn(*(np.ascontiguousarray(a) for a in (Xs, ys, w[start:hit])), part)
                out[start:hit] = part
            if fx is not None or fy is not None:
                self._grow(fx, fy)
            start = hit
        self.n_learned_ += X.shape[0]
        return y, out

    def _next_growth(self, X, y, start: int):
        """Count rows of ``X``, ``y`` from ``start`` into the growing scales up to the first row
        at which one grows (that row included): ``(index, fx, fy)`` — that row's index and the
        grown factors (None: unchanged) the pipeline applies (:meth:`_grow`) after learning the
        rows before it on the old scale; ``(n, None, None)`` when none grows (all counted)."""
        n = X.shape[0]
        if start >= n or not (self._grow_x.on or self._grow_y.on):
            return n, None, None
        y_offset, y_factor = np.array([self._target.mean]), np.array([self._target.std])
        tx, cum_x = self._grow_x.first_growth(X[start:], self._offset, self._factor)
        ty, cum_y = self._grow_y.first_growth(y[start:, None], y_offset, y_factor)
        hit = min(tx, ty)
        rows = hit + 1 if hit < n - start else n - start
        fx = self._grow_x.take(cum_x, rows, self._factor) if self._grow_x.on else None
        fy = self._grow_y.take(cum_y, rows, y_factor) if self._grow_y.on else None
        return start + hit, fx, fy

    def _grow(self, fx, fy) -> None:
        """Widen the feature factors to ``fx`` and the target's to ``fy`` (None: unchanged),
        rescaling the engine and the reservoir consistently (:mod:`.stages.growth`).  The arrays
        are replaced, not written: a published copy keeps the old ones."""
        rx = None if fx is None else self._factor / fx
        ry = 1.0 if fy is None else self._target.std / float(fy[0])
        if self._learned():
            self.engine_.rescale(rx, ry)
        if rx is not None:
            self._mem_X = self._mem_X * rx
            self._factor = fx
        if fy is not None:
            self._mem_y, self._mem_a, self._mem_s = self._mem_y * ry, self._mem_a * ry, self._mem_s * ry
            self._target.std = float(fy[0])

    def _reservoir_values(self) -> np.ndarray:
        """A copy of the remembered rows' latest out-of-sample values (finite ones; empty unless
        ``calibration="reservoir"``): the calibration set of the intervals / the threshold."""
        if self.calibration != "reservoir" or not hasattr(self, "_mem_s"):
            return np.zeros(0)
        held = self._mem_s[: int(self._mem_n[0])]
        return held[np.isfinite(held)]

    def _calibration(self) -> np.ndarray:
        """The calibration values stated after the last learned batch (raw units): replaced,
        never written, so a published copy keeps its own."""
        if "_calib" not in self.__dict__:
            self._calib = self._reservoir_values() * self._calibration_unit()
        return self._calib

    def _calibration_unit(self) -> float:
        return 1.0

    def _stated(self) -> None:
        """Fix what the model states from its calibration values (before a copy shares them)."""
        self._calibration()
