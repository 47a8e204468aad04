"""Precomputed golden section search: lookup tables for the merge of two SVs.

Source: Glasmachers & Qaadan (2018), "Speeding up budgeted stochastic gradient descent
SVM training with precomputed golden section search", §3.

For a binary merge the optimal ``h`` and the normalised weight degradation
``WD / S²`` depend only on x_min's share ``m`` and on ``κ = k(x_min, x)`` (see
:mod:`solvers.merging`).  Both are tabulated on a ``GRID × GRID`` grid over
``(m, κ) ∈ [0, 1]²`` with GSS-precise and read back by bilinear interpolation:

* **lookup-h**: ``h`` from the table, then WD evaluated exactly at that ``h``;
* **lookup-WD**: ``WD/S²`` read from the table for every partner candidate (no ``exp``
  beyond κ itself), ``h`` from the table only for the chosen partner.

Lookups always have ``m ≤ 1/2`` (x_min has the smaller coefficient).  Where g is bimodal
(small κ) the optimal h jumps from ≈0 to ≈1 as m crosses 1/2, so interpolating between
the last row below 1/2 and the first row above it would produce an h from neither branch.
Rows with ``m > 1/2`` therefore hold the continuation of the ``m < 1/2`` branch (GSS on
h ∈ [0, 1/2]) in both tables, so that interpolation for m ≤ 1/2 stays on one branch.
At κ = 1 (identical points) g is constant and h undefined; the h table holds the limit
κ → 1, h = m, there.  Entries with ``m ≤ 1/2`` are exactly GSS-precise's.

The tables are built once per process (numba, well under a second) and kept in module
globals.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .gss import GSS_PRECISE_EPS, golden_section_bracket, golden_section_h, weight_degradation

#: Grid points per axis (the paper: 400).
GRID = 400
#: κ below this is treated as this value (log κ must stay finite).
KAPPA_FLOOR = 1e-300

_TABLES: tuple[np.ndarray, np.ndarray] | None = None


@nb.njit(nogil=True, cache=True)
def build_tables(grid):
    """Return ``(H, W)``, both (grid, grid) float64: ``H[i, j]`` = optimal h and
    ``W[i, j]`` = WD/S² at ``m = i/(grid−1)``, ``κ = j/(grid−1)`` (GSS-precise; rows with
    m > 1/2 continue the m < 1/2 branch, see the module docstring)."""
    H = np.empty((grid, grid))
    W = np.empty((grid, grid))
    for i in range(grid):
        m = i / (grid - 1.0)
        for j in range(grid):
            kappa = max(j / (grid - 1.0), KAPPA_FLOOR)
            if m > 0.5:
                h, g = golden_section_bracket(m, np.log(kappa), GSS_PRECISE_EPS, 0.0, 0.5)
            else:
                h, g = golden_section_h(m, np.log(kappa), GSS_PRECISE_EPS)
            W[i, j] = weight_degradation(m, kappa, g)
            if j == grid - 1:
                h = m  # κ = 1: g is flat; the limit κ → 1 of the optimal h is m
            H[i, j] = h
    return H, W


@nb.njit(nogil=True, cache=True)
def interpolate(table, m, kappa):
    """Bilinear interpolation of a (G, G) table at ``(m, κ) ∈ [0, 1]²``."""
    last = table.shape[0] - 1
    u = m * last
    v = kappa * last
    i = min(max(int(u), 0), last - 1)
    j = min(max(int(v), 0), last - 1)
    fu = u - i
    fv = v - j
    return ((1.0 - fu) * ((1.0 - fv) * table[i, j] + fv * table[i, j + 1])
            + fu * ((1.0 - fv) * table[i + 1, j] + fv * table[i + 1, j + 1]))


def merge_tables() -> tuple[np.ndarray, np.ndarray]:
    """The process-wide ``(H, W)`` tables, built on first use (< 1 s)."""
    global _TABLES
    if _TABLES is None:
        _TABLES = build_tables(GRID)
    return _TABLES
