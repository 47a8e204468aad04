"""The target scaler of regression: a standardisation of y frozen at the end of the warm-up window.

So ε and C mean the same on any scale of the target: the estimator learns
``(y − mean) / std`` of the window and answers are mapped back — the streaming counterpart of
scikit-learn's ``TransformedTargetRegressor(SVR(), transformer=StandardScaler())``.  A constant
window target (std 0) gives std 1.

Saved state: ``target__mean_std`` (2,) float64.
"""

from __future__ import annotations

import numpy as np

PREFIX = "target__"


class TargetScaler:
    """``fit(y)`` once, then ``transform`` / ``inverse``; ``enabled=False`` is the identity.

    Attributes
    ----------
    mean, std : float — of the window's targets (0 and 1 before :meth:`fit` or when disabled).
    spread : float or None — the standard deviation of the first targets (the window's, or the
        first batch learned without a window), enabled or not: the scale of the challengers'
        paired errors (:func:`svmstream.solvers.online.race.losses.regression_scale`); None before.
    """

    def __init__(self, enabled: bool = True):
        self.enabled = bool(enabled)
        self.mean = 0.0
        self.std = 1.0
        self.spread: float | None = None

    def fit(self, y: np.ndarray) -> TargetScaler:
        """Freeze mean and std of y (n,) float64 (nothing if disabled or empty); returns self."""
        self.note(y)
        if self.enabled and y.shape[0]:
            self.mean = float(np.mean(y))
            std = float(np.std(y))
            self.std = std if std > 0.0 and np.isfinite(std) else 1.0
        return self

    def note(self, y: np.ndarray) -> None:
        """Keep the spread of the first targets ``y`` (n,) (once: later calls change nothing)."""
        if self.spread is None and np.asarray(y).shape[0]:
            std = float(np.std(y))
            self.spread = std if std > 0.0 and np.isfinite(std) else 1.0

    def transform(self, y: np.ndarray) -> np.ndarray:
        """(y − mean) / std, float64 (n,)."""
        return (np.asarray(y, dtype=np.float64) - self.mean) / self.std

    def inverse(self, z: np.ndarray) -> np.ndarray:
        """z · std + mean, float64 (n,)."""
        return np.asarray(z, dtype=np.float64) * self.std + self.mean

    def get_state(self):
        meta = {"enabled": self.enabled, "spread": self.spread}
        return {PREFIX + "mean_std": np.array([self.mean, self.std])}, meta

    @classmethod
    def from_state(cls, arrays, meta):
        out = cls(bool(meta["enabled"]))
        out.mean, out.std = (float(v) for v in arrays[PREFIX + "mean_std"])
        out.spread = meta.get("spread")  # saved before it was kept: the next batch's spread

        return out
