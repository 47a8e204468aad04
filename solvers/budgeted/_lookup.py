"""Precomputed golden section search: lookup tables for the merge of two SVs.

Source: Glasmachers & Qaadan (2018), "Speeding up budgeted stochastic gradient descent
SVM training with precomputed golden section search", §3.

For a binary merge the optimal ``h`` and the normalised weight degradation
``WD / S²`` depend only on x_min's share ``m`` and on ``κ = k(x_min, x)`` (see
:mod:`svmstream.solvers.budgeted._merging`).  Both are tabulated on a ``GRID × GRID`` grid over
``(m, κ) ∈ [0, 1]²`` with GSS-precise and read back by bilinear interpolation:

* **lookup-h**: ``h`` from the table, then WD evaluated exactly at that ``h``;
* **lookup-WD**: ``WD/S²`` read from the table for every partner candidate (no ``exp``
  beyond κ itself), ``h`` from the table only for the chosen partner.

The WD table is stored *normalised*: ``N(m, κ) = (WD/S²) / (m²(1 − κ)²)``.  WD/S² vanishes
like m² as m → 0 and like (1 − κ)² as κ → 1 (merging a tiny or a nearly identical SV costs
little), so bilinear interpolation of WD/S² itself has large *relative* errors exactly where
merges happen: one grid cell from κ = 1 a quadratic is off by up to 1/8 of its value, and
partners with nearly equal WD are then ranked wrongly (on a9a, where γ = 2⁻⁷ puts every κ in
[0.8, 1], 3–5% of the decisions differed from GSS-precise).  N is smooth and bounded
(between 0.5 and 2 for m ≤ 1/2), so ``WD/S² = m²(1 − κ)²·N`` read back by
:func:`interpolated_wd` has a *relative* error of at most 0.24% (99th percentile 0.06%;
``tests/test_lookup.py``).  Since m·S = α_min, the
weight degradation of a candidate is simply ``α_min²(1 − κ)²·N(m, κ)``.  The row m = 0 and
the column κ = 1, where N is a limit, are extrapolated linearly from the two nearest
interior grid lines.

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

from ._gss import GSS_PRECISE_EPS, golden_section_bracket, golden_section_h, weight_degradation

#: Grid points per axis (the paper: 400).
GRID = 400
#: κ below this is treated as this value (log κ must stay finite).
KAPPA_FLOOR = 1e-300

_TABLES: tuple[np.ndarray, np.ndarray] | None = None


@nb.njit(nogil=True, cache=True)
def build_tables(grid):
    """Return ``(H, N)``, both (grid, grid) float64, at ``m = i/(grid−1)``, ``κ = j/(grid−1)``:
    ``H[i, j]`` = optimal h and ``N[i, j]`` = (WD/S²)/(m²(1−κ)²), the normalised weight
    degradation (GSS-precise; rows with m > 1/2 continue the m < 1/2 branch; row 0 and the
    last column are linear extrapolations of the limits — see the module docstring)."""
    H = np.empty((grid, grid))
    N = np.empty((grid, grid))
    for i in range(grid):
        m = i / (grid - 1.0)
        for j in range(grid):
            kappa = max(j / (grid - 1.0), KAPPA_FLOOR)
            if m > 0.5:
                h, g = golden_section_bracket(m, np.log(kappa), GSS_PRECISE_EPS, 0.0, 0.5)
            else:
                h, g = golden_section_h(m, np.log(kappa), GSS_PRECISE_EPS)
            if i > 0 and j < grid - 1:
                N[i, j] = weight_degradation(m, kappa, g) / (m * m * (1.0 - kappa) * (1.0 - kappa))
            if j == grid - 1:
                h = m  # κ = 1: g is flat; the limit κ → 1 of the optimal h is m
            H[i, j] = h
    for i in range(1, grid):  # κ = 1: N is a limit
        N[i, grid - 1] = 2.0 * N[i, grid - 2] - N[i, grid - 3]
    for j in range(grid):  # m = 0: N is a limit
        N[0, j] = 2.0 * N[1, j] - N[2, j]
    return H, N


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
    return (1.0 - fu) * ((1.0 - fv) * table[i, j] + fv * table[i, j + 1]) + fu * (
        (1.0 - fv) * table[i + 1, j] + fv * table[i + 1, j + 1]
    )


@nb.njit(nogil=True, cache=True)
def interpolated_wd(n_table, m, kappa):
    """WD/S² = m²(1 − κ)²·N(m, κ) with N read from the normalised table by bilinear
    interpolation (``n_table``: the second table of :func:`merge_tables`)."""
    return m * m * (1.0 - kappa) * (1.0 - kappa) * interpolate(n_table, m, kappa)


def merge_tables() -> tuple[np.ndarray, np.ndarray]:
    """The process-wide ``(H, N)`` tables (optimal h, normalised WD), built on first use (< 1 s)."""
    global _TABLES
    if _TABLES is None:
        _TABLES = build_tables(GRID)
    return _TABLES
