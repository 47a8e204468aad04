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

import numba as nb
import numpy as np

from .._params import MERGE_SOLVERS
from ._gss import GSS_PRECISE_EPS, INV_PHI, golden_section_h, merge_gain, weight_degradation
from ._lookup import interpolate, interpolated_wd
from ._sparse_pool import pool_load, pool_move, pool_place_merged, pool_row_log, pool_unload

#: Relative tolerance under which two |α| count as equal when choosing x_min.
TIE_RTOL = 1e-9

# ---------------------------------------------------------------------------- merge solvers
#: ``merge_solver`` codes understood by :func:`merge_smallest`.
SOLVER_GSS = MERGE_SOLVERS["gss"]  # GSS with the caller's tolerance (GSS-standard: 0.01)
SOLVER_GSS_PRECISE = MERGE_SOLVERS["gss-precise"]  # GSS to 1e-10
SOLVER_LOOKUP_H = MERGE_SOLVERS["lookup-h"]  # h from the table, WD evaluated exactly
SOLVER_LOOKUP_WD = MERGE_SOLVERS[
    "lookup-wd"
]  # WD from the table; h from the table for the chosen partner only

# diag[...] accumulators of the side-by-side comparison mode of merge_smallest
D_EVENTS = 0  # merge events compared
D_SAME_PARTNER = 1  # events where both solvers picked the same partner
D_WD = 2  # Σ WD actually incurred
D_WD_REF = 3  # Σ WD the reference solver would have incurred
D_WD_RATIO = 4  # Σ WD / WD_ref over events with WD_ref > 0
D_RATIO_EVENTS = 5
N_DIAG = 6


@nb.njit(nogil=True, cache=True)
def candidate_h_wd(m, log_kappa, kappa, solver, eps, h_table, wd_table):
    """``(h, WD/S²)`` of merging with one partner under ``solver`` (h = −1 for lookup-WD)."""
    if solver == SOLVER_LOOKUP_WD:
        return -1.0, interpolated_wd(wd_table, m, kappa)
    if solver == SOLVER_LOOKUP_H:
        h = interpolate(h_table, m, kappa)
        return h, weight_degradation(m, kappa, merge_gain(h, m, log_kappa))
    h, g = golden_section_h(m, log_kappa, eps if solver == SOLVER_GSS else GSS_PRECISE_EPS)
    return h, weight_degradation(m, kappa, g)


@nb.njit(nogil=True, cache=True)
def smallest_coefficient_slot(coef, n_sv):
    """Slot of the SV with the smallest ‖α_j‖² (over classes).

    Unmerged Pegasos SVs all carry the same |α| in exact arithmetic, so the minimum is
    usually a tie decided by rounding noise.  Ties within TIE_RTOL go to the **highest**
    slot: a newly added SV sits in the last slot, so an incoming example that ties is the one
    merged into the model (over 45 seeds on ijcnn1 this gave a higher median one-pass accuracy
    and fewer bad runs than the lowest slot)."""
    best = np.inf
    for j in range(n_sv):
        total = 0.0
        for c in range(coef.shape[1]):
            total += coef[j, c] * coef[j, c]
        if total < best:
            best = total
    limit = best * (1.0 + TIE_RTOL) ** 2
    for j in range(n_sv - 1, -1, -1):
        total = 0.0
        for c in range(coef.shape[1]):
            total += coef[j, c] * coef[j, c]
        if total <= limit:
            return j
    return 0


@nb.njit(nogil=True, cache=True)
def remove_sv(sv_t, sv_sq, coef, n_sv, j):
    """Delete SV ``j`` by moving the last live SV into its slot; returns the new count.

    ``sv_t`` is a pool (:mod:`._sparse_pool`: the dense (d, capacity) matrix or the sparse tuple)."""
    last = n_sv - 1
    if j != last:
        pool_move(sv_t, last, j)
        sv_sq[j] = sv_sq[last]
        for c in range(coef.shape[1]):
            coef[j, c] = coef[last, c]
    for c in range(coef.shape[1]):
        coef[last, c] = 0.0
    return last


