"""Probability calibration from SVM decision values (margins).

:class:`MarginCalibrator` turns margins into class probabilities with a map that never
changes the predicted class:

* **binary** (margins ``f`` of shape (n,), positive side = class index 1): Platt's sigmoid
  without its offset, ``P(y = 1 | f) = sigmoid(a f)`` with one slope ``a > 0`` (Platt 1999,
  "Probabilistic outputs for support vector machines and comparisons to regularized
  likelihood methods"; his ``sigmoid(A f + B)`` with ``B != 0`` would move the 0.5 point
  away from ``f = 0`` and could contradict ``predict``);
* **multi-class** (margins of shape (n, K), prediction = argmax): temperature scaling,
  ``P(y = k | f) = softmax(a f)_k`` with ``a = 1 / T > 0`` (Guo, Pleiss, Sun & Weinberger
  2017, "On calibration of modern neural networks").  For ``K = 2`` with the columns
  ``(-f/2, f/2)`` this is exactly the binary map: ``softmax(a (-f/2, f/2))_1 = sigmoid(a f)``.

Because ``a > 0`` the map is monotone, so ``argmax(predict_proba(f))`` is the predicted class
of every row (binary: ``P(1) > 0.5`` exactly when ``f > 0``; multi-class: the argmax of the
margins, ties to the lowest index); the rare rows where rounding would break this
(``a f`` tying in floating point) are repaired by a one-ulp nudge.

Fitting minimises the log-loss over the one parameter ``a`` (convex in ``a``: safeguarded
Newton on its derivative, warm-started from the previous fit; 4-5 evaluations from a cold
start).  Degenerate fits are guarded twice.  The targets are smoothed: with n rows, the true
class of a row gets ``(n + 1) / (n + 2)`` and the other classes share ``1 / (n + 2)`` (Platt's
rule of succession, with the number of rows in place of his per-class counts ``N_+``,
``N_-``), which keeps the minimiser finite even on a perfectly separable window (where ``a``
would otherwise go to infinity).  As a last resort ``a`` is clipped to ``[1e-6, 1e3] / m``,
with ``m`` the median non-zero margin size (``|f|``, or the spread max - min of a multi-class
row).

Online use (budgeted estimators): :meth:`MarginCalibrator.update` appends prequential
margins (each computed before the model learned that example) to a ring buffer of the most
recent ``window`` rows and refits at fixed row counts (50, 100, 200, 400, then every
``refit_every`` rows), so the parameters depend only on the sequence of rows, never on how it
was split into calls.  The window discards the margins of the weak early model.  Batch use
(``probability=True`` of DC-SVM and the linear estimator): :meth:`MarginCalibrator.fit`, once,
on the margins of a held-out split (:func:`holdout_split`).

Measured against ``CalibratedClassifierCV`` on ijcnn1, a9a and pendigits, and why the single
slope/temperature, the window of 2,000 and ``refit_every`` 500 were kept: ``docs/online.md``
("Measured: calibration").
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ._calibration_batch import (
    HOLDOUT_FRACTION,
    HOLDOUT_MAX_ROWS,
    HOLDOUT_MIN_ROWS,
    MIN_ROWS,
    expected_calibration_error,
    holdout_split,
)
from ._calibration_kernels import _binary_grad_hess, _multi_grad_hess, _multi_prepare, _solve_slope

__all__ = [
    "HOLDOUT_FRACTION",
    "HOLDOUT_MAX_ROWS",
    "HOLDOUT_MIN_ROWS",
    "MarginCalibrator",
    "expected_calibration_error",
    "holdout_split",
]

SLOPE_BOUNDS = (1e-6, 1e3)
"""``a`` is clipped to these multiples of ``1 / m`` (m: median non-zero margin size)."""

REFIT_BELOW_ROWS = 20_000
"""Batch estimators with fewer rows refit the model on all rows after calibrating a first fit
of the training part on the held-out rows (a second fit; the served model is then the one
``probability=False`` would give).  From this size on the model is the first fit: the held-out
rows (at most 5,000, 10%) no longer cost measurable accuracy, and a second fit would double
the training time."""

_STATE_VERSION = 1
_HALF_UP = np.nextafter(0.5, 1.0)  # smallest float64 above 0.5


# ----------------------------------------------------------------------------- calibrator
class MarginCalibrator:
    """Class probabilities from SVM margins: a slope (binary) or temperature (multi-class).

    ``predict_proba(f)`` is ``[1 - sigmoid(a f), sigmoid(a f)]`` for binary margins and
    ``softmax(a f)`` row-wise for multi-class margins (``a = 1 / T``), with ``a`` fitted by
    minimising the (Platt-smoothed) log-loss; see the module docstring for the sources, the
    guards and the argmax guarantee.

    Parameters
    ----------
    n_classes : int
        K >= 2.  Binary margins: shape (n,), float64, positive side = class index 1.
        Multi-class margins: shape (n, K) float64 (argmax = predicted class).
    window : int, default=2000
        Rows kept by :meth:`update` (a ring buffer of the most recent ones; its arrays grow
        with the rows received, doubling up to ``window``, so a calibrator that has seen few
        rows holds only those).
    refit_every : int, default=500
        :meth:`update` refits when the number of rows seen reaches 50, 100, 200, ... (doubling
        while below ``refit_every``) and then every multiple of ``refit_every``.

    Attributes
    ----------
    n_classes : int
        K (grows with :meth:`add_class`).
    slope_ : float
        The fitted ``a`` (binary slope; multi-class ``1 / temperature_``); 1.0 before a fit.
    temperature_ : float
        ``1 / slope_``.
    fitted_ : bool
        True once a fit had enough data (>= 50 rows of at least two classes).
    n_fitted_ : int
        Rows the last successful fit used (0 before).
    n_fits_ : int
        Successful fits so far.
    n_seen_ : int
        Rows received by :meth:`update` since creation or the last :meth:`fit`.
    n_window_ : int
        Rows currently in the window.

    Raises
    ------
    ValueError
        On invalid parameters (``n_classes < 2``, ``window < 1``, ``refit_every < 1``).
    """

    def __init__(self, n_classes: int, window: int = 2000, refit_every: int = 500):
        for name, value, low in (
            ("n_classes", n_classes, 2),
            ("window", window, 1),
            ("refit_every", refit_every, 1),
        ):
            if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        self.n_classes = int(n_classes)
        self.window = int(window)
        self.refit_every = int(refit_every)
        self.slope_ = 1.0
        self.fitted_ = False
        self.n_fitted_ = 0
        self.n_fits_ = 0
        self._reset_window()

    # ------------------------------------------------------------------ window
    def _reset_window(self):
        shape = (0,) if self.n_classes == 2 else (0, self.n_classes)
        self._margins = np.zeros(shape, dtype=np.float64)
        self._y = np.zeros(0, dtype=np.int64)
        self._count = 0  # rows in the window
        self.n_seen_ = 0  # rows received; the next row goes to slot n_seen_ % window

    def _reserve(self, rows: int) -> None:
        """Room for slots ``0 .. rows - 1`` (at most ``window``): the arrays grow to at least
        twice their size, the filled slots kept.  Until the ring wraps, slot i holds the i-th
        row received, so the filled slots are always a prefix."""
        have = self._y.shape[0]
        rows = min(int(rows), self.window)
        if rows <= have:
            return
        size = min(self.window, max(rows, 2 * have))
        margins = np.zeros((size, *self._margins.shape[1:]), dtype=np.float64)
        y = np.zeros(size, dtype=np.int64)
        margins[:have], y[:have] = self._margins, self._y
        self._margins, self._y = margins, y

    @property
    def n_window_(self) -> int:
        return self._count

    @property
    def temperature_(self) -> float:
        return 1.0 / self.slope_

    def _next_refit(self, n_seen: int) -> int:
        """The first refit row count above ``n_seen`` (depends on the count only)."""
        b = MIN_ROWS
        while b < self.refit_every:
            if b > n_seen:
                return b
            b *= 2
        return (n_seen // self.refit_every + 1) * self.refit_every

    # ------------------------------------------------------------------ validation
    def _check(self, margins, y_index=None):
        margins = np.asarray(margins, dtype=np.float64)
        expected = "(n,)" if self.n_classes == 2 else f"(n, {self.n_classes})"
        if (self.n_classes == 2 and margins.ndim != 1) or (
            self.n_classes > 2 and (margins.ndim != 2 or margins.shape[1] != self.n_classes)
        ):
            raise ValueError(
                f"margins must have shape {expected} for {self.n_classes} classes, got {margins.shape}"
            )
        if not np.all(np.isfinite(margins)):
            raise ValueError("margins must be finite")
        if y_index is None:
            return margins
        y_index = np.asarray(y_index)
        if y_index.shape != (margins.shape[0],):
            raise ValueError(f"y_index must have shape ({margins.shape[0]},), got {y_index.shape}")
        if y_index.size and (
            y_index.dtype.kind not in "iu" or y_index.min() < 0 or y_index.max() >= self.n_classes
        ):
            raise ValueError(f"y_index must hold integers in [0, {self.n_classes}), got {y_index!r}")
        return margins, y_index.astype(np.int64)

    # ------------------------------------------------------------------ learning
    def update(self, margins, y_index) -> None:
        """Append rows to the window and refit at the scheduled row counts.

        Parameters
        ----------
        margins : array-like of shape (n,) (binary) or (n, K), float64
            Prequential margins: each computed before the model learned its example.
        y_index : array-like of shape (n,), int
            True class indices in ``0..K-1``.

        Raises
        ------
        ValueError
            On wrong shapes, non-finite margins or class indices out of range (nothing is
            recorded then).
        """
        margins, y_index = self._check(margins, y_index)
        done, n = 0, margins.shape[0]
        while done < n:
            # up to the next refit boundary, so refits happen at the same rows however the
            # sequence is split into calls
            take = min(n - done, self._next_refit(self.n_seen_) - self.n_seen_)
            first = max(done, done + take - self.window)  # older rows would be overwritten anyway
            self._reserve(self.n_seen_ + take)
            slots = (self.n_seen_ + (first - done) + np.arange(done + take - first)) % self.window
            self._margins[slots] = margins[first : done + take]
            self._y[slots] = y_index[first : done + take]
            self.n_seen_ += take
            self._count = min(self.window, self._count + take)
            done += take
            if self.n_seen_ == self._next_refit(self.n_seen_ - 1):
                self._refit(self._margins[: self._count], self._y[: self._count])

    def fit(self, margins, y_index) -> MarginCalibrator:
        """Fit ``a`` on all the given rows at once (batch models: held-out margins).

        The window is emptied (it serves :meth:`update` only); with fewer than 50 rows or a
        single class the parameters return to the default ``a = 1`` and ``fitted_`` is False.

        Parameters
        ----------
        margins : array-like of shape (n,) (binary) or (n, K), float64
        y_index : array-like of shape (n,), int

        Returns
        -------
        self

        Raises
        ------
        ValueError
            As :meth:`update`.
        """
        margins, y_index = self._check(margins, y_index)
        self._reset_window()
        self.slope_, self.fitted_, self.n_fitted_, self.n_fits_ = 1.0, False, 0, 0
        self._refit(margins, y_index)
        return self

    def _refit(self, margins, y_index) -> None:
        """Fit ``a`` on these rows, warm-started from the current value; with too little data
        (fewer than MIN_ROWS rows, one class, or all margins zero) keep the current value."""
        n = margins.shape[0]
        counts = np.bincount(y_index, minlength=self.n_classes)
        if n < MIN_ROWS or np.count_nonzero(counts) < 2:
            return
        # smoothed targets: the true class gets (n + 1) / (n + 2), the others share 1 / (n + 2)
        # (Platt's rule with the row count n for the class counts: bounded a on separable
        # data, a smaller bias than Platt's counts, which measurably hurt; see MEASURED)
        eps = np.full(n, 1.0 / (n + 2.0))
        if margins.ndim == 1:
            f = margins
            size = np.abs(f)
            t = np.where(y_index == 1, 1.0 - eps, eps)
            t_f = float(np.dot(t, f))
            grad_hess = lambda a: _binary_grad_hess(a, f, t_f)
        else:
            f = np.ascontiguousarray(margins)
            top, size, q_g = _multi_prepare(f, y_index, eps)
            buf = np.empty(f.shape[1], dtype=np.float64)

            def grad_hess(a):
                grad, hess = _multi_grad_hess(a, f, top, buf)
                return grad - q_g, hess

        size = size[size > 0]
        if size.shape[0] == 0:  # every margin zero: no information about a
            return
        m = float(np.median(size))
        lo, hi = SLOPE_BOUNDS[0] / m, SLOPE_BOUNDS[1] / m
        self.slope_ = float(_solve_slope(grad_hess, self.slope_, lo, hi))
        self.fitted_ = True
        self.n_fitted_ = int(n)
        self.n_fits_ += 1

    # ------------------------------------------------------------------ prediction
    def predict_proba(self, margins) -> np.ndarray:
        """Class probabilities.

        Parameters
        ----------
        margins : array-like of shape (n,) (binary) or (n, K), float64

        Returns
        -------
        ndarray of shape (n, K), float64, rows summing to 1 (binary: exactly), with
        ``argmax`` equal to the predicted class of every row: binary ``proba[:, 1] > 0.5``
        exactly when ``f > 0``; multi-class ``argmax(proba) == argmax(margins)`` (ties to the
        lowest index, as :func:`numpy.argmax`).

        Raises
        ------
        ValueError
            On a wrong shape or non-finite margins.
        """
        f = self._check(margins)
        a = self.slope_
        if f.ndim == 1:
            big = 1.0 / (1.0 + np.exp(-a * np.abs(f)))  # sigmoid(a|f|) in [0.5, 1]
            pos = f > 0
            big[pos] = np.maximum(big[pos], _HALF_UP)  # f > 0 must give P(1) > 0.5 even for tiny a f
            small = 1.0 - big  # exact: big is in [0.5, 1]
            return np.column_stack([np.where(pos, small, big), np.where(pos, big, small)])
        z = a * f
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        if p.shape[0]:
            self._repair_argmax(f, p)
        return p

    @staticmethod
    def _repair_argmax(f, p) -> None:
        """Where rounding of ``a f`` made another column tie with (or beat) the margins'
        argmax, lower that column just below it (a change of an ulp or so; in place)."""
        want = np.argmax(f, axis=1)
        bad = np.flatnonzero(np.argmax(p, axis=1) != want)
        if bad.shape[0] == 0:
            return
        sub, w = p[bad], want[bad][:, None]
        top = np.take_along_axis(sub, w, axis=1)
        cols = np.arange(p.shape[1])[None, :]
        below = np.nextafter(top, 0.0)
        sub = np.where((cols < w) & (sub >= top), below, sub)  # earlier columns must be strictly lower
        sub = np.where((cols > w) & (sub > top), top, sub)  # later ones may tie
        p[bad] = sub

    # ------------------------------------------------------------------ classes
    def add_class(self) -> None:
        """K -> K + 1: a class learned from the data.

        The window follows the estimator's conversion of its margins: binary rows ``f`` become
        ``[-f/2, f/2, 0]`` (BSGD's binary w becomes the Crammer-Singer columns (-w/2, w/2, 0));
        multi-class rows get a new column of 0.0 (the new class's zero coefficients give
        margin 0).  ``a`` carries over unchanged: ``softmax(a (-f/2, f/2))_1 = sigmoid(a f)``,
        so on converted rows the old classes keep their probabilities up to the new class's
        share: ``p_k = p_k^binary (1 - p_2)``.
        """
        if self.n_classes == 2:
            f = self._margins
            new = np.column_stack([-0.5 * f, 0.5 * f, np.zeros_like(f)])
        else:
            new = np.column_stack([self._margins, np.zeros(self._margins.shape[0])])
        self._margins = np.ascontiguousarray(new)
        self.n_classes += 1

    # ------------------------------------------------------------------ persistence
    def get_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Pickle-free state: ``(arrays, meta)``.

        Returns
        -------
        arrays : dict
            ``margins`` (n_window,) or (n_window, K) float64 and ``y`` (n_window,) int64: the
            window's filled slots, in slot order; ``slope`` (1,) float64.
        meta : dict
            JSON-serialisable: ``version``, ``n_classes``, ``window``, ``refit_every``,
            ``n_seen``, ``n_window``, ``fitted``, ``n_fitted``, ``n_fits``.
        """
        arrays = {
            "margins": self._margins[: self._count].copy(),
            "y": self._y[: self._count].copy(),
            "slope": np.array([self.slope_], dtype=np.float64),
        }
        meta = {
            "version": _STATE_VERSION,
            "n_classes": self.n_classes,
            "window": self.window,
            "refit_every": self.refit_every,
            "n_seen": int(self.n_seen_),
            "n_window": int(self._count),
            "fitted": bool(self.fitted_),
            "n_fitted": int(self.n_fitted_),
            "n_fits": int(self.n_fits_),
        }
        return arrays, meta

    @classmethod
    def from_state(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> MarginCalibrator:
        """Rebuild the calibrator :meth:`get_state` described (identical predictions and
        identical future refits).

        Raises
        ------
        ValueError
            On an unknown version or arrays inconsistent with ``meta``.
        """
        if meta.get("version") != _STATE_VERSION:
            raise ValueError(f"unknown calibrator state version {meta.get('version')!r}")
        cal = cls(int(meta["n_classes"]), int(meta["window"]), int(meta["refit_every"]))
        count = int(meta["n_window"])
        margins = np.asarray(arrays["margins"], dtype=np.float64)
        y = np.asarray(arrays["y"], dtype=np.int64)
        cal._reserve(count)
        if count > cal.window or margins.shape != cal._margins[:count].shape or y.shape != (count,):
            raise ValueError(
                f"calibrator window arrays of shapes {margins.shape}, {y.shape} do not match "
                f"{count} rows of {cal.n_classes} classes"
            )
        cal._margins[:count] = margins
        cal._y[:count] = y
        cal._count = count
        cal.n_seen_ = int(meta["n_seen"])
        cal.slope_ = float(np.asarray(arrays["slope"], dtype=np.float64)[0])
        cal.fitted_ = bool(meta["fitted"])
        cal.n_fitted_ = int(meta["n_fitted"])
        cal.n_fits_ = int(meta["n_fits"])
        return cal
