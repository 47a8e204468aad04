"""Exact dual coordinate descent for the kernel SVM without bias term.

Solves the dual problem of Hsieh, Si & Dhillon (ICML 2014), eq. (1)::

    max_a  D(a) = 1'a - 1/2 a'Qa      s.t.  0 <= a_i <= C_i,     Q_ij = y_i y_j k(x_i, x_j)

equivalently ``min_a f(a) = -D(a)`` with gradient ``G = Qa - 1``.  The solver keeps the full
gradient and at every step updates the single coordinate with the largest projected-gradient
violation (greedy selection, the "conquer" step of DC-SVM; LIBSVM's first-order working-set
rule reduced to one variable because there is no equality constraint):

    PG_i = min(G_i, 0) if a_i = 0;  max(G_i, 0) if a_i = C_i;  G_i otherwise
    i    = argmax |PG_i|,   a_i <- clip(a_i - G_i / Q_ii, 0, C_i),   G <- G + delta * Q[:, i]

It stops when ``max_i |PG_i| < eps`` (LIBSVM's default eps = 1e-3).

Speed features (all inside ``@numba.njit(nogil=True, cache=True)`` functions):

* **Shrinking** (Joachims 1999; Fan, Chen & Lin 2005 §3 as in LIBSVM/LIBLINEAR): a variable at
  a bound whose gradient points outwards by more than the current maximal violation ``M``
  (``a_i = 0, G_i > M`` or ``a_i = C_i, G_i < -M``) is moved out of the active prefix of the
  working arrays.  As in LIBSVM the whole set is re-activated (gradient reconstructed) once
  when the violation first falls below ``10 eps`` and again at convergence.
* **LRU cache of kernel columns** in a float32 buffer whose size is given in MB.  Columns hold
  only the active positions; when the active set halves the buffer is re-sliced into
  more, shorter columns.
* **Warm start** from any ``a`` (the gradient is then computed by blocked kernel products).
* **Exact final check**: before declaring convergence the gradient is recomputed in float64
  from scratch (no float32 drift) and the violation is re-checked on *all* variables.

The driver :func:`solve_dual` runs the numba loop in slices of bounded time so that a job
runner gets ``progress(dict)`` reports and can cancel through ``should_stop()`` (raising
:class:`Cancelled`) within a fraction of a second.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numba
import numpy as np

from ..exceptions import Cancelled
from ._kernels import KernelData, KernelSpec, kernel_column_into, kernel_matvec, with_single_thread_blas

__all__ = ["Cancelled", "KernelDualResult", "solve_dual", "dual_objective"]

# integer state slots (ist)
_L, _SLOT_LEN, _N_SLOTS, _HEAD, _TAIL, _N_FREE, _ITERS, _SHRINK_CNT, _MISS, _HIT, _CAP, _SHRINK_EVERY, _N = (
    range(13)
)
_PAIRS, _KEVALS, _SCANNED = (
    13,
    14,
    15,
)  # counters: two-variable steps, kernel values computed, gradient entries scanned

# status codes of _cd_run
CONVERGED, BUDGET, STALLED = 0, 1, 2


# --------------------------------------------------------------------------- LRU cache
@numba.njit(nogil=True, cache=True)
def _lru_unlink(s, ist, lru_prev, lru_next):
    p = lru_prev[s]
    nx = lru_next[s]
    if p >= 0:
        lru_next[p] = nx
    else:
        ist[_HEAD] = nx
    if nx >= 0:
        lru_prev[nx] = p
    else:
        ist[_TAIL] = p
    lru_prev[s] = -1
    lru_next[s] = -1


@numba.njit(nogil=True, cache=True)
def _lru_push_front(s, ist, lru_prev, lru_next):
    h = ist[_HEAD]
    lru_prev[s] = -1
    lru_next[s] = h
    if h >= 0:
        lru_prev[h] = s
    else:
        ist[_TAIL] = s
    ist[_HEAD] = s


@numba.njit(nogil=True, cache=True)
def _cache_reset(ist, slot_len, key_slot, slot_key, slot_valid, lru_prev, lru_next, free_stack):
    """Empty the cache and lay the buffer out in columns of ``slot_len`` floats."""
    n = ist[_N]
    for s in range(slot_key.shape[0]):
        k = slot_key[s]
        if k >= 0:
            key_slot[k] = -1
        slot_key[s] = -1
        slot_valid[s] = 0
        lru_prev[s] = -1
        lru_next[s] = -1
    slot_len = max(slot_len, 1)
    n_slots = min(ist[_CAP] // slot_len, n)
    ist[_SLOT_LEN] = slot_len
    ist[_N_SLOTS] = n_slots
    ist[_HEAD] = -1
    ist[_TAIL] = -1
    for s in range(n_slots):
        free_stack[s] = n_slots - 1 - s
    ist[_N_FREE] = n_slots


@numba.njit(nogil=True, cache=True)
def _get_column(i, ist, perm, problem, cache, work):
    """Return the slot holding Q[perm[0:L], perm[i]] (float32, position order).

    ``problem`` and ``cache`` are the tuples :func:`solve_dual` builds (see there).
    """
    y, Xw, sqw, data, indices, indptr, scatter, kid, gamma, coef0, degree, offset = problem
    buf, key_slot, slot_key, slot_valid, lru_prev, lru_next, free_stack = cache
    L = ist[_L]
    sl = ist[_SLOT_LEN]
    key = perm[i]
    s = key_slot[key]
    if s >= 0:
        ist[_HIT] += 1
        v = slot_valid[s]
        _lru_unlink(s, ist, lru_prev, lru_next)
        _lru_push_front(s, ist, lru_prev, lru_next)
        if v >= L:
            return s
        start = v
    else:
        ist[_MISS] += 1
        if ist[_N_FREE] > 0:
            ist[_N_FREE] -= 1
            s = free_stack[ist[_N_FREE]]
        else:
            s = ist[_TAIL]
            _lru_unlink(s, ist, lru_prev, lru_next)
            key_slot[slot_key[s]] = -1
        slot_key[s] = key
        key_slot[key] = s
        _lru_push_front(s, ist, lru_prev, lru_next)
        start = 0
    kernel_column_into(
        i,
        key,
        start,
        L,
        Xw.shape[0] == 0,
        Xw,
        sqw,
        perm,
        data,
        indices,
        indptr,
        scatter,
        kid,
        gamma,
        coef0,
        degree,
        offset,
        work,
    )
    base = s * sl
    yi = y[i]
    ist[_KEVALS] += L - start
    for q in range(start, L):
        buf[base + q] = yi * y[q] * work[q]
    slot_valid[s] = L
    return s


# --------------------------------------------------------------------------- shrinking
@numba.njit(nogil=True, cache=True)
def _shrinkable(a, g, c, M):
    return (a <= 0.0 and g > M) or (a >= c and g < -M)


@numba.njit(nogil=True, cache=True)
def _shrink(M, min_fraction, ist, perm, alpha, G, Cb, qd, problem, cache):
    """Move shrinkable variables out of the active prefix [0, L); stable order.

    Only acts if at least ``min_fraction * L`` variables qualify.  Returns the new L.
    """
    y, Xw, sqw = problem[0], problem[1], problem[2]  # the per-variable arrays it permutes
    buf, key_slot, slot_key, slot_valid, lru_prev, lru_next, free_stack = cache
    L = ist[_L]
    cnt = 0
    for q in range(L):
        if _shrinkable(alpha[q], G[q], Cb[q], M):
            cnt += 1
    if cnt == 0 or cnt < min_fraction * L:
        return L
    order = np.empty(L, dtype=np.int64)
    newpos = np.empty(L, dtype=np.int64)
    k = 0
    for q in range(L):
        if not _shrinkable(alpha[q], G[q], Cb[q], M):
            order[k] = q
            newpos[q] = k
            k += 1
        else:
            newpos[q] = -1
    Lnew = k
    for q in range(L):
        if newpos[q] < 0:
            order[k] = q
            k += 1
    # permute the working arrays (prefix [0, L))
    tmp_i = perm[:L].copy()
    for q in range(L):
        perm[q] = tmp_i[order[q]]
    for arr in (alpha, G, Cb, qd, y, sqw):
        tmp = arr[:L].copy()
        for q in range(L):
            arr[q] = tmp[order[q]]
    if Xw.shape[0] > 0:
        tmp2 = Xw[:L].copy()
        for q in range(L):
            Xw[q, :] = tmp2[order[q], :]
    # cached columns: drop those of shrunk variables, compact the others
    sl = ist[_SLOT_LEN]
    for s in range(ist[_N_SLOTS]):
        key = slot_key[s]
        if key < 0:
            continue
        # is this key still active?  (its position is among the first Lnew of perm)
        v = slot_valid[s]
        base = s * sl
        nv = 0
        for q in range(min(v, L)):
            if newpos[q] >= 0:
                buf[base + newpos[q]] = buf[base + q]
                nv += 1
        slot_valid[s] = nv
    # free slots whose key is no longer active
    active_key = np.zeros(ist[_N], dtype=np.bool_)
    for q in range(Lnew):
        active_key[perm[q]] = True
    for s in range(ist[_N_SLOTS]):
        key = slot_key[s]
        if key >= 0 and not active_key[key]:
            _lru_unlink(s, ist, lru_prev, lru_next)
            key_slot[key] = -1
            slot_key[s] = -1
            slot_valid[s] = 0
            free_stack[ist[_N_FREE]] = s
            ist[_N_FREE] += 1
    ist[_L] = Lnew
    # re-slice the buffer into shorter columns when the active set has halved
    if Lnew >= 1 and 2 * Lnew <= sl:
        new_sl = Lnew
        old_n = ist[_N_SLOTS]
        for s in range(old_n):
            if slot_key[s] >= 0:
                ob = s * sl
                nb = s * new_sl
                for q in range(slot_valid[s]):
                    buf[nb + q] = buf[ob + q]
        new_n = min(ist[_CAP] // new_sl, ist[_N])
        for s in range(old_n, new_n):
            slot_key[s] = -1
            slot_valid[s] = 0
            lru_prev[s] = -1
            lru_next[s] = -1
            free_stack[ist[_N_FREE]] = s
            ist[_N_FREE] += 1
        ist[_SLOT_LEN] = new_sl
        ist[_N_SLOTS] = new_n
    return Lnew


# --------------------------------------------------------------------------- main loop
@numba.njit(nogil=True, cache=True)
def _pg(a, g, c):
    if a <= 0.0:
        return min(g, 0.0)
    if a >= c:
        return max(g, 0.0)
    return g


@numba.njit(nogil=True, cache=True)
def _select_all(L, alpha, G, Cb, y):
    """Best single coordinate (max |PG|) and maximal violating pair (see ``_cd_run``)."""
    best = -1
    bestv = -1.0
    iu = -1
    ju = -1
    gu = np.inf
    gl = -np.inf
    for q in range(L):
        g = G[q]
        aq = alpha[q]
        if aq <= 0.0:
            v = -g
        elif aq >= Cb[q]:
            v = g
        else:
            v = abs(g)
        if v > bestv:
            bestv = v
            best = q
        yg = y[q] * g
        if (aq < Cb[q]) if y[q] > 0 else (aq > 0.0):
            if yg < gu:
                gu = yg
                iu = q
        if (aq > 0.0) if y[q] > 0 else (aq < Cb[q]):
            if yg > gl:
                gl = yg
                ju = q
    return best, bestv, iu, ju, gl - gu


# Long on purpose: the selection loop is fused with the gradient update so that the hot loop
# makes one pass over the gradient per step (a separate selection pass measured slower).
@numba.njit(nogil=True, cache=True)
def _cd_run(
    ist, fst, perm, alpha, G, Cb, qd, problem, cache, work, eps, eps_shrunk, max_steps, shrinking, pairs
):
    """Run at most ``max_steps`` CD steps on the active prefix.

    The active set converges at ``eps`` while it holds every variable, at ``eps_shrunk``
    once shrunk (re-evaluated after every shrink inside the call, so that where the driver
    cuts its time slices never changes the sequence of steps: runs are reproducible).

    A step is either the single-coordinate step on ``i = argmax |PG_i|`` or, when ``pairs``
    and its guaranteed decrease is larger, a two-coordinate step along
    ``d = y_i e_i - y_j e_j`` on the maximal violating pair (Keerthi et al. 2001; LIBSVM's
    WSS 1): ``i = argmin {y_t G_t : a_t can move along +y_t}``,
    ``j = argmax {y_t G_t : a_t can move along -y_t}``.  Along ``d`` the curvature is
    ``k_ii + k_jj - 2 k_ij`` whatever the constant kernel offset, so these steps are not slowed
    by a large constant component of the kernel (ill-conditioning along ``y``); the single
    steps still move ``y'a``.  Convergence is always judged by the single-coordinate
    violation.

    Returns CONVERGED (max violation on the active set < eps), BUDGET or STALLED.
    ``fst[0]`` receives the current max violation on the active set.
    """

    y, offset, buf = problem[0], problem[11], cache[0]

    L = ist[_L]
    n_all = perm.shape[0]
    tol = eps if n_all == L else eps_shrunk
    best, bestv, iu, ju, pv = _select_all(L, alpha, G, Cb, y)
    steps = 0
    status = BUDGET
    while True:
        if L == 0 or bestv < tol:
            status = CONVERGED
            break
        if steps >= max_steps:
            break
        sl = ist[_SLOT_LEN]
        single_gain = bestv * bestv / max(qd[best], 1e-12)
        pair_gain = -1.0
        if pairs and iu >= 0 and ju >= 0 and iu != ju and pv > 0.0:
            pair_gain = pv * pv / max(qd[iu] + qd[ju] - 2.0 * offset, 1e-12)
        if pair_gain > single_gain:
            i = iu
            j = ju
            si = _get_column(i, ist, perm, problem, cache, work)
            sj = _get_column(j, ist, perm, problem, cache, work)
            bi = si * sl
            bj = sj * sl
            # Q[j, i] = y_i y_j K_ij
            kij = y[i] * y[j] * buf[bi + j]
            eta = max(qd[i] + qd[j] - 2.0 * kij, 1e-12)
            t = pv / eta
            t = min(t, Cb[i] - alpha[i] if y[i] > 0 else alpha[i])
            t = min(t, alpha[j] if y[j] > 0 else Cb[j] - alpha[j])
            if t <= 0.0:
                status = STALLED
                break
            di = y[i] * t
            dj = -y[j] * t
            ai = alpha[i] + di
            aj = alpha[j] + dj
            alpha[i] = min(max(ai, 0.0), Cb[i])
            alpha[j] = min(max(aj, 0.0), Cb[j])
            ist[_PAIRS] += 1
            best = -1
            bestv = -1.0
            iu = -1
            ju = -1
            gu = np.inf
            gl = -np.inf
            for q in range(L):
                g = G[q] + di * buf[bi + q] + dj * buf[bj + q]
                G[q] = g
                aq = alpha[q]
                if aq <= 0.0:
                    v = -g
                elif aq >= Cb[q]:
                    v = g
                else:
                    v = abs(g)
                if v > bestv:
                    bestv = v
                    best = q
                yg = y[q] * g
                if (aq < Cb[q]) if y[q] > 0 else (aq > 0.0):
                    if yg < gu:
                        gu = yg
                        iu = q
                if (aq > 0.0) if y[q] > 0 else (aq < Cb[q]):
                    if yg > gl:
                        gl = yg
                        ju = q
            pv = gl - gu
        else:
            i = best
            s = _get_column(i, ist, perm, problem, cache, work)
            a = alpha[i]
            na = a - G[i] / max(qd[i], 1e-12)
            if na < 0.0:
                na = 0.0
            elif na > Cb[i]:
                na = Cb[i]
            d = na - a
            if d == 0.0:
                status = STALLED
                break
            alpha[i] = na
            base = s * sl
            best = -1
            bestv = -1.0
            iu = -1
            ju = -1
            gu = np.inf
            gl = -np.inf
            for q in range(L):
                g = G[q] + d * buf[base + q]
                G[q] = g
                aq = alpha[q]
                if aq <= 0.0:
                    v = -g
                elif aq >= Cb[q]:
                    v = g
                else:
                    v = abs(g)
                if v > bestv:
                    bestv = v
                    best = q
                if pairs:
                    yg = y[q] * g
                    if (aq < Cb[q]) if y[q] > 0 else (aq > 0.0):
                        if yg < gu:
                            gu = yg
                            iu = q
                    if (aq > 0.0) if y[q] > 0 else (aq < Cb[q]):
                        if yg > gl:
                            gl = yg
                            ju = q
            pv = gl - gu
        steps += 1
        ist[_SCANNED] += L
        if shrinking:
            ist[_SHRINK_CNT] -= 1
            if ist[_SHRINK_CNT] <= 0:
                ist[_SHRINK_CNT] = ist[_SHRINK_EVERY]
                newL = _shrink(bestv, 0.05, ist, perm, alpha, G, Cb, qd, problem, cache)
                if newL != L:
                    L = newL
                    tol = eps if n_all == L else eps_shrunk
                    best, bestv, iu, ju, pv = _select_all(L, alpha, G, Cb, y)
    ist[_ITERS] += steps
    fst[0] = max(bestv, 0.0)
    return status


@numba.njit(nogil=True, cache=True)
def _q2(di, dj, gi, gj, qii, qjj, qij):
    return gi * di + gj * dj + 0.5 * (qii * di * di + 2.0 * qij * di * dj + qjj * dj * dj)


@numba.njit(nogil=True, cache=True)
def box_qp2(gi, gj, qii, qjj, qij, loi, hii, loj, hij):
    """Exact minimiser of ``g'd + 1/2 d'Hd`` over the box ``lo <= d <= hi`` (2 variables).

    ``H = [[qii, qij], [qij, qjj]]`` positive semi-definite with ``qii, qjj > 0``, and
    ``lo <= 0 <= hi`` (``d = 0`` is feasible).  The unconstrained Newton step when it is
    feasible; otherwise the optimum lies on an edge of the box, and the best of the four
    edge minimisers (each a clipped 1-D Newton step) is returned.  Returns ``(di, dj)``.
    """
    det = qii * qjj - qij * qij
    if det > 1e-12 * qii * qjj:
        di = (qij * gj - qjj * gi) / det
        dj = (qij * gi - qii * gj) / det
        if loi <= di <= hii and loj <= dj <= hij:
            return di, dj
    bq = 0.0
    bdi = 0.0
    bdj = 0.0
    for e in range(4):
        if e < 2:
            di = loi if e == 0 else hii
            dj = min(max(-(gj + qij * di) / qjj, loj), hij)
        else:
            dj = loj if e == 2 else hij
            di = min(max(-(gi + qij * dj) / qii, loi), hii)
        q = _q2(di, dj, gi, gj, qii, qjj, qij)
        if q < bq:
            bq = q
            bdi = di
            bdj = dj
    return bdi, bdj


@numba.njit(nogil=True, cache=True)
def _select_best(L, alpha, G, Cb):
    """``argmax |PG|`` over the active prefix and its value."""
    best = -1
    bestv = -1.0
    for q in range(L):
        g = G[q]
        aq = alpha[q]
        if aq <= 0.0:
            v = -g
        elif aq >= Cb[q]:
            v = g
        else:
            v = abs(g)
        if v > bestv:
            bestv = v
            best = q
    return best, bestv


# Long on purpose, like _cd_run: the gradient update is fused with the next first-order pick.
@numba.njit(nogil=True, cache=True)
def _cd_run_wss2(
    ist, fst, perm, alpha, G, Cb, qd, problem, cache, work, eps, eps_shrunk, max_steps, shrinking
):
    """Two-variable steps with second-order working-set selection, for the problem without
    equality constraint (Steinwart, Hush & Scovel 2011, "Training SVMs without offset",
    JMLR 12; the analogue of LIBSVM's WSS 2, Fan, Chen & Lin 2005).

    Every step takes ``i = argmax |PG_i|`` (first order) and, with column ``Q[:, i]``, the
    partner ``j`` whose unconstrained two-variable Newton step on ``(i, j)`` promises the
    largest decrease of the objective,

        gain(j) = (Q_jj G_i^2 - 2 Q_ij G_i G_j + Q_ii G_j^2) / (Q_ii Q_jj - Q_ij^2)

    among the ``j`` for which that step is feasible in sign (a variable at a bound may only
    move inwards).  The pair's sub-problem, a box-constrained 2x2 QP, is then solved exactly
    (:func:`box_qp2`): it is never worse than the single-coordinate step on ``i``, and it
    also covers the direction ``y_i e_i - y_j e_j`` along which a constant kernel offset
    cancels.  Stopping, shrinking and the cache are those of :func:`_cd_run`.
    """

    buf = cache[0]

    L = ist[_L]
    n_all = perm.shape[0]
    tol = eps if n_all == L else eps_shrunk
    best, bestv = _select_best(L, alpha, G, Cb)
    steps = 0
    status = BUDGET
    while True:
        if L == 0 or bestv < tol:
            status = CONVERGED
            break
        if steps >= max_steps:
            break
        sl = ist[_SLOT_LEN]
        i = best
        si = _get_column(i, ist, perm, problem, cache, work)
        bi = si * sl
        gi = G[i]
        qii = qd[i]
        # partner: largest unconstrained two-variable decrease, feasible in sign
        j = -1
        bgain = 0.0
        for t in range(L):
            if t == i:
                continue
            gt = G[t]
            at = alpha[t]
            qtt = qd[t]
            qit = buf[bi + t]  # the cache holds Q = y_i y_t K_it
            det = qii * qtt - qit * qit
            if det <= 1e-12 * qii * qtt:
                det = 1e-12 * qii * qtt
            dt = qit * gi - qii * gt  # sign of the Newton step of t (det > 0)
            if (at <= 0.0 and dt <= 0.0) or (at >= Cb[t] and dt >= 0.0):
                continue
            num = qtt * gi * gi - 2.0 * qit * gi * gt + qii * gt * gt
            if num > bgain * det:
                bgain = num / det
                j = t
        if j >= 0:
            sj = _get_column(j, ist, perm, problem, cache, work)
            bj = sj * sl
            qij = buf[bi + j]
            di, dj = box_qp2(
                gi, G[j], qii, qd[j], qij, -alpha[i], Cb[i] - alpha[i], -alpha[j], Cb[j] - alpha[j]
            )
        else:
            bj = bi
            di = min(max(-gi / max(qii, 1e-12), -alpha[i]), Cb[i] - alpha[i])
            dj = 0.0
        # new values, exactly on a bound when they reach it
        ai = alpha[i]
        nai = 0.0 if di <= -ai else (Cb[i] if di >= Cb[i] - ai else ai + di)
        di = nai - ai
        if j >= 0:
            aj = alpha[j]
            naj = 0.0 if dj <= -aj else (Cb[j] if dj >= Cb[j] - aj else aj + dj)
            dj = naj - aj
        if di == 0.0 and dj == 0.0:
            status = STALLED
            break
        alpha[i] = nai
        if j >= 0:
            alpha[j] = naj
            ist[_PAIRS] += 1
        best = -1
        bestv = -1.0
        for q in range(L):
            g = G[q] + di * buf[bi + q] + dj * buf[bj + q]
            G[q] = g
            aq = alpha[q]
            if aq <= 0.0:
                v = -g
            elif aq >= Cb[q]:
                v = g
            else:
                v = abs(g)
            if v > bestv:
                bestv = v
                best = q
        steps += 1
        ist[_SCANNED] += L
        if shrinking:
            ist[_SHRINK_CNT] -= 1
            if ist[_SHRINK_CNT] <= 0:
                ist[_SHRINK_CNT] = ist[_SHRINK_EVERY]
                newL = _shrink(bestv, 0.05, ist, perm, alpha, G, Cb, qd, problem, cache)
                if newL != L:
                    L = newL
                    tol = eps if n_all == L else eps_shrunk
                    best, bestv = _select_best(L, alpha, G, Cb)
    ist[_ITERS] += steps
    fst[0] = max(bestv, 0.0)
    return status


@numba.njit(nogil=True, cache=True)
def _max_violation(n, alpha, G, Cb):
    m = 0.0
    for q in range(n):
        v = abs(_pg(alpha[q], G[q], Cb[q]))
        if v > m:
            m = v
    return m


# --------------------------------------------------------------------------- driver
@dataclass
class KernelDualResult:
    """Outcome of :func:`solve_dual`.

    Attributes
    ----------
    alpha : ndarray of shape (n_samples,), float64
        Dual variables in the input order.
    grad : ndarray of shape (n_samples,), float64
        Gradient ``Q alpha - 1`` (recomputed exactly in float64 at the end).
    objective : float
        Dual objective ``1'alpha - 1/2 alpha'Q alpha`` (to be maximised).
    max_violation : float
        Maximal projected-gradient violation over all variables at the end.
    n_iter : int
        Coordinate updates performed.
    converged : bool
        ``max_violation < eps`` (False if ``max_iter`` was reached).
    """

    alpha: np.ndarray
    grad: np.ndarray
    objective: float
    max_violation: float
    n_iter: int
    converged: bool
    elapsed: float
    stats: dict = field(default_factory=dict)

    @property
    def n_support(self) -> int:
        return int(np.count_nonzero(self.alpha > 0))


def dual_objective(alpha, grad) -> float:
    """``1'a - 1/2 a'Qa`` from ``a`` and ``grad = Qa - 1`` (both shape (n,), float64)."""
    alpha = np.asarray(alpha, dtype=np.float64)
    return float(0.5 * np.dot(alpha, 1.0 - np.asarray(grad, dtype=np.float64)))


def exact_gradient(kd: KernelData, y, spec: KernelSpec, alpha, rows=None) -> np.ndarray:
    """``G_r = y_r sum_j a_j y_j k(x_r, x_j) - 1`` for rows ``r`` (all if None), float64."""
    y = np.asarray(y, dtype=np.float64)
    sv = np.flatnonzero(alpha > 0)
    rows_idx = np.arange(len(y)) if rows is None else np.asarray(rows, dtype=np.int64)
    if sv.size == 0:
        return -np.ones(rows_idx.shape[0])
    f = kernel_matvec(kd, kd, spec, alpha[sv] * y[sv], rows=rows_idx, cols=sv)
    return y[rows_idx] * f - 1.0


@with_single_thread_blas
def solve_dual(
    kd: KernelData,
    y,
    spec: KernelSpec,
    C,
    alpha0=None,
    *,
    eps: float = 1e-3,
    cache_mb: float = 200.0,
    shrinking: bool = True,
    pairs: bool = True,
    selection: str = "wss2",
    grad0=None,
    max_iter: int | None = None,
    progress=None,
    should_stop=None,
    report_interval: float = 0.5,
    info: dict | None = None,
) -> KernelDualResult:
    """Solve the bias-free kernel SVM dual (Hsieh et al. 2014, eq. 1) by greedy dual CD.

    Parameters
    ----------
    kd : KernelData
        Training points, n_samples rows.
    y : ndarray of shape (n_samples,)
        Labels in {-1, +1}.
    spec : KernelSpec
    C : float or ndarray of shape (n_samples,)
        Upper bound(s) of the dual variables (> 0).
    alpha0 : ndarray of shape (n_samples,), optional
        Warm start (clipped into [0, C]); zeros if None.
    eps : float
        Stop when the maximal projected-gradient violation is below ``eps``.
    cache_mb : float
        Size of the kernel-column cache in MB (float32 entries; at least two columns).
    shrinking : bool
        Use the shrinking heuristic.
    pairs : bool
        ``selection="greedy"`` only: also take two-coordinate steps on the maximal violating
        pair when they promise a larger decrease (see ``_cd_run``); False gives plain greedy
        single-coordinate CD.
    selection : {"wss2", "greedy"}
        "wss2" (default): two-variable steps with second-order partner selection and an
        exact 2x2 box-QP step (``_cd_run_wss2``; on ijcnn1 from zero 30,887 steps against
        177,095 of "greedy", about LIBSVM's 31,484).  "greedy": the first-order
        single-coordinate / maximal-violating-pair steps of ``_cd_run``.
    grad0 : tuple (rows, values), optional
        The exact gradient ``(Q alpha0 - 1)[rows]`` where the caller already knows it (e.g.
        from a solve restricted to those rows when ``alpha0`` is zero elsewhere); only the
        other rows are computed.  Ignored when ``alpha0`` is zero.
    max_iter : int, optional
        Maximal number of coordinate updates (default ``max(10_000_000, 100 n)``).
    progress : callable, optional
        Called as ``progress(dict)`` about every ``report_interval`` seconds with keys
        ``iterations, objective, max_violation, active, elapsed`` plus the items of ``info``.
        The objective is exact at the end and approximate in between (stale gradients of
        shrunk variables).
    should_stop : callable, optional
        Polled between slices of CD steps (each slice takes at most about 0.1 s);
        returning True raises :class:`Cancelled`.

    Returns
    -------
    KernelDualResult

    Raises
    ------
    ValueError
        On inconsistent shapes, labels outside {-1, +1}, C <= 0 or an unknown ``selection``.
    Cancelled
        When ``should_stop()`` returned True.
    """
    t0 = time.perf_counter()
    if selection not in ("wss2", "greedy"):
        raise ValueError(f"selection must be 'wss2' or 'greedy', got {selection!r}")
    wss2 = selection == "wss2"
    y = np.ascontiguousarray(y, dtype=np.float64)
    n = kd.n_samples
    if y.shape != (n,):
        raise ValueError(f"y has shape {y.shape}, expected ({n},)")
    if n and not np.all(np.abs(y) == 1.0):
        raise ValueError("labels must be -1 or +1")
    Cb = np.broadcast_to(np.asarray(C, dtype=np.float64), (n,)).copy()
    if n and not np.all(Cb > 0):
        raise ValueError("C must be > 0")
    if alpha0 is None:
        alpha = np.zeros(n)
    else:
        alpha = np.array(alpha0, dtype=np.float64, copy=True)
        if alpha.shape != (n,):
            raise ValueError(f"alpha0 has shape {alpha.shape}, expected ({n},)")
        np.clip(alpha, 0.0, Cb, out=alpha)
    if max_iter is None:
        max_iter = max(10_000_000, 100 * n)
    info = dict(info or {})
    if n == 0:
        return KernelDualResult(alpha, np.zeros(0), 0.0, 0.0, 0, True, 0.0)

    warm = bool(np.any(alpha > 0))
    tg0 = time.process_time()
    if not warm:
        G = -np.ones(n)
    elif grad0 is None:
        G = exact_gradient(kd, y, spec, alpha)
    else:
        rows0, vals0 = grad0
        rows0 = np.asarray(rows0, dtype=np.int64)
        G = np.empty(n)
        G[rows0] = np.asarray(vals0, dtype=np.float64)
        rest = np.ones(n, dtype=bool)
        rest[rows0] = False
        rest = np.flatnonzero(rest)
        G[rest] = exact_gradient(kd, y, spec, alpha, rows=rest)
    timing = {"gradient_cpu_s": time.process_time() - tg0, "refresh_cpu_s": 0.0, "refresh_kernel_evals": 0}
    # last exact gradient (input order) and the alpha it belongs to: later refreshes only
    # add the kernel columns of the variables that changed since (often fewer than the SVs)
    ref_alpha = alpha.copy()
    ref_G = G.copy()
    kid, gamma, coef0, degree, offset = spec.params
    qd = kd.diag(spec)

    # working arrays in position order
    perm = np.arange(n, dtype=np.int64)
    Xw = kd.dense.copy() if not kd.is_sparse else np.zeros((0, 0))
    sqw = kd.sqnorm.copy()
    yw = y.copy()
    scatter = np.zeros(kd.n_features if kd.is_sparse else 0)
    work = np.empty(n)
    fst = np.zeros(4)
    ist = np.zeros(16, dtype=np.int64)
    cap = max(int(cache_mb * 2**20 / 4), 2 * n)
    ist[_CAP] = cap
    ist[_N] = n
    ist[_L] = n
    ist[_SHRINK_EVERY] = min(n, 1000)
    ist[_SHRINK_CNT] = ist[_SHRINK_EVERY]
    buf = np.empty(cap, dtype=np.float32)
    key_slot = np.full(n, -1, dtype=np.int64)
    slot_key = np.full(n, -1, dtype=np.int64)
    slot_valid = np.zeros(n, dtype=np.int64)
    lru_prev = np.full(n, -1, dtype=np.int64)
    lru_next = np.full(n, -1, dtype=np.int64)
    free_stack = np.zeros(n, dtype=np.int64)
    _cache_reset(ist, n, key_slot, slot_key, slot_valid, lru_prev, lru_next, free_stack)
    # the kernel problem and the column cache, as the numba kernels take them
    problem = (yw, Xw, sqw, kd.data, kd.indices, kd.indptr, scatter, kid, gamma, coef0, degree, offset)
    cache = (buf, key_slot, slot_key, slot_valid, lru_prev, lru_next, free_stack)

    if shrinking and warm:
        M = _max_violation(n, alpha, G, Cb)
        _shrink(M, 0.0, ist, perm, alpha, G, Cb, qd, problem, cache)

    def refresh():
        """Exact float64 gradient for every position; re-activate everything."""
        tr0 = time.process_time()
        alpha_orig = np.empty(n)
        alpha_orig[perm] = alpha
        delta = alpha_orig - ref_alpha
        changed = np.flatnonzero(delta)
        if changed.size <= np.count_nonzero(alpha_orig > 0):
            g_orig = ref_G + y * kernel_matvec(kd, kd, spec, delta[changed] * y[changed], cols=changed)
            timing["refresh_kernel_evals"] += n * changed.size
        else:
            g_orig = exact_gradient(kd, y, spec, alpha_orig)
            timing["refresh_kernel_evals"] += n * int(np.count_nonzero(alpha_orig > 0))
        ref_alpha[:] = alpha_orig
        ref_G[:] = g_orig
        G[:] = g_orig[perm]
        if ist[_L] < n:
            ist[_L] = n
            _cache_reset(ist, n, *cache[1:])
        if shrinking:
            # LIBSVM shrinks again right after a reconstruction
            M = _max_violation(n, alpha, G, Cb)
            _shrink(M, 0.0, ist, perm, alpha, G, Cb, qd, problem, cache)
        timing["refresh_cpu_s"] += time.process_time() - tr0

    steps = 256
    n_refresh = 0
    iters_at_refresh = -1
    unshrunk = not shrinking
    last_report = t0
    converged = False
    while True:
        if should_stop is not None and should_stop():
            raise Cancelled("dual CD cancelled")
        # a shrunk active set converges at 10 eps first (LIBSVM), then all variables at eps
        eps_shrunk = eps if unshrunk else 10.0 * eps
        remaining = max_iter - int(ist[_ITERS])
        if remaining <= 0:
            break
        ts = time.perf_counter()
        run_args = (
            ist,
            fst,
            perm,
            alpha,
            G,
            Cb,
            qd,
            problem,
            cache,
            work,
            eps,
            eps_shrunk,
            min(steps, remaining),
            shrinking,
        )
        if wss2:
            status = _cd_run_wss2(*run_args)
        else:
            status = _cd_run(*run_args, pairs)
        dt = time.perf_counter() - ts
        if status == BUDGET:
            # aim at ~0.1 s per slice so that cancellation is prompt
            steps = int(min(max(steps * (0.1 / max(dt, 1e-4)), 16), 1_000_000))
        else:
            if ist[_L] < n:
                unshrunk = True
            if int(ist[_ITERS]) == iters_at_refresh:
                # nothing moved since the exact refresh: every variable satisfies the test
                converged = True
                break
            refresh()
            n_refresh += 1
            iters_at_refresh = int(ist[_ITERS])
            if status == STALLED and n_refresh > 50:
                break
        now = time.perf_counter()
        if progress is not None and now - last_report >= report_interval:
            last_report = now
            progress(
                {
                    **info,
                    "iterations": int(ist[_ITERS]),
                    "objective": dual_objective(alpha, G),
                    "max_violation": float(fst[0]),
                    "active": int(ist[_L]),
                    "elapsed": now - t0,
                }
            )
    if not converged:
        refresh()
    alpha_out = np.empty(n)
    alpha_out[perm] = alpha
    g_out = np.empty(n)
    g_out[perm] = G
    viol = float(
        _max_violation(n, alpha_out, g_out, np.broadcast_to(np.asarray(C, dtype=np.float64), (n,)).copy())
    )
    res = KernelDualResult(
        alpha=alpha_out,
        grad=g_out,
        objective=dual_objective(alpha_out, g_out),
        max_violation=viol,
        n_iter=int(ist[_ITERS]),
        converged=viol < eps,
        elapsed=time.perf_counter() - t0,
        stats={
            "cache_hits": int(ist[_HIT]),
            "cache_misses": int(ist[_MISS]),
            "pair_steps": int(ist[_PAIRS]),
            "kernel_evals": int(ist[_KEVALS]),
            "active_scanned": int(ist[_SCANNED]),
            "refreshes": n_refresh,
            **timing,
        },
    )
    if progress is not None:
        progress(
            {
                **info,
                "iterations": res.n_iter,
                "objective": res.objective,
                "max_violation": res.max_violation,
                "active": n,
                "elapsed": res.elapsed,
                "done": True,
            }
        )
    return res


@with_single_thread_blas  # once per batch: threadpoolctl costs milliseconds per entry
def solve_many(problems, spec, eps, cache_mb, shrinking, max_iter, should_stop):
    """Solve sub-problems ``(kd, y, C, alpha0)`` one after the other (an iterable: a caller
    may build each one only when it is reached) with :func:`solve_dual`.

    Returns a list of ``(alpha, objective, max_violation, n_iter, stats)``.  Raises
    :class:`~svmstream.solvers.exceptions.Cancelled` when ``should_stop()`` is true before a
    sub-problem (``solve_dual`` polls it during one).  Used by the DC-SVM levels in a local
    process pool (:mod:`._dcsvm`) and on a dask cluster (:mod:`._dask`)."""
    out = []
    for kd, y, C, a0 in problems:
        if should_stop():
            raise Cancelled("DC-SVM sub-problem cancelled")
        r = solve_dual(
            kd,
            y,
            spec,
            C,
            a0,
            eps=eps,
            cache_mb=cache_mb,
            shrinking=shrinking,
            max_iter=max_iter,
            should_stop=should_stop,
        )
        out.append((r.alpha, r.objective, r.max_violation, r.n_iter, r.stats))
    return out
