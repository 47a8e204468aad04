"""Projection and removal budget maintenance with an incrementally maintained K⁻¹.

Source: Wang, Crammer & Vucetic (2012), "Breaking the curse of kernelization: budgeted
stochastic gradient descent for large-scale SVM training", JMLR 13, §6.1 (removal), §6.2
and eq. (14) (projection), §5 (multi-class: one K⁻¹ shared by all classes).  The O(B²)
update of K⁻¹ is the block-matrix (Schur complement / Sherman–Morrison–Woodbury) identity
the paper suggests; see ``docs/projection.md``.

Projection.  Let SV ``p`` be the one with the smallest ``‖α_p‖²·k(x_p, x_p)`` (summed over
classes).  It is removed and its contribution ``α_p·φ(x_p)`` is replaced by its projection
onto the span of the remaining SVs: ``α_j ← α_j + Δα_j`` with (eq. 14, per class)

    Δα = α_p · K_p⁻¹ k_p,

``K_p`` the kernel matrix of the remaining SVs and ``k_p`` their kernel column against
``x_p``.  The weight degradation is ``‖α_p φ(x_p) − Σ_j Δα_j φ(x_j)‖²`` (summed over classes).

Maintained inverse.  ``k_inv[:n, :n]`` holds ``M = (K + ε·diag(k(x_j, x_j)))⁻¹`` for the ``n``
live SVs (slot order), with ``ε = jitter`` (relative; for the RBF kernel k(x, x) = 1 so
it is the absolute ridge ε·I).  With ``M`` the full inverse, the projection needs no
inversion at all: from ``K_ε M = I`` (column p),

    K_ε,p⁻¹ k_p = −M[−p, p] / M[p, p]                                  (O(n))

and the inverse of the remaining SVs is the Schur-complement downdate

    K_ε,p⁻¹ = M[−p, −p] − M[−p, p] M[p, −p] / M[p, p]                  (O(n²)).

Appending an SV with kernel column ``k`` and ``c = k_self·(1 + ε)``: ``u = M k``,
``s = c − kᵀu`` (the Schur complement, floored at ``max(ε, 1e-12)·k_self / 2``), and

    M ← [[M + u uᵀ/s, −u/s], [−uᵀ/s, 1/s]]                             (O(n²)).

With ε > 0 the projection is the ridge solution: Δα minimises
``WD(Δα) + ε·Σ_j k(x_j, x_j)·Δα_j²``; the reported WD is the (un-regularised) RKHS
distance of that update, ``‖α_p‖²·(k_pp − k_pᵀu − ε‖u‖²)``.

Rounding drift.  On a nearly singular K (duplicate or tightly clustered SVs) the
incremental updates drift away from the true inverse, and with ε = 1e-8 they were measured
to reach NaN within a few thousand steps.  :func:`project_smallest` therefore checks every
step that the Schur complement of ``p`` computed from ``M`` (``1/M[p, p]``) and from the
fresh kernel column (``k_pp(1 + ε) − k_pᵀu``) agree to ``CONSISTENCY_ATOL`` and otherwise
rebuilds ``k_inv`` from scratch (:func:`kinv_rebuild`, O(n³)); the default ε = 1e-6 makes
rebuilds rare (``docs/projection.md`` has the measurements).

Slot convention (:func:`svmstream.solvers.budgeted._merging.remove_sv`, used here): a new SV goes to slot
``n``; deleting slot ``p`` moves the last live SV (slot ``n − 1``) into slot ``p``.  The
functions here apply that same move to ``k_inv`` as to ``sv_t``, ``sv_sq`` and ``coef``.

All functions are numba ``njit(nogil=True, cache=True)``, allocate nothing (except the
rare :func:`kinv_rebuild`), and take 2-D
coefficients ``coef`` of shape (capacity, K); a binary model passes
``coef.reshape(-1, 1)`` (a view, so updates land in the 1-D array).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..kernels import squared_norm
from ._merging import remove_sv, smallest_coefficient_slot
from ._sparse_pool import pool_load, pool_row, pool_unload

#: Default relative jitter ε added to the diagonal of K (see module docstring and
#: ``docs/projection.md``: 1e-8 lets cond(K + εI) reach ~1e10 on data with duplicate or
#: tightly clustered SVs, e.g. a9a, where the incremental inverse needs frequent rebuilds;
#: 1e-6 bounds it near B·1e6 at a negligible change of the projection).
DEFAULT_JITTER = 1e-6
#: Lower bound of the relative floor of the Schur complement when ``jitter`` is 0.
MIN_SCHUR = 1e-12
#: Disagreement (absolute, in units of k(x, x) = 1) of the two evaluations of the Schur
#: complement of the projected SV above which :func:`project_smallest` rebuilds ``k_inv``
#: (see its Notes).  The reported WD / ‖α_p‖² is one of the two values minus ε(1 + ‖u‖²).
CONSISTENCY_ATOL = 1e-6


@nb.njit(nogil=True, cache=True)
def kinv_append(k_inv, n, k_vec, k_self, jitter, work):
    """Extend the maintained inverse by the SV at slot ``n`` (block inverse, O(n²)).

    Parameters
    ----------
    k_inv : (capacity, capacity) float64, C-contiguous; ``k_inv[:n, :n]`` holds
        ``(K + ε·diag(k_jj))⁻¹`` of the ``n`` existing SVs; on return ``k_inv[:n+1, :n+1]``
        holds that of the ``n + 1`` SVs. Entries outside are neither read nor cleared.
    n : int, number of existing SVs (the new SV is at slot ``n``)
    k_vec : (>= n,) float64, ``k(x_new, x_j)`` for ``j < n`` (e.g. the kernel row already
        computed for the margin)
    k_self : float, ``k(x_new, x_new)`` (1.0 for the RBF kernel)
    jitter : float >= 0, relative ridge ε (:data:`DEFAULT_JITTER`)
    work : (>= n,) float64 scratch

    Returns
    -------
    s : float, the Schur complement ``k_self·(1 + ε) − kᵀ M k`` actually used (after the
        floor ``max(ε, MIN_SCHUR)·k_self/2``).  In exact arithmetic ``s >= ε·k_self``, so
        a value at the floor means ``M`` has drifted (or ε = 0 and the new SV lies in the
        span of the others); :func:`project_smallest` detects and repairs a drifted ``M``.

    Raises
    ------
    ValueError
        If ``k_inv`` has fewer than ``n + 1`` rows or columns.

    Notes
    -----
    Block inverse of ``[[K, k], [kᵀ, c]]`` via the Schur complement ``s = c − kᵀK⁻¹k``
    (Sherman–Morrison–Woodbury; Wang, Crammer & Vucetic 2012, §6.2).  In exact arithmetic
    ``s >= ε·k_self`` because the ridge ε raises every eigenvalue by ε; the floor at half of
    that only catches rounding.
    """
    if k_inv.shape[0] < n + 1 or k_inv.shape[1] < n + 1:
        raise ValueError("k_inv is smaller than (n + 1) x (n + 1)")
    # u = M k, accumulated as Σ_j k_j·M[j, :] (M is kept exactly symmetric): contiguous
    # axpys that vectorise, unlike row dot products (an ordered reduction)
    u = work
    for i in range(n):
        u[i] = 0.0
    for j in range(n):
        kj = k_vec[j]
        row = k_inv[j]
        for i in range(n):
            u[i] += kj * row[i]
    s = k_self * (1.0 + jitter)
    for i in range(n):
        s -= k_vec[i] * u[i]
    floor = 0.5 * max(jitter, MIN_SCHUR) * k_self
    if s < floor:
        s = floor
    # v = u / sqrt(s): the update M += v vᵀ is then exactly symmetric in floating point.
    r = 1.0 / math.sqrt(s)
    for i in range(n):
        u[i] *= r
    for i in range(n):
        row = k_inv[i]
        vi = u[i]
        for j in range(n):
            row[j] += vi * u[j]
        row[n] = -vi * r
    for j in range(n):
        k_inv[n, j] = k_inv[j, n]
    k_inv[n, n] = 1.0 / s
    return s


@nb.njit(nogil=True, cache=True)
def kinv_remove(k_inv, n, p, work):
    """Delete slot ``p`` from the maintained inverse, then move slot ``n − 1`` into ``p``.

    Parameters
    ----------
    k_inv : (capacity, capacity) float64, C-contiguous; ``k_inv[:n, :n]`` holds the inverse
        of the ``n`` live SVs; on return ``k_inv[:n-1, :n-1]`` holds that of the remaining
        ``n − 1`` SVs in their new slot order (row/column ``n − 1`` is zeroed).
    n : int >= 1, number of live SVs
    p : int, slot to delete, ``0 <= p < n``
    work : (>= n,) float64 scratch

    Raises
    ------
    ValueError
        If ``p`` is not a live slot.

    Notes
    -----
    Schur-complement downdate ``M[−p, −p] − M[−p, p] M[p, −p] / M[p, p]`` (the inverse of a
    principal submatrix from the inverse of the whole), O(n²); then the same slot move as
    :func:`svmstream.solvers.budgeted._merging.remove_sv`.  A numerically broken inverse with ``M[p, p] <= 0``
    turns the remaining block into NaN (no exception); the consistency check of
    :func:`project_smallest` then rebuilds it.
    """
    if p < 0 or p >= n:
        raise ValueError("slot p is not live")
    mpp = k_inv[p, p]
    r = 1.0 / math.sqrt(mpp)
    v = work
    for i in range(n):
        v[i] = k_inv[i, p] * r
    v[p] = 0.0  # row/column p are dropped; leaving them untouched costs nothing
    for i in range(n):
        if i == p:
            continue
        row = k_inv[i]
        vi = v[i]
        for j in range(n):
            row[j] -= vi * v[j]
    last = n - 1
    if p != last:
        for j in range(n):
            k_inv[p, j] = k_inv[last, j]
        for i in range(n):
            k_inv[i, p] = k_inv[i, last]
        k_inv[p, p] = k_inv[last, last]
    for j in range(n):
        k_inv[last, j] = 0.0
        k_inv[j, last] = 0.0


@nb.njit(nogil=True, cache=True)
def kinv_rebuild(k_inv, sv_t, sv_sq, n_sv, gamma, jitter, x_buf, k_buf):
    """Recompute ``k_inv`` for the live SVs from scratch (LAPACK inverse, O(n²d + n³)).

    For a restored model, a change of maintenance strategy, or a periodic reset of the
    rounding drift of the incremental updates (see ``docs/projection.md``).  Unlike the
    hot-path functions it allocates (one n x n array inside ``np.linalg.inv``).

    Parameters
    ----------
    k_inv : (capacity, capacity) float64, C-contiguous; ``k_inv[:n_sv, :n_sv]`` is
        overwritten with ``(K + ε·I)⁻¹`` of the live SVs (RBF, k(x, x) = 1)
    sv_t : (d, capacity) float64, SVs as columns, or a sparse pool (:mod:`._sparse_pool`);
        sv_sq : (capacity,) their ‖·‖²
    n_sv : int, live SVs
    gamma : float, RBF γ
    jitter : float >= 0, relative ridge ε
    x_buf : (d,) float64 scratch (all zeros for a sparse pool; left so); k_buf : (>= n_sv,) float64 scratch

    Raises
    ------
    ValueError
        If ``k_inv`` is smaller than ``n_sv x n_sv``.
    numpy.linalg.LinAlgError
        If ``K + εI`` is exactly singular (only possible with ``jitter = 0``).
    """
    if k_inv.shape[0] < n_sv or k_inv.shape[1] < n_sv:
        raise ValueError("k_inv is smaller than n_sv x n_sv")
    if n_sv == 0:
        return
    for j in range(n_sv):
        pool_load(sv_t, j, x_buf)
        pool_row(sv_t, x_buf, sv_sq[j], sv_sq, n_sv, gamma, k_buf)
        pool_unload(sv_t, j, x_buf)
        for i in range(n_sv):
            k_inv[j, i] = k_buf[i]
        k_inv[j, j] = 1.0 + jitter
    inv = np.linalg.inv(k_inv[:n_sv, :n_sv])
    for i in range(n_sv):
        for j in range(i, n_sv):  # symmetrise
            v = 0.5 * (inv[i, j] + inv[j, i])
            k_inv[i, j] = v
            k_inv[j, i] = v


@nb.njit(nogil=True, cache=True)
def smallest_slot(coef, n_sv):
    """Slot ``p`` minimising ``Σ_i coef[p, i]²`` and that value.

    ``Σ_i coef[p, i]²`` is ``‖α_p‖²·k(x_p, x_p)`` for the RBF kernel (raw units).  The slot
    is :func:`svmstream.solvers.budgeted._merging.smallest_coefficient_slot` (including its tie rule), so
    removal, projection and merging all pick the same SV.

    Parameters
    ----------
    coef : (capacity, K) float64
    n_sv : int >= 1

    Returns
    -------
    (p, norm2) : int slot and float ``Σ_i coef[p, i]²``.
    """
    p = smallest_coefficient_slot(coef, n_sv)
    a2 = 0.0
    for c in range(coef.shape[1]):
        a2 += coef[p, c] * coef[p, c]
    return p, a2


@nb.njit(nogil=True, cache=True)
def _projection_vector(k_inv, n_sv, p, k_p, u):
    """``u = K_ε,p⁻¹ k_p = −M[:, p]/M[p, p]`` (u[p] = 0); returns ``(1/M[p, p], k_pᵀu, ‖u‖²)``."""
    mpp = k_inv[p, p]
    for j in range(n_sv):
        u[j] = -k_inv[j, p] / mpp
    u[p] = 0.0
    ktu = 0.0
    uu = 0.0
    for j in range(n_sv):
        ktu += k_p[j] * u[j]
        uu += u[j] * u[j]
    return 1.0 / mpp, ktu, uu


# size: one numba kernel, one projection step of eq. 14 with the update of the kept K⁻¹
@nb.njit(nogil=True, cache=True)
def project_smallest(sv_t, sv_sq, coef, n_sv, gamma, k_inv, jitter, x_buf, k_buf, u_buf):
    """One projection budget-maintenance step (Wang, Crammer & Vucetic 2012, §6.2, eq. 14).

    Picks ``p`` = :func:`smallest_slot`, sets ``u = K_ε,p⁻¹ k_p = −M[−p, p]/M[p, p]`` from the
    maintained inverse ``M`` (no inversion), adds ``Δα_j = α_p·u_j`` (every class, one
    ``u``) to the remaining coefficients, and deletes slot ``p`` from ``sv_t``, ``sv_sq``,
    ``coef`` and ``k_inv`` (last live SV moves into ``p``).

    Parameters
    ----------
    sv_t : (d, capacity) float64, SVs as columns, or a sparse pool (:mod:`._sparse_pool`);
        modified in place
    sv_sq : (capacity,) float64, cached ‖sv_j‖²; modified in place
    coef : (capacity, K) float64, raw coefficients (any common scale: the projection is
        scale-invariant); modified in place; binary models pass ``coef.reshape(-1, 1)``
    n_sv : int >= 1, live SVs before the step
    gamma : float, RBF γ
    k_inv : (capacity, capacity) float64, maintained inverse of the ``n_sv`` live SVs
        (built with :func:`kinv_append` / :func:`kinv_rebuild` using the same ``jitter``);
        updated to the ``n_sv − 1`` remaining SVs
    jitter : float >= 0, the relative ridge ε ``k_inv`` was built with
    x_buf : (d,) float64 scratch; k_buf, u_buf : (>= n_sv,) float64 scratch

    Returns
    -------
    (n_sv_new, wd, rebuilt) : ``n_sv − 1``; the weight degradation
        ``Σ_i ‖coef[p, i]·φ(x_p) − Σ_j Δα_ji·φ(x_j)‖²`` in raw coefficient units² (multiply
        by ``scale²`` for the effective model), computed as
        ``‖α_p‖²·(k_pp − k_pᵀu − ε‖u‖²)`` (exact for ``u`` solving ``(K_p + εI)u = k_p``),
        clipped at 0; and 1 if ``k_inv`` failed the consistency check and was rebuilt
        (:func:`kinv_rebuild`), else 0.

    Raises
    ------
    ValueError
        If ``n_sv < 1``.

    Notes
    -----
    Consistency check (guards against the rounding drift of the incremental updates on an
    ill-conditioned K): the Schur complement of ``p`` is available twice, as ``1/M[p, p]``
    and as ``k_pp(1 + ε) − k_pᵀu`` with the freshly computed kernel column ``k_p``.  If they
    differ by more than ``CONSISTENCY_ATOL`` (so the reported WD / ‖α_p‖² could be off by
    as much), ``M[p, p] <= 0``, or a value is not finite, ``k_inv`` is rebuilt from scratch
    (O(n³), LAPACK) before the step; the rebuilt inverse is used even if it fails the test
    again (K + εI beyond what double precision can invert).

    Cost: O(n·d + n) for ``k_p``, O(n·K) for the coefficient update, O(n²) for the
    downdate of ``k_inv`` (:func:`kinv_remove`).  With a single SV there is nothing to
    project onto: it is removed and ``wd = ‖α_p‖²``.
    """
    if n_sv < 1:
        raise ValueError("project_smallest needs at least one SV")
    p, a2 = smallest_slot(coef, n_sv)
    n_cls = coef.shape[1]
    if n_sv == 1:
        kinv_remove(k_inv, n_sv, p, u_buf)
        return remove_sv(sv_t, sv_sq, coef, n_sv, p), a2, 0
    pool_load(sv_t, p, x_buf)
    pool_row(sv_t, x_buf, sv_sq[p], sv_sq, n_sv, gamma, k_buf)
    pool_unload(sv_t, p, x_buf)
    k_buf[p] = 0.0  # k_p runs over the other SVs only
    u = u_buf
    s_m, ktu, uu = _projection_vector(k_inv, n_sv, p, k_buf, u)
    s_k = 1.0 + jitter - ktu
    rebuilt = 0
    if not (s_m > 0.0 and abs(s_k - s_m) <= CONSISTENCY_ATOL):  # also catches NaN
        kinv_rebuild(k_inv, sv_t, sv_sq, n_sv, gamma, jitter, x_buf, k_buf)
        pool_load(sv_t, p, x_buf)
        pool_row(sv_t, x_buf, sv_sq[p], sv_sq, n_sv, gamma, k_buf)
        pool_unload(sv_t, p, x_buf)
        k_buf[p] = 0.0
        s_m, ktu, uu = _projection_vector(k_inv, n_sv, p, k_buf, u)
        rebuilt = 1
    for j in range(n_sv):
        uj = u[j]
        if uj != 0.0:
            for c in range(n_cls):
                coef[j, c] += coef[p, c] * uj
    wd = a2 * (1.0 - ktu - jitter * uu)
    if wd < 0.0:
        wd = 0.0
    kinv_remove(k_inv, n_sv, p, u_buf)
    return remove_sv(sv_t, sv_sq, coef, n_sv, p), wd, rebuilt


@nb.njit(nogil=True, cache=True)
def remove_smallest(sv_t, sv_sq, coef, n_sv, k_inv, update_kinv, work):
    """One removal budget-maintenance step (Wang, Crammer & Vucetic 2012, §6.1).

    Deletes the SV ``p`` with the smallest ``‖α_p‖²·k(x_p, x_p)`` (:func:`smallest_slot`;
    k(x, x) = 1 for RBF) by moving the last live SV into its slot.

    Parameters
    ----------
    sv_t : (d, capacity); sv_sq : (capacity,); coef : (capacity, K) float64 — modified in place
    n_sv : int >= 1, live SVs before the step
    k_inv : (capacity, capacity) float64; downdated like :func:`kinv_remove` when
        ``update_kinv`` is true, untouched otherwise (pass any 2-D float64 array then)
    update_kinv : bool, whether a maintained inverse must follow the deletion
    work : (>= n_sv,) float64 scratch (used only when ``update_kinv``)

    Returns
    -------
    (n_sv_new, wd) : ``n_sv − 1`` and the weight degradation ``Σ_i coef[p, i]²`` (raw units²).

    Raises
    ------
    ValueError
        If ``n_sv < 1``.
    """
    if n_sv < 1:
        raise ValueError("remove_smallest needs at least one SV")
    p, a2 = smallest_slot(coef, n_sv)
    if update_kinv:
        kinv_remove(k_inv, n_sv, p, work)
    return remove_sv(sv_t, sv_sq, coef, n_sv, p), a2


@nb.njit(nogil=True, cache=True)
def append_sv(sv_t, sv_sq, coef, n_sv, x, coef_new, k_vec, k_inv, jitter, work):
    """Store ``x`` as SV at slot ``n_sv`` and extend ``k_inv``; returns ``(n_sv + 1, s)``.

    Convenience for the caller's insertion step: ``k_vec`` is the RBF kernel row of ``x``
    against the live SVs (the margin computation already has it).

    Parameters
    ----------
    sv_t : (d, capacity); sv_sq : (capacity,); coef : (capacity, K) float64 — modified
    n_sv : int, live SVs (must be < capacity)
    x : (d,) float64, the new SV; coef_new : (K,) float64, its raw coefficients
    k_vec : (>= n_sv,) float64, ``k(x, sv_j)``
    k_inv : (capacity, capacity) float64, maintained inverse; jitter : float
    work : (>= n_sv,) float64 scratch

    Returns
    -------
    (n_sv + 1, s) : new count and the Schur complement from :func:`kinv_append`.

    Raises
    ------
    ValueError
        If the state has no free slot or ``coef_new`` has the wrong length.
    """
    if n_sv >= sv_t.shape[1]:
        raise ValueError("no free SV slot")
    if coef_new.shape[0] != coef.shape[1]:
        raise ValueError("coef_new needs one coefficient per class")
    for k in range(sv_t.shape[0]):
        sv_t[k, n_sv] = x[k]
    sv_sq[n_sv] = squared_norm(x)
    for c in range(coef.shape[1]):
        coef[n_sv, c] = coef_new[c]
    s = kinv_append(k_inv, n_sv, k_vec, 1.0, jitter, work)
    return n_sv + 1, s
