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

Speed features (all inside ``@numba.njit(nogil=True, cache=True)`` functions; the cache and
shrinking in :mod:`._dual_cd_cache`):

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

The driver :func:`._dual_solve.solve_dual` runs the numba loop in slices of bounded time so that a job
runner gets ``progress(dict)`` reports and can cancel through ``should_stop()`` (raising
:class:`Cancelled`) within a fraction of a second.
"""

from __future__ import annotations

import numba
import numpy as np

from ..exceptions import Cancelled
from ._dual_cd_cache import (
    _ITERS,
    _L,
    _PAIRS,
    _SCANNED,
    _SHRINK_CNT,
    _SHRINK_EVERY,
    _SLOT_LEN,
    BUDGET,
    CONVERGED,
    STALLED,
    _get_column,
    _shrink,
)

__all__ = ["Cancelled", "box_qp2"]


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
# size: one numba kernel, the greedy CD loop fused with the gradient update
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
# size: one numba kernel, the two-variable WSS2 loop fused with the gradient update
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
