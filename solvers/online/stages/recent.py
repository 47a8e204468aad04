"""Prediction intervals and the novelty threshold from a window of recent prequential values.

* :class:`ConformalIntervals` — split-conformal prediction intervals (Vovk, Gammerman & Shafer
  2005; Lei et al. 2018, "Distribution-free predictive inference for regression", JASA, §2.2)
  on the absolute residuals |y − ŷ| of the last ``window`` examples, each predicted *before* it
  was learned (prequential: a calibration set the model had not seen), as River's
  ``conf.RegressionJackknife`` does on a stream.  The interval of level 1 − α is
  ŷ ± q, q the ⌈(m + 1)(1 − α)⌉-th smallest of the m residuals (∞ when that exceeds m).
* :class:`ScoreThreshold` — the anomaly-score threshold of a stated false-alarm rate q: the
  ⌈(m + 1)(1 − q)⌉-th smallest of the last ``window`` prequential scores, so ``outlier`` means
  "rarer than 1 − q of recent rows" (River's ``anomaly.QuantileFilter``).

Both keep a ring buffer of ``window`` float64 values.  Saved state: ``<prefix>values``,
``<prefix>count`` (int64, values seen).
"""

from __future__ import annotations

import math

import numpy as np

#: Values each window keeps unless told otherwise.
DEFAULT_WINDOW = 2000


def upper_quantile(values: np.ndarray, level: float) -> float:
    """The ⌈(m + 1)·level⌉-th smallest of the m finite ``values`` (∞ beyond m; ∞ when none):
    the split-conformal quantile."""
    held = values[np.isfinite(values)]
    k = math.ceil((held.shape[0] + 1) * float(level))
    if held.shape[0] == 0 or k > held.shape[0]:
        return math.inf
    return float(np.partition(held, k - 1)[k - 1])


class RecentValues:
    """A ring buffer of the last ``window`` float64 values."""

    prefix = "recent__"

    def __init__(self, window: int = DEFAULT_WINDOW):
        if int(window) < 1:
            raise ValueError(f"window must be >= 1, got {window!r}")
        self.window = int(window)
        self._values = np.zeros(self.window)
        self.count = 0

    @property
    def values(self) -> np.ndarray:
        """The values held (at most ``window``), in no particular order."""
        return self._values[: min(self.count, self.window)]

    def observe(self, values: np.ndarray) -> None:
        """Append (n,) float64 values (non-finite ones are skipped)."""
        values = np.asarray(values, dtype=np.float64)
        values = values[np.isfinite(values)][-self.window :]
        for v in values:  # at most `window` per call
            self._values[self.count % self.window] = v
            self.count += 1

    def upper_quantile(self, level: float) -> float:
        """The ⌈(m + 1)·level⌉-th smallest of the m values held (∞ beyond m; ∞ when empty)."""
        return upper_quantile(self.values, level)

    def get_state(self):
        p = self.prefix
        return {p + "values": self._values.copy(), p + "count": np.array([self.count], dtype=np.int64)}, {
            "window": self.window
        }

    @classmethod
    def from_state(cls, arrays, meta):
        out = cls(int(meta["window"]))
        out._values[:] = arrays[cls.prefix + "values"]
        out.count = int(arrays[cls.prefix + "count"][0])
        return out


class ConformalIntervals(RecentValues):
    """Split-conformal intervals on recent absolute residuals (module docstring)."""

    prefix = "interval__"

    def half_width(self, level: float) -> float:
        """q of the interval ŷ ± q of coverage ``level`` ∈ (0, 1); ∞ without enough residuals."""
        if not 0.0 < float(level) < 1.0:
            raise ValueError(f"interval must be in (0, 1), got {level!r}")
        return self.upper_quantile(level)


class ScoreThreshold(RecentValues):
    """The threshold of a false-alarm rate on recent anomaly scores (module docstring)."""

    prefix = "threshold__"

    def threshold(self, false_alarm: float) -> float:
        """Scores above it are outliers; ∞ before any score."""
        return self.upper_quantile(1.0 - float(false_alarm))
