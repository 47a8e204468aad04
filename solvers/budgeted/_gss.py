"""Golden section search for the merge coefficient h of two support vectors.

Source: Glasmachers & Qaadan (2018), Algorithm 1 and §3; the conventions (x_min's share m,
the S² factor of the weight degradation) are explained in :mod:`svmstream.solvers.budgeted._merging`.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

INV_PHI = (math.sqrt(5.0) - 1.0) / 2.0  # 1/φ ≈ 0.618

#: GSS tolerance of the papers' "GSS-standard" merge solver.
GSS_STANDARD_EPS = 0.01
#: GSS tolerance of "GSS-precise" (used to build and check lookup tables).
GSS_PRECISE_EPS = 1e-10


@nb.njit(nogil=True, cache=True)
def merge_gain(h, m, log_kappa):
    """g(h) = m·κ^((1−h)²) + (1−m)·κ^(h²), with κ given as ``log κ`` (≤ 0)."""
    return m * np.exp((1.0 - h) * (1.0 - h) * log_kappa) + (1.0 - m) * np.exp(h * h * log_kappa)


@nb.njit(nogil=True, cache=True)
def golden_section_bracket(m, log_kappa, eps, lo, hi):
    """Maximise :func:`merge_gain` over h ∈ [lo, hi] by golden section search.

    Parameters
    ----------
    m : float in [0, 1], x_min's share α_min / (α_min + α)
    log_kappa : float ≤ 0, log k(x_min, x) = −γ‖x_min − x‖²
    eps : float, final bracket width (0.01 for GSS-standard, 1e-10 for GSS-precise)
    lo, hi : search interval, 0 ≤ lo < hi ≤ 1

    Returns
    -------
    (h, g) : the bracket midpoint and g(h) there.  For small κ, g is bimodal (maxima near
    h = 0 and h = 1); GSS then returns one of the two local maxima.
    """
    c = hi - INV_PHI * (hi - lo)
    d = lo + INV_PHI * (hi - lo)
    fc = merge_gain(c, m, log_kappa)
    fd = merge_gain(d, m, log_kappa)
    while hi - lo > eps:
        if fc > fd:
            hi = d
            d = c
            fd = fc
            c = hi - INV_PHI * (hi - lo)
            fc = merge_gain(c, m, log_kappa)
        else:
            lo = c
            c = d
            fc = fd
            d = lo + INV_PHI * (hi - lo)
            fd = merge_gain(d, m, log_kappa)
    h = 0.5 * (lo + hi)
    return h, merge_gain(h, m, log_kappa)


@nb.njit(nogil=True, cache=True)
def golden_section_h(m, log_kappa, eps):
    """Maximise :func:`merge_gain` over h ∈ [0, 1] (see :func:`golden_section_bracket`)."""
    return golden_section_bracket(m, log_kappa, eps, 0.0, 1.0)


@nb.njit(nogil=True, cache=True)
def weight_degradation(m, kappa, g):
    """WD / S² = m² + (1−m)² + 2m(1−m)κ − g², clipped at 0 (rounding)."""
    wd = m * m + (1.0 - m) * (1.0 - m) + 2.0 * m * (1.0 - m) * kappa - g * g
    return wd if wd > 0.0 else 0.0