@nb.njit(nogil=True, cache=True)
def place_merged_point(sv_t, sv_sq, x_min, j, h):
    """Overwrite SV ``j`` (the partner) with z = h·x_min + (1 − h)·sv_j and cache ‖z‖²."""
    z_sq = 0.0
    for k in range(sv_t.shape[0]):
        zk = h * x_min[k] + (1.0 - h) * sv_t[k, j]
        sv_t[k, j] = zk
        z_sq += zk * zk
    sv_sq[j] = z_sq


@nb.njit(nogil=True, cache=True)
def _log_kappas(x_min, sq_min, sv_t, sv_sq, n_sv, gamma, work):
    """Fill ``work[:cap]`` with k(x_min, sv_j) and ``work[cap:]`` with log k(x_min, sv_j)
    = −γ‖x_min − sv_j‖² (:func:`solvers.kernels.rbf_row_and_log`, the same layout the
    training steps leave for ``known_row``); ``work`` is (2·capacity,); ``sv_t`` a pool.
    Returns ``(log_kappa, kappa)`` views."""
    cap = work.shape[0] // 2
    kappa = work[:cap]
    log_kappa = work[cap:]
    pool_row_log(sv_t, x_min, sq_min, sv_sq, n_sv, gamma, kappa, log_kappa)
    return log_kappa, kappa


@nb.njit(nogil=True, cache=True)
def _best_partner_lookup_wd(coef, n_sv, i_min, kappa, wd_table):
    """The lookup-WD partner search as one branch-light loop (the hot path of merging):
    WD = α_min²(1 − κ_j)²·N(m, κ_j), N by bilinear interpolation of the normalised table
    (:mod:`svmstream.solvers.budgeted._lookup`), for every same-sign SV."""
    a_min = coef[i_min, 0]
    last = wd_table.shape[0] - 1
    best_j = -1
    best_wd = np.inf
    for j in range(n_sv):
        a_j = coef[j, 0]
        same_sign = a_j * a_min > 0.0
        total = a_min + a_j if same_sign else 1.0  # keeps m finite; the candidate is skipped
        u = (a_min / total) * last
        v = kappa[j] * last
        iu = min(max(int(u), 0), last - 1)
        iv = min(max(int(v), 0), last - 1)
        fu = u - iu
        fv = v - iv
        w = (1.0 - fu) * ((1.0 - fv) * wd_table[iu, iv] + fv * wd_table[iu, iv + 1]) + fu * (
            (1.0 - fv) * wd_table[iu + 1, iv] + fv * wd_table[iu + 1, iv + 1]
        )
        one_minus = 1.0 - kappa[j]
        wd = a_min * a_min * one_minus * one_minus * w
        if wd < best_wd and same_sign and j != i_min:
            best_wd = wd
            best_j = j
    return best_j, -1.0, best_wd


@nb.njit(nogil=True, cache=True)
def _best_binary_partner(coef, n_sv, i_min, log_kappa, kappa, solver, eps, h_table, wd_table):
    """(partner slot or −1, h, WD in coefficient units²) of the best same-sign partner."""
    a_min = coef[i_min, 0]
    if solver == SOLVER_LOOKUP_WD:
        return _best_partner_lookup_wd(coef, n_sv, i_min, kappa, wd_table)
    best_j = -1
    best_wd = np.inf
    best_h = 0.0
    for j in range(n_sv):
        if j == i_min or coef[j, 0] * a_min <= 0.0:
            continue
        total = a_min + coef[j, 0]
        m = a_min / total
        h, wd_norm = candidate_h_wd(m, log_kappa[j], kappa[j], solver, eps, h_table, wd_table)
        wd = total * total * wd_norm
        if wd < best_wd:
            best_wd = wd
            best_j = j
            best_h = h
    return best_j, best_h, best_wd


