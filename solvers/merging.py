"""Merging two support vectors into one: golden section search for h and the partner search.

Source: Wang, Crammer & Vucetic (2012), "Breaking the curse of kernelization", §6.3, and
Glasmachers & Qaadan (2018), "Speeding up budgeted stochastic gradient descent SVM
training with precomputed golden section search", Algorithm 1.

Merging SV ``x_min`` (coefficient ``α_min``, the smallest in magnitude) with a partner
``x`` (coefficient ``α`` of the same sign) replaces both by one point on the line between
them, ``z = h·x_min + (1 − h)·x`` with ``h ∈ [0, 1]``.  With the Gaussian kernel and
``κ = k(x_min, x)``:

    k(x_min, z) = κ^((1−h)²),   k(x, z) = κ^(h²),
    α_z = α_min·κ^((1−h)²) + α·κ^(h²)       (projection of α_min·φ(x_min) + α·φ(x) onto φ(z))

Writing ``S = α_min + α`` and ``m = α_min / S`` (**x_min's share**), ``α_z = S·g(h)`` with

    g(h) = m·κ^((1−h)²) + (1 − m)·κ^(h²),

and the weight degradation is

    WD = ‖α_min·φ(x_min) + α·φ(x) − α_z·φ(z)‖² = S²·(m² + (1−m)² + 2m(1−m)κ − g(h)²).

Minimising WD over h means maximising g.  The papers' pseudo-code writes m as the
*partner's* share, which places z at the wrong end of the segment; the convention above is
the correct one and ``tests/test_merging.py`` checks it against a brute-force minimisation.
Note the factor S² (squared): the seed paper's Lemma 1 prints it unsquared.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from .kernels import sv_dot_products

INV_PHI = (math.sqrt(5.0) - 1.0) / 2.0  # 1/φ ≈ 0.618

#: GSS tolerance of the papers' "GSS-standard" merge solver.
GSS_STANDARD_EPS = 0.01
#: GSS tolerance of "GSS-precise" (used to build and check lookup tables).
GSS_PRECISE_EPS = 1e-10
#: Relative tolerance under which two |α| count as equal when choosing x_min.
TIE_RTOL = 1e-9


@nb.njit(nogil=True, cache=True)
def merge_gain(h, m, log_kappa):
    """g(h) = m·κ^((1−h)²) + (1−m)·κ^(h²), with κ given as ``log κ`` (≤ 0)."""
    return m * np.exp((1.0 - h) * (1.0 - h) * log_kappa) + (1.0 - m) * np.exp(h * h * log_kappa)


@nb.njit(nogil=True, cache=True)
def golden_section_h(m, log_kappa, eps):
    """Maximise :func:`merge_gain` over h ∈ [0, 1] by golden section search.

    Parameters
    ----------
    m : float in [0, 1], x_min's share α_min / (α_min + α)
    log_kappa : float ≤ 0, log k(x_min, x) = −γ‖x_min − x‖²
    eps : float, final bracket width (0.01 for GSS-standard, 1e-10 for GSS-precise)

    Returns
    -------
    (h, g) : the bracket midpoint and g(h) there.
    """
    lo = 0.0
    hi = 1.0
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
def weight_degradation(m, kappa, g):
    """WD / S² = m² + (1−m)² + 2m(1−m)κ − g², clipped at 0 (rounding)."""
    wd = m * m + (1.0 - m) * (1.0 - m) + 2.0 * m * (1.0 - m) * kappa - g * g
    return wd if wd > 0.0 else 0.0


@nb.njit(nogil=True, cache=True)
def remove_sv(sv_t, sv_sq, coef, n_sv, j):
    """Delete SV ``j`` by moving the last live SV into its slot; returns the new count."""
    last = n_sv - 1
    if j != last:
        for k in range(sv_t.shape[0]):
            sv_t[k, j] = sv_t[k, last]
        sv_sq[j] = sv_sq[last]
        coef[j] = coef[last]
    coef[last] = 0.0
    return last


@nb.njit(nogil=True, cache=True)
def merge_smallest(sv_t, sv_sq, coef, n_sv, gamma, eps, x_min, scratch):
    """One merging budget-maintenance step on a binary model (Glasmachers & Qaadan, Alg. 1).

    Takes the SV with the smallest |coef| as x_min (ties within ``TIE_RTOL`` relative: the
    lowest slot), evaluates every other SV with a
    coefficient of the same sign as partner (h by :func:`golden_section_h`), and merges
    the pair with the smallest weight degradation.  If no SV shares x_min's sign, x_min is
    removed instead (WD = α_min²).

    Parameters
    ----------
    sv_t : (d, capacity) float64, SVs as columns; modified in place
    sv_sq : (capacity,) float64, cached squared norms; modified in place
    coef : (capacity,) float64, coefficients (any common scale); modified in place
    n_sv : int, live SVs before the step
    gamma : float, RBF γ
    eps : float, GSS tolerance
    x_min, scratch : (d,) and (capacity,) float64 work arrays

    Returns
    -------
    (n_sv_new, wd, merged) : new SV count, weight degradation in coefficient units²,
    and 1 if a merge happened (0 for the removal fallback).
    """
    a_abs = abs(coef[0])
    for j in range(1, n_sv):
        if abs(coef[j]) < a_abs:
            a_abs = abs(coef[j])
    # Unmerged SVs of a Pegasos model all carry the same |α| up to rounding; ties within
    # TIE_RTOL go to the lowest slot, so the choice does not hinge on rounding noise.
    i_min = 0
    while abs(coef[i_min]) > a_abs * (1.0 + TIE_RTOL):
        i_min += 1
    a_min = coef[i_min]
    d = sv_t.shape[0]
    for k in range(d):
        x_min[k] = sv_t[k, i_min]
    sq_min = sv_sq[i_min]
    sv_dot_products(x_min, sv_t, n_sv, scratch)

    best_j = -1
    best_wd = np.inf
    best_h = 0.0
    best_g = 0.0
    for j in range(n_sv):
        if j == i_min or coef[j] * a_min <= 0.0:
            continue
        dist = sq_min + sv_sq[j] - 2.0 * scratch[j]
        if dist < 0.0:
            dist = 0.0
        log_kappa = -gamma * dist
        total = a_min + coef[j]
        m = a_min / total
        h, g = golden_section_h(m, log_kappa, eps)
        wd = total * total * weight_degradation(m, np.exp(log_kappa), g)
        if wd < best_wd:
            best_wd = wd
            best_j = j
            best_h = h
            best_g = g
    if best_j < 0:
        return remove_sv(sv_t, sv_sq, coef, n_sv, i_min), a_min * a_min, 0

    h = best_h
    z_sq = 0.0
    for k in range(d):
        zk = h * x_min[k] + (1.0 - h) * sv_t[k, best_j]
        sv_t[k, best_j] = zk
        z_sq += zk * zk
    sv_sq[best_j] = z_sq
    coef[best_j] = (a_min + coef[best_j]) * best_g
    return remove_sv(sv_t, sv_sq, coef, n_sv, i_min), best_wd, 1
