"""Budget maintenance dispatch: add an SV and bring the model back to B SVs by merging,
removal or projection (Wang, Crammer & Vucetic 2012, §6; merging as in Glasmachers &
Qaadan 2018, Algorithm 1).  The merge itself is :mod:`._merging`, projection and removal
:mod:`._projection`.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numba as nb
import numpy as np

from ._gss import GSS_PRECISE_EPS
from ._merging import SOLVER_GSS, merge_smallest, merge_smallest_multiclass
from ._projection import DEFAULT_JITTER, kinv_append, kinv_rebuild, project_smallest, remove_smallest
from ._sparse_pool import pool_append
from ._state import (
    C_MAINTENANCE,
    C_MERGES,
    KINV_REBUILD_EVERY_B,
    MAINT_PROJECT,
    MAINT_REMOVE,
    R_MERGE_SECONDS,
    R_WD_SUM,
)

# _clock() enters object mode only for the clock read (profiling); numba warns about it once.
warnings.filterwarnings("ignore", message="Code running in object mode won't allow parallel")


class Maintenance(NamedTuple):
    """How budget maintenance runs: the settings the BSGD and BSCA steps hand down to
    :func:`maintain_budget` (a namedtuple, so numba takes it as one argument).  Built once per
    batch by :meth:`._base.BudgetedKernelModel._maintenance_config`."""

    #: ``MAINT_*`` code (:mod:`._state`): merge, remove or project
    code: int
    #: merge solver, a ``SOLVER_*`` code (:mod:`._merging`)
    merge_solver: int
    #: GSS tolerance of GSS-standard
    gss_eps: float
    #: (G, G) float64 merge lookup tables (:mod:`._lookup`), 2×2 dummies when no lookup solver is used
    h_table: np.ndarray
    wd_table: np.ndarray
    #: −1, or a solver code whose merge decision is computed side by side (not applied)
    ref_solver: int
    #: (N_DIAG,) float64 accumulators of that comparison (``D_*``); updated in place
    diag: np.ndarray


class Scratch(NamedTuple):
    """The work arrays of a model's steps and its budget maintenance, preallocated by the
    estimator (:meth:`._base.BudgetedKernelModel._scratch`) and handed down as one argument."""

    #: (d,) float64 — a dense copy of one SV; with a sparse pool all zeros between uses (the
    #: pool scatters an SV into it and clears it again)
    x_buf: np.ndarray
    #: (2·capacity,) float64 — the kernel row of the current example: k(x, sv_j) in the first
    #: half, log k(x, sv_j) in the second; maintenance uses both halves as work space
    row_buf: np.ndarray


@nb.njit(nogil=True, cache=True)
def _clock():
    with nb.objmode(now="f8"):
        now = _perf_counter()
    return now


def _perf_counter():
    import time

    return time.perf_counter()


@nb.njit(nogil=True, cache=True)
def _maintain(sv_t, sv_sq, coef, n_sv, gamma, maintenance, k_inv, scratch):
    """Bring the model back to B SVs; returns (n_sv, wd in raw units², merged flag).

    ``maintenance`` is a :class:`Maintenance`, ``scratch`` a :class:`Scratch` whose ``row_buf``
    holds the newest SV's kernel row (see :func:`maintain_budget`); ``k_inv`` is the maintained
    inverse kernel matrix (projection only)."""
    x_buf, row_buf = scratch
    cap = row_buf.shape[0] // 2
    if maintenance.code == MAINT_REMOVE:
        n_new, wd = remove_smallest(sv_t, sv_sq, coef, n_sv, k_inv, False, row_buf)
        return n_new, wd, 0
    if maintenance.code == MAINT_PROJECT:
        n_new, wd, _ = project_smallest(
            sv_t, sv_sq, coef, n_sv, gamma, k_inv, DEFAULT_JITTER, x_buf, row_buf[:cap], row_buf[cap:]
        )
        return n_new, wd, 0
    if coef.shape[1] == 1:
        return merge_smallest(
            sv_t, sv_sq, coef, n_sv, gamma, maintenance.merge_solver, maintenance.gss_eps,
            maintenance.h_table, maintenance.wd_table, maintenance.ref_solver, maintenance.diag,
            x_buf, row_buf, True,  # known_row: the new SV's row is in row_buf
        )  # fmt: skip
    # Multi-class WD has no lookup table: every solver but GSS-standard runs GSS-precise.
    multiclass_eps = maintenance.gss_eps if maintenance.merge_solver == SOLVER_GSS else GSS_PRECISE_EPS
    n_new, wd = merge_smallest_multiclass(sv_t, sv_sq, coef, n_sv, gamma, multiclass_eps, x_buf, row_buf)
    return n_new, wd, 1


@nb.njit(nogil=True, cache=True)
def add_support_vector(
    X, i, x, x_sq, weights, sv_t, sv_sq, coef, n_sv, maintenance, k_inv, row_buf, profile, reals
):
    """Add ``weights`` (K,) · φ(x) to the model, x = input row ``i`` of ``X`` (dense (d,) in
    ``x``, as :func:`._sparse_pool.row_open` gave it); returns the new SV count.  ``sv_t`` is a
    pool (:mod:`._sparse_pool`); ``maintenance`` is a :class:`Maintenance`.

    ``row_buf[:n_sv]`` must hold k(x, sv_j) from the margin computation.  If the model
    already holds x itself (k(x, sv_j) = 1 exactly: the distance of identical vectors is
    computed as exactly 0), the weights are added to that SV — the same function, with no
    approximation and no budget maintenance (BSCA revisits training points, BSGD sees
    them again in later epochs).  Otherwise x is appended at slot ``n_sv``; with projection
    the maintained K⁻¹ is extended in O(n²) using the kernel row; that update is part of
    projection's maintenance cost and is timed as such when ``profile`` is set."""
    for j in range(n_sv):
        if row_buf[j] == 1.0:
            for c in range(coef.shape[1]):
                coef[j, c] += weights[c]
            return n_sv
    if maintenance.code == MAINT_PROJECT:
        started = _clock() if profile else 0.0
        cap = row_buf.shape[0] // 2
        kinv_append(k_inv, n_sv, row_buf[:cap], 1.0, DEFAULT_JITTER, row_buf[cap:])
        if profile:
            reals[R_MERGE_SECONDS] += _clock() - started
    pool_append(sv_t, n_sv, X, i, x)
    sv_sq[n_sv] = x_sq
    for c in range(coef.shape[1]):
        coef[n_sv, c] = weights[c]
    return n_sv + 1