@nb.njit(nogil=True, cache=True)
def merge_smallest(
    sv_t, sv_sq, coef, n_sv, gamma, solver, eps, h_table, wd_table, ref_solver, diag, x_min, work, known_row
):
    """One merging budget-maintenance step on a binary model (Glasmachers & Qaadan, Alg. 1).

    Takes the SV with the smallest |coef| as x_min (:func:`smallest_coefficient_slot`),
    evaluates every other SV with a coefficient of the same sign as partner, and merges
    the pair with the smallest weight degradation.  If no SV shares x_min's sign, x_min is
    removed instead (WD = α_min²).

    Parameters
    ----------
    sv_t : (d, capacity) float64, SVs as columns, or a sparse pool (:mod:`._sparse_pool`);
        modified in place
    sv_sq : (capacity,) float64, cached squared norms; modified in place
    coef : (capacity, 1) float64, coefficients (any common scale); modified in place
    n_sv : int, live SVs before the step
    gamma : float, RBF γ
    solver : int, one of the ``SOLVER_*`` codes; eps : GSS tolerance for ``SOLVER_GSS``
    h_table, wd_table : (G, G) float64 lookup tables (:mod:`svmstream.solvers.budgeted._lookup`; any 2×2 array
        when no lookup solver is used)
    ref_solver : int, −1, or a solver code to compare against side by side: its partner
        choice and WD are computed (not applied) and accumulated in ``diag``
    diag : (N_DIAG,) float64 accumulators (``D_*`` indices)
    x_min, work : (d,) and (2·capacity,) float64 work arrays (a sparse pool needs ``x_min``
        all zeros; it is left so)
    known_row : bool — ``work[:n_sv−1]`` holds k(sv_last, sv_j) and ``work[cap:cap+n_sv−1]``
        log k(sv_last, sv_j) for the SV in the last slot (the training steps leave the new
        SV's margin row there, :func:`solvers.kernels.rbf_row_and_log`).  If that SV is
        x_min, the O(B·d) kernel row is not recomputed; the result is bit-identical.

    Returns
    -------
    (n_sv_new, wd, merged) : new SV count, weight degradation actually incurred (coefficient
    units²), and 1 if a merge happened (0 for the removal fallback).
    """
    i_min = smallest_coefficient_slot(coef, n_sv)
    a_min = coef[i_min, 0]
    pool_load(sv_t, i_min, x_min)
    if known_row and i_min == n_sv - 1:
        cap = work.shape[0] // 2
        kappas = work[:cap]
        log_kappas = work[cap:]
        kappas[i_min] = 1.0
        log_kappas[i_min] = 0.0
    else:
        log_kappas, kappas = _log_kappas(x_min, sv_sq[i_min], sv_t, sv_sq, n_sv, gamma, work)
    best_j, h, _ = _best_binary_partner(coef, n_sv, i_min, log_kappas, kappas, solver, eps, h_table, wd_table)
    if best_j < 0:
        pool_unload(sv_t, i_min, x_min)
        return remove_sv(sv_t, sv_sq, coef, n_sv, i_min), a_min * a_min, 0

    total = a_min + coef[best_j, 0]
    m = a_min / total
    log_kappa = log_kappas[best_j]
    if h < 0.0:  # lookup-WD: h only for the chosen pair
        h = interpolate(h_table, m, kappas[best_j])
    g = merge_gain(h, m, log_kappa)
    wd = total * total * weight_degradation(m, kappas[best_j], g)
    if ref_solver >= 0:
        ref_j, _, ref_wd = _best_binary_partner(
            coef, n_sv, i_min, log_kappas, kappas, ref_solver, eps, h_table, wd_table
        )
        diag[D_EVENTS] += 1.0
        diag[D_SAME_PARTNER] += 1.0 if ref_j == best_j else 0.0
        diag[D_WD] += wd
        diag[D_WD_REF] += ref_wd
        if ref_wd > 0.0:
            diag[D_WD_RATIO] += wd / ref_wd
            diag[D_RATIO_EVENTS] += 1.0

    pool_place_merged(sv_t, sv_sq, x_min, i_min, best_j, h)
    pool_unload(sv_t, i_min, x_min)  # before remove_sv moves another SV into slot i_min
    coef[best_j, 0] = total * g
    return remove_sv(sv_t, sv_sq, coef, n_sv, i_min), wd, 1


# ---------------------------------------------------------------------------- multi-class
@nb.njit(nogil=True, cache=True)
def multiclass_merge_gain(h, a_p, a_q, log_kappa):
    """Σ_c α_z⁽ᶜ⁾(h)² with α_z⁽ᶜ⁾ = α_p⁽ᶜ⁾κ^((1−h)²) + α_q⁽ᶜ⁾κ^(h²) (z = h·x_p + (1−h)·x_q)."""
    kp = np.exp((1.0 - h) * (1.0 - h) * log_kappa)
    kq = np.exp(h * h * log_kappa)
    total = 0.0
    for c in range(a_p.shape[0]):
        a_z = a_p[c] * kp + a_q[c] * kq
        total += a_z * a_z
    return total


