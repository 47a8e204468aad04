"""Scales that grow: the warm-up window's standardisation widened when later rows fall outside.

The task pipelines fix the scale of the features (and of the regression target) from the first
``warmup`` rows.  A source sorted by a feature or by the target (``ggplot2::diamonds`` sorted by
price) puts its later rows far outside that scale: several standard deviations of the window away,
where the RBF model with γ of the window sees every new row as unrelated to all SVs and the
ε-tube (0.1 of the window's standard deviation) is a small fraction of the target's spread.

:class:`GrowingScale` keeps, per column, the root mean square deviation of every row learned so
far (the window's rows included) about the window's fixed offset,
``s_j = sqrt(mean((v_j − offset_j)²))``; when ``s_j`` exceeds ``growth`` times the current factor
of column j, that factor becomes ``s_j``.  The offsets never move (a moved offset of the target
would need a bias the dual regressor does not have); only the factors grow, never shrink.  The
pipeline then rescales what it holds consistently (:meth:`~svmstream.solvers.budgeted._task_base.
BudgetedTaskModel.rescale`): the support vectors and the remembered rows are the same raw points
in the new units; a target factor multiplies the coefficients, the remembered targets and dual
variables by old/new, so ŷ in raw units is unchanged by a target growth.  A feature growth does
change the function (the RBF distances in the grown column shrink): it is the model of the wider
scale, as if the window had been that wide.

A growth is checked at every row: the running sums are kept row by row in arrival order, the
first row (after the window's own rows) whose count takes an RMS deviation past its bound grows
the factor, and that row and the
later ones are learned on the grown scale — how the stream is cut into batches never changes
when or how much a factor grows.  Saved state: ``sq`` (k,) float64, ``count`` (1,) int64, meta
``growth``.
"""

from __future__ import annotations

import numpy as np

#: A factor grows when the running RMS deviation exceeds this multiple of it.
DEFAULT_GROWTH = 1.5


class GrowingScale:
    """Running RMS deviation about fixed offsets of ``width`` columns (module docstring).

    Parameters
    ----------
    growth : float > 1 or None — None: the scale never grows
    width : int — columns (d for the features, 1 for the target)
    after : int — rows counted before the first check (the window's: its own rows, learned in a
        random order, are what fixed the factors)
    """

    def __init__(self, growth: float | None, width: int, after: int = 0):
        if growth is not None and not float(growth) > 1.0:
            raise ValueError(f"growth must be > 1 or None, got {growth!r}")
        self.growth = None if growth is None else float(growth)
        self.after = int(after)
        self.sq = np.zeros(int(width))
        self.count = 0

    @property
    def on(self) -> bool:
        return self.growth is not None

    def first_growth(self, V: np.ndarray, offset: np.ndarray, factor: np.ndarray) -> tuple[int, np.ndarray]:
        """Without counting anything: the index of the first row of ``V`` (n, k) whose count takes
        a column's RMS deviation about ``offset`` past ``growth`` × ``factor`` (n: none), and
        the running sums after each row, (n, k) (row by row, the same bits however V is cut)."""
        dev = V - offset
        cum = np.cumsum(np.vstack([self.sq[None, :], dev * dev]), axis=0)[1:]
        if self.growth is None:
            return V.shape[0], cum
        counts = self.count + np.arange(1, V.shape[0] + 1, dtype=np.float64)
        over = np.any(np.sqrt(cum / counts[:, None]) > self.growth * factor, axis=1) & (counts > self.after)
        hit = np.flatnonzero(over)
        return (int(hit[0]) if hit.shape[0] else V.shape[0]), cum

    def take(self, cum: np.ndarray, rows: int, factor: np.ndarray) -> np.ndarray | None:
        """Count the first ``rows`` rows of a :meth:`first_growth` (their sums ``cum``); the
        grown factors (k,) if the last of them is past the bound (None otherwise)."""
        if rows == 0:
            return None
        self.sq = cum[rows - 1].copy()
        self.count += rows
        if self.growth is None or self.count <= self.after:
            return None
        rms = np.sqrt(self.sq / self.count)
        grows = rms > self.growth * factor
        return np.where(grows, rms, factor) if grows.any() else None

    def get_state(self):
        arrays = {"sq": self.sq.copy(), "count": np.array([self.count], dtype=np.int64)}
        return arrays, {"growth": self.growth, "after": self.after}

    @classmethod
    def from_state(cls, arrays, meta):
        out = cls(meta["growth"], np.asarray(arrays["sq"]).shape[0], int(meta.get("after", 0)))
        out.sq[:] = arrays["sq"]
        out.count = int(np.asarray(arrays["count"]).reshape(-1)[0])
        return out