@nb.njit(nogil=True, cache=True)
def maintain_budget(
    sv_t, sv_sq, coef, n_sv, gamma, maintenance, k_inv, counters, reals, scale, profile, scratch
):
    """Budget maintenance with its bookkeeping (counters, Σ WD, timing, periodic K⁻¹ rebuild);
    returns the new SV count.  Shared by the BSGD and BSCA steps; ``maintenance`` is a
    :class:`Maintenance`, ``scratch`` a :class:`Scratch`.

    Called right after :func:`add_support_vector` appended the SV in slot ``n_sv − 1``, with
    the kernel row of that SV still in ``scratch.row_buf`` (k in the first half, log k in the
    second, from the margin computation): merging reuses it (``known_row`` of
    :func:`svmstream.solvers.budgeted._merging.merge_smallest`)."""
    started = _clock() if profile else 0.0
    n_sv, wd, merged = _maintain(sv_t, sv_sq, coef, n_sv, gamma, maintenance, k_inv, scratch)
    counters[C_MAINTENANCE] += 1
    counters[C_MERGES] += merged
    reals[R_WD_SUM] += wd * scale * scale
    if maintenance.code == MAINT_PROJECT and counters[C_MAINTENANCE] % (KINV_REBUILD_EVERY_B * n_sv) == 0:
        cap = scratch.row_buf.shape[0] // 2
        kinv_rebuild(k_inv, sv_t, sv_sq, n_sv, gamma, DEFAULT_JITTER, scratch.x_buf, scratch.row_buf[:cap])
    if profile:
        reals[R_MERGE_SECONDS] += _clock() - started
    return n_sv