@nb.njit(nogil=True, cache=True)
def golden_section_multiclass(a_p, a_q, log_kappa, eps):
    """Maximise :func:`multiclass_merge_gain` over h ∈ [0, 1]; returns (h, gain)."""
    lo = 0.0
    hi = 1.0
    c = hi - INV_PHI * (hi - lo)
    d = lo + INV_PHI * (hi - lo)
    fc = multiclass_merge_gain(c, a_p, a_q, log_kappa)
    fd = multiclass_merge_gain(d, a_p, a_q, log_kappa)
    while hi - lo > eps:
        if fc > fd:
            hi = d
            d = c
            fd = fc
            c = hi - INV_PHI * (hi - lo)
            fc = multiclass_merge_gain(c, a_p, a_q, log_kappa)
        else:
            lo = c
            c = d
            fc = fd
            d = lo + INV_PHI * (hi - lo)
            fd = multiclass_merge_gain(d, a_p, a_q, log_kappa)
    h = 0.5 * (lo + hi)
    return h, multiclass_merge_gain(h, a_p, a_q, log_kappa)


@nb.njit(nogil=True, cache=True)
def merge_smallest_multiclass(sv_t, sv_sq, coef, n_sv, gamma, eps, x_min, work):
    """Merging for the multi-class (Crammer–Singer) model, Wang et al. (2012) §5–6.

    x_p is the SV with the smallest ‖α_p‖² = Σ_c α_p⁽ᶜ⁾²; every other SV is a candidate
    partner q.  For each, h maximises Σ_c α_z⁽ᶜ⁾(h)², which is exactly minimising the
    multi-class weight degradation

        WD = Σ_c ‖α_p⁽ᶜ⁾φ(x_p) + α_q⁽ᶜ⁾φ(x_q) − α_z⁽ᶜ⁾φ(z)‖²
           = Σ_c (α_p⁽ᶜ⁾² + α_q⁽ᶜ⁾² + 2α_p⁽ᶜ⁾α_q⁽ᶜ⁾κ) − Σ_c α_z⁽ᶜ⁾².

    (The paper's eq. 18 maximises Σ_c [m⁽ᶜ⁾κ^((1−h)²) + (1−m⁽ᶜ⁾)κ^(h²)] with per-class
    shares m⁽ᶜ⁾, which is undefined when α_p⁽ᶜ⁾ + α_q⁽ᶜ⁾ = 0 and is not the WD; for one
    class both agree.)  ``coef`` is (capacity, K); ``work`` is (2·capacity,) float64;
    returns ``(n_sv_new, wd)``.
    """
    p = smallest_coefficient_slot(coef, n_sv)
    n_classes = coef.shape[1]
    pool_load(sv_t, p, x_min)
    log_kappas, kappas = _log_kappas(x_min, sv_sq[p], sv_t, sv_sq, n_sv, gamma, work)
    a_p = coef[p]
    best_q = -1
    best_wd = np.inf
    best_h = 0.0
    for q in range(n_sv):
        if q == p:
            continue
        a_q = coef[q]
        kappa = kappas[q]
        norm2 = 0.0
        for c in range(n_classes):
            norm2 += a_p[c] * a_p[c] + a_q[c] * a_q[c] + 2.0 * a_p[c] * a_q[c] * kappa
        h, gain = golden_section_multiclass(a_p, a_q, log_kappas[q], eps)
        wd = norm2 - gain
        if wd < best_wd:
            best_wd = wd if wd > 0.0 else 0.0
            best_q = q
            best_h = h
    h = best_h
    log_kappa = log_kappas[best_q]
    kp = np.exp((1.0 - h) * (1.0 - h) * log_kappa)
    kq = np.exp(h * h * log_kappa)
    for c in range(n_classes):
        coef[best_q, c] = coef[p, c] * kp + coef[best_q, c] * kq
    pool_place_merged(sv_t, sv_sq, x_min, p, best_q, h)
    pool_unload(sv_t, p, x_min)
    return remove_sv(sv_t, sv_sq, coef, n_sv, p), best_wd
