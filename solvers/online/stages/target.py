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
    """

    def __init__(self, enabled: bool = True):
        self.enabled = bool(enabled)
        self.mean = 0.0
        self.std = 1.0

    def fit(self, y: np.ndarray) -> TargetScaler:
        """Freeze mean and std of y (n,) float64 (nothing if disabled or empty); returns self."""
        if self.enabled and y.shape[0]:
            self.mean = float(np.mean(y))
            std = float(np.std(y))
            self.std = std if std > 0.0 and np.isfinite(std) else 1.0
        return self

    def transform(self, y: np.ndarray) -> np.ndarray:
        """(y − mean) / std, float64 (n,)."""
        return (np.asarray(y, dtype=np.float64) - self.mean) / self.std

    def inverse(self, z: np.ndarray) -> np.ndarray:
        """z · std + mean, float64 (n,)."""
        return np.asarray(z, dtype=np.float64) * self.std + self.mean

    def get_state(self):
        return {PREFIX + "mean_std": np.array([self.mean, self.std])}, {"enabled": self.enabled}

    @classmethod
    def from_state(cls, arrays, meta):
        out = cls(bool(meta["enabled"]))
        out.mean, out.std = (float(v) for v in arrays[PREFIX + "mean_std"])
        return out
