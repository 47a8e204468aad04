"""Dual coordinate descent for the linear L1-loss (hinge) SVM without bias: LIBLINEAR and AVSF.

Problem (dual of the hinge-loss SVM without bias term)::

    max_alpha  D(alpha) = sum_i alpha_i - 1/2 ||w(alpha)||^2,   w(alpha) = sum_i alpha_i y_i x_i,
    s.t.       0 <= alpha_i <= C,

with primal ``P(w) = 1/2 ||w||^2 + C sum_i max(0, 1 - y_i <w, x_i>)``.  Both solvers keep
``w`` up to date, so the coordinate gradient ``g_i = 1 - y_i <w, x_i>`` costs one sparse dot
product and a step ``alpha_i += mu`` one sparse axpy ``w += mu y_i x_i``.

Two coordinate selection rules, following Glasmachers & Dogan, "Accelerated Linear SVM
Training with Adaptive Variable Selection Frequencies" (arXiv:1302.5608):

* ``"uniform"``: the paper's Algorithm 2 (LIBLINEAR's dual CD, Hsieh et al. ICML 2008,
  Algorithm 3): sweeps in random order over an active set, shrinking with the previous
  sweep's extreme projected gradients, stop when the projected-gradient spread of a sweep
  over *all* variables is below ``tol``.
* ``"avsf-paper"``: the paper's Algorithms 3-5: each outer iteration visits a randomly
  rounded, shuffled schedule in which variable ``i`` appears about ``n p_i / sum(p)``
  times; after every step the preference ``p_i`` is multiplied by
  ``exp(c (Delta / Delta_ref - 1))`` and clipped to ``[p_min, p_max]``; no shrinking.
* ``"avsf"`` (recommended): the same selection frequencies, restricted to an active set
  that LIBLINEAR's shrinking rule maintains (a documented departure from the paper).

Layout: the per-example loops are numba kernels (``nogil``, cached) working on
preallocated arrays; :func:`dual_cd` is the Python driver that owns the state and calls a
kernel once per outer iteration (``"avsf-paper"``, or ``"uniform"`` / ``"avsf"`` while
their active set is full) or once per ``n_samples`` steps' worth of small shrunk sweeps, and in between checks
``should_stop`` and reports ``progress``, so a worker process can cancel and monitor a long
run.  The reconstruction choices for AVSF are documented in ``docs/avsf.md``.

Input arrays: CSR as ``data`` float64 (nnz,), ``indices`` int32 (nnz,), ``indptr`` int64
(n+1,) (always these dtypes, so each kernel has a single compiled signature), or a dense
C-contiguous float64 (n, d) array; the unused representation is passed as empty arrays.
The kernels take them as one tuple ``X = (is_sparse, data, indices, indptr, dense)``
(:attr:`CDInput.arrays`) and unpack it on entry.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numba
import numpy as np
import scipy.sparse as sp

from .._params import SELECTIONS
from ..exceptions import Cancelled

__all__ = [
    "AVSF_C",
    "AVSF_P_MAX",
    "AVSF_P_MIN",
    "CDInput",
    "Cancelled",
    "LinearDualResult",
    "as_cd_input",
    "decision_values",
    "dual_cd",
    "objectives",
]

#: AVSF preference bounds and change rate (Glasmachers & Dogan 2013, Section 4 / Algorithm 5).
AVSF_P_MIN = 1.0 / 20.0
AVSF_P_MAX = 20.0
AVSF_C = 1.0 / 5.0

_SELECTIONS = SELECTIONS
_EMPTY_F = np.empty(0, dtype=np.float64)
_EMPTY_I32 = np.empty(0, dtype=np.int32)
_EMPTY_I64 = np.zeros(1, dtype=np.int64)
_EMPTY_2D = np.empty((0, 0), dtype=np.float64)


# --------------------------------------------------------------------------- numba kernels


@numba.njit(nogil=True, cache=True, inline="always")
def _next_u64(rng):
    """xorshift64* (Vigna 2016); ``rng`` is a uint64 array of length 1 holding the state."""
    x = rng[0]
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    rng[0] = x
    return x * np.uint64(0x2545F4914F6CDD1D)


@numba.njit(nogil=True, cache=True, inline="always")
def _uniform01(rng):
    """Uniform double in [0, 1) from the top 53 bits of :func:`_next_u64`."""
    return float(_next_u64(rng) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@numba.njit(nogil=True, cache=True, inline="always")
def _below(rng, m):
    """Integer in [0, m) from one 53-bit uniform (relative bias below m / 2**53)."""
    k = np.int64(_uniform01(rng) * m)
    if k >= m:  # guard against rounding up
        k = m - 1
    return k


# Fast-math flags of the sweep kernels: re-association lets LLVM vectorise the sparse dot
# products (several accumulators); no "nnan"/"ninf", so the +-inf shrinking thresholds keep
# their IEEE meaning.
_FM = {"reassoc", "contract", "nsz", "arcp"}

# The row loops (dot product <w, x_i> and axpy w += a x_i) are written out inside each
# kernel: as separate njit functions, inlined or not, they cost ~2x on short rows (every
# array argument is reference-counted per call).  Indices are cast to unsigned integers so
# that numba skips its negative-index wrap-around branch (~1.7x faster on long rows).


@numba.njit(nogil=True, cache=True)
def _row_sq_norms(X, n):
    """Squared row norms ||x_i||^2 = Q_ii of ``X = CDInput.arrays``, shape (n,) float64."""
    is_sparse, data, indices, indptr, dense = X
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        s = 0.0
        if is_sparse:
            for k in range(indptr[i], indptr[i + 1]):
                s += data[k] * data[k]
        else:
            for j in range(dense.shape[1]):
                s += dense[i, j] * dense[i, j]
        out[i] = s
    return out


@numba.njit(nogil=True, cache=True, fastmath=_FM)
def _margins(w, X, n):
    """<w, x_i> for every row of ``X = CDInput.arrays``, shape (n,) float64."""
    is_sparse, data, indices, indptr, dense = X
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        dot = 0.0
        if is_sparse:
            for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
                dot += w[np.uint64(indices[k])] * data[k]
        else:
            for j in range(dense.shape[1]):
                dot += w[j] * dense[i, j]
        out[i] = dot
    return out


@numba.njit(nogil=True, cache=True)
def _dual_value(alpha, w):
    """D(alpha) = sum(alpha) - ||w||^2 / 2 with plain loops (no BLAS thread start-up)."""
    s = 0.0
    for i in range(alpha.shape[0]):
        s += alpha[i]
    q = 0.0
    for j in range(w.shape[0]):
        q += w[j] * w[j]
    return s - 0.5 * q


@numba.njit(nogil=True, cache=True)
def _csr_decision(data, indices, indptr, coef):
    """Decision values X @ coef.T for CSR X in O(nnz * n_classes); shape (n, k) float64."""
    n = indptr.shape[0] - 1
    k = coef.shape[0]
    out = np.zeros((n, k), dtype=np.float64)
    for i in range(n):
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            v = data[p]
            for c in range(k):
                out[i, c] += coef[c, j] * v
    return out


# Long on purpose: the per-step dot product and update stay inline; separate njit helpers
# measured about 2x the cost per step on short rows (docs/avsf.md).
@numba.njit(nogil=True, cache=True, fastmath=_FM)
def _uniform_run(X, problem, state, max_sweeps, min_steps):
    """Outer iterations of LIBLINEAR's dual CD with shrinking (paper's Algorithm 2).

    Runs sweeps until the stopping rule holds, ``max_sweeps`` sweeps are done, or at least
    ``min_steps`` coordinate steps were done in this call (so that tiny sweeps over a small
    active set do not each pay a Python round trip).

    ``X`` is the training matrix as ``CDInput.arrays`` = ``(is_sparse, data, indices,
    indptr, dense)`` (see the module docstring); ``problem = (y, qd, C, tol)`` with ``y``
    (n,) float64 in {-1, +1}, ``qd`` (n,) float64 squared row norms, ``C`` and ``tol``
    floats.  ``state = (alpha, w, index, bounds, counts, rng)``, updated in place:
    ``alpha`` (n,) float64, ``w`` (d,) float64, ``index`` (n,) int64 permutation whose
    first ``counts[0]`` entries are the active set, ``bounds = [v_min_old, v_max_old]``
    (2,) float64 (shrinking thresholds in the ``g = 1 - y <w, x>`` convention), ``counts``
    int64 (6,) = [active_size, converged flag, steps, updates, sweeps, full re-checks
    started (cumulative)], ``rng`` (1,) uint64; steps, updates and sweeps are overwritten
    with this call's totals.  Returns the spread v_max - v_min of the last sweep.
    """
    is_sparse, data, indices, indptr, dense = X
    y, qd, C, tol = problem
    alpha, w, index, bounds, counts, rng = state
    n = y.shape[0]
    d = dense.shape[1]
    active = counts[0]
    v_min_old = bounds[0]
    v_max_old = bounds[1]
    steps = 0
    updates = 0
    sweeps = 0
    converged = 0
    spread = np.inf
    while sweeps < max_sweeps:
        for s in range(active):  # random order over the active set
            j = s + _below(rng, active - s)
            t = index[s]
            index[s] = index[j]
            index[j] = t
        v_min = np.inf
        v_max = -np.inf
        s = 0
        while s < active:
            i = index[s]
            yi = y[i]
            dot = 0.0
            if is_sparse:
                for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
                    dot += w[np.uint64(indices[k])] * data[k]
            else:
                for j in range(np.uint64(d)):
                    dot += w[j] * dense[i, j]
            g = 1.0 - yi * dot
            steps += 1
            a = alpha[i]
            if a == 0.0:
                if g < v_min_old:  # shrink: at lower bound and pushed further down
                    active -= 1
                    t = index[s]
                    index[s] = index[active]
                    index[active] = t
                    continue
                pg = g if g > 0.0 else 0.0
            elif a == C:
                if g > v_max_old:  # shrink: at upper bound and pushed further up
                    active -= 1
                    t = index[s]
                    index[s] = index[active]
                    index[active] = t
                    continue
                pg = g if g < 0.0 else 0.0
            else:
                pg = g
            if pg > v_max:
                v_max = pg
            if pg < v_min:
                v_min = pg
            if abs(pg) > 1e-12:
                q = qd[i]
                if q > 0.0:
                    a_new = a + g / q
                    if a_new < 0.0:
                        a_new = 0.0
                    elif a_new > C:
                        a_new = C
                else:  # empty row: the dual is linear in alpha_i
                    a_new = C if g > 0.0 else 0.0
                alpha[i] = a_new
                step = (a_new - a) * yi
                if is_sparse:
                    for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
                        w[np.uint64(indices[k])] += step * data[k]
                else:
                    for j in range(np.uint64(d)):
                        w[j] += step * dense[i, j]
                updates += 1
            s += 1
        sweeps += 1
        if active == 0:  # everything shrunk: nothing was measured, force a full re-check
            v_min = 0.0
            v_max = 0.0
        spread = v_max - v_min
        if spread < tol:
            if active == n:
                converged = 1
                break
            # re-check the full set before stopping
            counts[5] += 1
            active = n
            v_min_old = -np.inf
            v_max_old = np.inf
        else:
            v_min_old = v_min if v_min < 0.0 else -np.inf
            v_max_old = v_max if v_max > 0.0 else np.inf
        if steps >= min_steps:
            break
    bounds[0] = v_min_old
    bounds[1] = v_max_old
    counts[0] = active
    counts[1] = converged
    counts[2] = steps
    counts[3] = updates
    counts[4] = sweeps
    return spread


@numba.njit(nogil=True, cache=True)
def _avsf_schedule(p, index, active, rng, schedule, systematic):
    """Algorithm 4: randomly rounded schedule of the active variable indices, shuffled.

    Over the active set ``A = index[:active]``, index ``i`` appears ``floor(s_i)`` or
    ``floor(s_i) + 1`` times, the latter with probability ``s_i - floor(s_i)``, where
    ``s_i = |A| p_i / sum_{j in A} p_j``, in a uniformly random order.

    ``systematic=False``: independent rounding per index (one uniform each), then a
    Fisher-Yates shuffle; the length varies around ``|A|``.  ``systematic=True``:
    systematic rounding (one uniform offset ``u`` for the whole list; index ``i`` gets
    ``floor(u + S_i) - floor(u + S_{i-1})`` entries with ``S_i`` the running sum of shares,
    which has the same marginal distribution) and an inside-out shuffle while the list is
    written; the length is exactly ``|A|`` (up to float round-off) and it costs one random
    number per entry instead of about two.  ``schedule`` int64 has capacity ``2 n + 1``;
    returns the length ``ell``.
    """
    psum = 0.0
    for s in range(active):
        psum += p[index[s]]
    scale = active / psum
    m = 0
    cap = schedule.shape[0]
    if systematic:
        acc = _uniform01(rng)
        for s in range(active):
            i = index[s]
            acc += p[i] * scale
            k = np.int64(acc)  # acc >= 0: truncation is floor
            acc -= k
            if m + k > cap:  # float guard
                k = cap - m
            for _ in range(k):
                j = _below(rng, m + 1)  # inside-out Fisher-Yates
                schedule[m] = schedule[j]
                schedule[j] = i
                m += 1
        return m
    for s in range(active):
        i = index[s]
        share = p[i] * scale
        k = np.int64(math.floor(share))
        if _uniform01(rng) < share - k:
            k += 1
        if m + k > cap:  # cannot happen for sum(share) = |A|; float guard
            k = cap - m
        for _ in range(k):
            schedule[m] = i
            m += 1
    for s in range(m):
        j = s + _below(rng, m - s)
        t = schedule[s]
        schedule[s] = schedule[j]
        schedule[j] = t
    return m


# Long on purpose: as _uniform_run (inline dot product and update, measured 2x faster than
# helpers on short rows), plus AVSF's schedule and shrinking in the same loop.
@numba.njit(nogil=True, cache=True, fastmath=_FM)
def _avsf_run(X, problem, state, prefs, settings, max_sweeps, min_steps):
    """Outer iterations of AVSF (Algorithm 3 with Algorithms 4 and 5), optionally with
    LIBLINEAR-style shrinking and with the preferences kept across failed stopping checks.

    With ``shrinking = restore = False`` this is the paper's algorithm: every outer
    iteration builds a schedule over all variables from the preferences ``p``, visits it,
    updates ``p_i`` after every step, and after a schedule with spread < ``tol`` either
    stops (if that schedule was uniform, ``canstop``) or resets ``p = 1``.

    ``shrinking``: a variable at a bound whose gradient lies beyond the previous outer
    iteration's extreme projected gradients (``bounds``, the same rule as ``_uniform_run``)
    leaves the active set ``index[:active]`` until the next full check; its remaining
    visits in the current schedule are skipped and cost no step.
    ``restore``: the preferences in force when a full check was started are saved in
    ``p_saved`` and put back if that check sweep fails (instead of restarting from 1).

    Runs outer iterations until the stopping rule holds, ``max_sweeps`` are done, or at
    least ``min_steps`` steps were done in this call.  ``X`` and ``problem = (y, qd, C,
    tol)`` are those of :func:`_uniform_run`.  Updated in place: ``state = (alpha, w,
    index, bounds, counts, rng)`` as in :func:`_uniform_run` (``index`` with the active
    set first) except that ``counts`` int64 (10,) = [first-sweep flag, canstop, converged,
    steps, updates, sweeps, active size, p_saved valid, full checks started (cumulative),
    preference restores (cumulative)], steps/updates/sweeps being this call's totals; and
    the preference state ``prefs = (p, p_saved, inactive, schedule, fstate)``: ``p`` /
    ``p_saved`` (n,) float64, ``inactive`` (n,) uint8 shrunk flags, ``schedule`` (2n+1,)
    int64 work space, ``fstate = [Delta_ref]`` (1,) float64.  ``settings = (p_min, p_max,
    c_rate, shrinking, restore, systematic)``: three floats and three bools.  Returns the
    projected-gradient spread v_max - v_min of the last outer iteration.
    """
    is_sparse, data, indices, indptr, dense = X
    y, qd, C, tol = problem
    alpha, w, index, bounds, counts, rng = state
    p, p_saved, inactive, schedule, fstate = prefs
    p_min, p_max, c_rate, shrinking, restore, systematic = settings
    n = y.shape[0]
    d = dense.shape[1]
    active = counts[6]
    v_min_old = bounds[0]
    v_max_old = bounds[1]
    shrink_factor = math.exp(-c_rate)
    delta_ref = fstate[0]
    steps = 0
    updates = 0
    sweeps = 0
    converged = 0
    spread = np.inf
    while sweeps < max_sweeps:
        ell = _avsf_schedule(p, index, active, rng, schedule, systematic)
        first = counts[0] == 1
        # fading-average weight: a memory of about one outer iteration (= 1/n without
        # shrinking, as in the paper)
        eta = 1.0 / active
        gain_sum = 0.0
        visited = 0
        n_shrunk = 0
        v_min = np.inf
        v_max = -np.inf
        for t in range(ell):
            i = schedule[t]
            if inactive[i]:  # shrunk at an earlier visit in this schedule: no step
                continue
            yi = y[i]
            dot = 0.0
            if is_sparse:
                for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
                    dot += w[np.uint64(indices[k])] * data[k]
            else:
                for j in range(np.uint64(d)):
                    dot += w[j] * dense[i, j]
            g = 1.0 - yi * dot
            steps += 1
            a = alpha[i]
            if a == 0.0:
                if g < v_min_old:  # shrink (thresholds stay -inf/+inf without shrinking)
                    inactive[i] = 1
                    n_shrunk += 1
                    continue
                pg = g if g > 0.0 else 0.0
            elif a == C:
                if g > v_max_old:
                    inactive[i] = 1
                    n_shrunk += 1
                    continue
                pg = g if g < 0.0 else 0.0
            else:
                pg = g
            visited += 1
            if pg > v_max:
                v_max = pg
            if pg < v_min:
                v_min = pg
            q = qd[i]
            mu = 0.0
            if q > 0.0:
                mu = g / q
                if mu < -a:
                    mu = -a
                elif mu > C - a:
                    mu = C - a
            elif g > 0.0:  # empty row: dual linear in alpha_i, go to the bound
                mu = C - a
            if mu != 0.0:
                a_new = a + mu
                if a_new > C:  # clamp float round-off so alpha_i == C is exact at the bound
                    a_new = C
                elif a_new < 0.0:
                    a_new = 0.0
                alpha[i] = a_new
                mu = a_new - a
                step = mu * yi
                if is_sparse:
                    for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
                        w[np.uint64(indices[k])] += step * data[k]
                else:
                    for j in range(np.uint64(d)):
                        w[j] += step * dense[i, j]
                updates += 1
            delta = mu * (g - 0.5 * mu * q)  # gain of the step in the dual objective
            if first:
                gain_sum += delta
            elif delta_ref > 0.0:
                # Algorithm 5: multiplicative preference update, clipped to [p_min, p_max].
                if delta == 0.0:
                    pi = p[i] * shrink_factor  # exp(-c), the common case of a zero step
                else:
                    e = c_rate * (delta / delta_ref - 1.0)
                    if e > 50.0:
                        e = 50.0
                    pi = p[i] * math.exp(e)
                if pi < p_min:
                    pi = p_min
                elif pi > p_max:
                    pi = p_max
                p[i] = pi
                delta_ref = (1.0 - eta) * delta_ref + eta * delta
            else:
                delta_ref = (1.0 - eta) * delta_ref + eta * delta
        sweeps += 1
        if n_shrunk > 0:  # move the shrunk variables behind the active set
            s = 0
            while s < active:
                i = index[s]
                if inactive[i]:
                    active -= 1
                    index[s] = index[active]
                    index[active] = i
                else:
                    s += 1
        if first:
            delta_ref = gain_sum / visited if visited > 0 else 0.0
            counts[0] = 0
        if visited == 0:  # nothing measured (all shrunk): force a full check
            v_min = 0.0
            v_max = 0.0
        spread = v_max - v_min
        if spread < tol:
            if counts[1] == 1 and active == n:
                # this schedule was uniform over all variables: every one was checked
                converged = 1
                break
            # next outer iteration: one uniform sweep over all variables (canstop)
            if restore and counts[1] == 0:
                for i in range(n):
                    p_saved[i] = p[i]
                counts[7] = 1
            for i in range(n):
                p[i] = 1.0
            counts[1] = 1
            counts[8] += 1
            if active < n:
                for s in range(active, n):
                    inactive[index[s]] = 0
                active = n
            v_min_old = -np.inf
            v_max_old = np.inf
        else:
            if counts[1] == 1 and counts[7] == 1:
                # the check failed: continue with the adapted preferences
                for i in range(n):
                    pi = p_saved[i] * p[i]
                    if pi < p_min:
                        pi = p_min
                    elif pi > p_max:
                        pi = p_max
                    p[i] = pi
                counts[7] = 0
                counts[9] += 1
            counts[1] = 0
            if shrinking:
                v_min_old = v_min if v_min < 0.0 else -np.inf
                v_max_old = v_max if v_max > 0.0 else np.inf
        if steps >= min_steps:
            break
    fstate[0] = delta_ref
    bounds[0] = v_min_old
    bounds[1] = v_max_old
    counts[2] = converged
    counts[3] = steps
    counts[4] = updates
    counts[5] = sweeps
    counts[6] = active
    return spread


# --------------------------------------------------------------------------- Python driver


class CDInput(NamedTuple):
    """Training matrix in the kernels' layout (see :func:`as_cd_input`)."""

    is_sparse: bool
    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    dense: np.ndarray
    n_samples: int
    n_features: int

    @property
    def arrays(self):
        """``(is_sparse, data, indices, indptr, dense)``: the matrix as every kernel takes it (one argument)."""
        return self.is_sparse, self.data, self.indices, self.indptr, self.dense


@dataclass
class LinearDualResult:
    """Outcome of one binary :func:`dual_cd` run.

    Attributes
    ----------
    w : ndarray of shape (n_features,), float64
        Primal weight vector ``sum_i alpha_i y_i x_i``.
    alpha : ndarray of shape (n_samples,), float64
        Dual variables in ``[0, C]``.
    n_iter : int
        Outer iterations (sweeps / schedules).
    n_steps : int
        Coordinate steps: gradient evaluations ``g_i`` (each costs one dot product),
        including the ones that shrank a variable or gave a zero step.
    n_updates : int
        Steps with a nonzero change of ``alpha_i`` (each costs one axpy).
    converged : bool
        False when ``max_iter`` was reached before the stopping rule held.
    wall_time : float
        Seconds, from the start of the run (norms included) to the end of the last sweep.
    primal : float
        ``P(w)``.
    dual : float
        ``D(alpha)``.
    final_violation : float
        Projected-gradient spread ``v_max - v_min`` of the last sweep.
    n_checks : int
        Full stopping checks started: for ``"uniform"`` re-activations of the whole set
        after a shrunk sweep met the tolerance, for AVSF uniform sweeps over all variables
        (preferences set to 1, the ``canstop`` re-check).
    n_restores : int
        AVSF with ``restore`` only: failed checks after which the saved preferences were
        put back.
    history : list of dict
        Per outer iteration, only when ``record_history=True``.
    """

    w: np.ndarray
    alpha: np.ndarray
    n_iter: int
    n_steps: int
    n_updates: int
    converged: bool
    wall_time: float
    primal: float
    dual: float
    final_violation: float
    n_checks: int = 0
    n_restores: int = 0
    history: list = field(default_factory=list)


def _plain(a: np.ndarray, dtype) -> np.ndarray:
    """C-contiguous, writeable array of ``dtype`` (read-only arrays would make numba compile
    a second signature)."""
    a = np.ascontiguousarray(a, dtype=dtype)
    return a if a.flags.writeable else a.copy()


def as_cd_input(X) -> CDInput:
    """Convert ``X`` to the kernels' input layout :class:`CDInput`.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
        Any scipy sparse matrix is converted to CSR with summed duplicates (so that the
        squared row norms are right); dense input becomes C-contiguous float64.

    Returns
    -------
    CDInput
        ``is_sparse`` bool; ``data`` (nnz,) float64; ``indices`` (nnz,) int32; ``indptr``
        (n_samples + 1,) int64; ``dense`` (n_samples, n_features) float64 or (0, 0) for
        sparse input; ``n_samples``; ``n_features``.

    Raises
    ------
    ValueError
        If ``n_features`` does not fit int32 indices.
    """
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        if X.shape[1] >= 2**31:
            raise ValueError("n_features must be below 2**31 for int32 column indices")
        if not X.has_canonical_format:
            X = X.copy()
            X.sum_duplicates()
        return CDInput(
            True,
            _plain(X.data, np.float64),
            _plain(X.indices, np.int32),
            _plain(X.indptr, np.int64),
            _EMPTY_2D,
            X.shape[0],
            X.shape[1],
        )
    dense = _plain(X, np.float64)
    if dense.ndim != 2:
        raise ValueError(f"X must be 2-D, got shape {dense.shape}")
    return CDInput(False, _EMPTY_F, _EMPTY_I32, _EMPTY_I64, dense, dense.shape[0], dense.shape[1])


def objectives(inp, y, w, alpha, C) -> tuple[float, float]:
    """Primal and dual objective of the bias-free hinge-loss SVM.

    Parameters
    ----------
    inp : CDInput
        Output of :func:`as_cd_input` for ``X`` of shape (n, d).
    y : ndarray (n,) float64 in {-1, +1}
    w : ndarray (d,) float64
    alpha : ndarray (n,) float64
    C : float

    Returns
    -------
    primal : float
        ``1/2 ||w||^2 + C sum_i max(0, 1 - y_i <w, x_i>)``.
    dual : float
        ``sum_i alpha_i - 1/2 ||w||^2`` (equal to ``D(alpha)`` when ``w = sum alpha_i y_i x_i``).
    """
    m = _margins(w, inp.arrays, y.shape[0])
    dual = float(_dual_value(alpha, w))
    half_ww = float(alpha.sum()) - dual
    primal = half_ww + C * float(np.maximum(0.0, 1.0 - y * m).sum())
    return primal, dual


def decision_values(X, coef: np.ndarray) -> np.ndarray:
    """Decision values ``X @ coef.T``, O(nnz * n_classes) for sparse ``X``.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
    coef : ndarray of shape (n_classes, n_features), float64

    Returns
    -------
    ndarray of shape (n_samples, n_classes), float64
    """
    coef = np.ascontiguousarray(coef, dtype=np.float64)
    if sp.issparse(X):
        _, data, indices, indptr, _ = as_cd_input(X).arrays
        return _csr_decision(data, indices, indptr, coef)
    return np.asarray(X, dtype=np.float64) @ coef.T


def _seed_state(seed: int) -> np.ndarray:
    """splitmix64 of ``seed`` as a nonzero xorshift64* state (uint64 array of length 1)."""
    z = (int(seed) + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    z ^= z >> 31
    return np.array([z or 0x2545F4914F6CDD1D], dtype=np.uint64)


def dual_cd(
    X,
    y,
    C: float = 1.0,
    tol: float = 0.1,
    max_iter: int = 1000,
    selection: str = "uniform",
    seed: int = 0,
    *,
    progress: Callable[[dict], Any] | None = None,
    should_stop: Callable[[], bool] | None = None,
    max_steps: int | None = None,
    record_history: bool = False,
    p_min: float = AVSF_P_MIN,
    p_max: float = AVSF_P_MAX,
    c_rate: float = AVSF_C,
    avsf_shrinking: bool | None = None,
    avsf_restore: bool | None = None,
    avsf_systematic: bool | None = None,
) -> LinearDualResult:
    """Train a bias-free linear hinge-loss SVM by dual coordinate descent.

    ``selection="uniform"`` is the paper's Algorithm 2 (LIBLINEAR's dual CD with shrinking,
    Hsieh et al. 2008, Algorithm 3); ``selection="avsf-paper"`` is Algorithm 3 of
    Glasmachers & Dogan (arXiv:1302.5608) with the schedule of Algorithm 4 and the
    preference update of Algorithm 5, as published; ``selection="avsf"`` (the recommended
    variant) is the same with LIBLINEAR's shrinking of variables stuck at a bound
    (``docs/avsf.md`` documents the departure and its measured effect).  The numba kernels release the
    GIL.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features), or the :class:`CDInput`
        returned by :func:`as_cd_input` (to convert once and train several problems).
    y : array-like of shape (n_samples,)
        Labels; positive values are the +1 class, all others -1.
    C : float > 0
        Upper bound of the dual variables (hinge-loss weight).
    tol : float > 0
        Stopping tolerance ``epsilon`` on the projected-gradient spread ``v_max - v_min``.
    max_iter : int >= 1
        Maximum number of outer iterations (sweeps over the active set for ``"uniform"``,
        schedules of about one step per active variable for the AVSF variants).
    selection : {"uniform", "avsf", "avsf-paper"}
    seed : int
        Seed of the solver's own xorshift64* generator (the run is reproducible).
    progress : callable(dict), optional
        Called after every kernel call with keys ``iteration`` (outer iterations so far),
        ``n_steps``, ``n_updates``, ``violation`` (spread of the last sweep), ``dual``,
        ``elapsed`` (seconds), ``selection``.
    should_stop : callable() -> bool, optional
        Checked before every kernel call; if it returns true, :class:`Cancelled` is raised.
        A kernel call is one outer iteration for ``"avsf-paper"``, and for ``"uniform"`` /
        ``"avsf"`` while the active set is full; once shrinking has made sweeps small, one
        call runs consecutive sweeps until at least ``n_samples`` steps are done, so the
        check happens at least once per full sweep's worth of work (and the Python round
        trip, ~10 us, does not dominate sweeps over a few active variables).
    max_steps : int, optional
        Step budget: no further kernel call starts once ``n_steps >= max_steps`` (the last
        call may overshoot by at most one outer iteration or ``n_samples`` steps); the run
        then ends with ``converged=False`` like a ``max_iter`` stop.
    record_history : bool
        Store the progress dicts in ``result.history``.
    p_min, p_max, c_rate : float
        AVSF preference bounds and change rate (defaults 1/20, 20, 1/5 from the paper).
    avsf_shrinking, avsf_restore, avsf_systematic : bool, optional
        Ablation switches of the AVSF kernel (ignored for ``"uniform"``): LIBLINEAR-style
        shrinking (default: on for ``"avsf"``, off for ``"avsf-paper"``); keeping the
        adapted preferences after a failed full stopping check (default off: measured
        to cost steps, see ``docs/avsf.md``); systematic instead of independent rounding
        in Algorithm 4 (default off: no measurable gain).

    Returns
    -------
    LinearDualResult

    Raises
    ------
    ValueError
        On invalid ``C``, ``tol``, ``max_iter``, ``selection``, or mismatched shapes.
    Cancelled
        When ``should_stop()`` returns true.
    """
    if selection not in _SELECTIONS:
        raise ValueError(f"selection must be one of {_SELECTIONS}, got {selection!r}")
    if not (C > 0 and np.isfinite(C)):
        raise ValueError(f"C must be a positive finite number, got {C!r}")
    if not (tol > 0):
        raise ValueError(f"tol must be positive, got {tol!r}")
    if int(max_iter) < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter!r}")
    if not (0 < p_min <= 1 <= p_max):
        raise ValueError("need 0 < p_min <= 1 <= p_max")
    inp = X if isinstance(X, CDInput) else as_cd_input(X)
    n, d = inp.n_samples, inp.n_features
    y = np.asarray(y)
    if y.shape != (n,):
        raise ValueError(f"y must have shape ({n},), got {y.shape}")
    y = np.where(y > 0, 1.0, -1.0)
    C = float(C)
    tol = float(tol)
    rng = _seed_state(seed)
    min_steps = max(n, 1)  # work per kernel call for "uniform" (see should_stop)

    t0 = time.perf_counter()
    qd = _row_sq_norms(inp.arrays, n)
    alpha = np.zeros(n, dtype=np.float64)
    w = np.zeros(d, dtype=np.float64)
    if selection == "uniform":
        index = np.arange(n, dtype=np.int64)
        bounds = np.array([-np.inf, np.inf])
        counts = np.array([n, 0, 0, 0, 0, 0], dtype=np.int64)
    else:
        paper = selection == "avsf-paper"
        shrinking = (not paper) if avsf_shrinking is None else bool(avsf_shrinking)
        restore = False if avsf_restore is None else bool(avsf_restore)
        systematic = False if avsf_systematic is None else bool(avsf_systematic)
        p = np.ones(n, dtype=np.float64)
        p_saved = np.ones(n, dtype=np.float64)
        index = np.arange(n, dtype=np.int64)
        inactive = np.zeros(n, dtype=np.uint8)
        schedule = np.empty(2 * n + 1, dtype=np.int64)
        fstate = np.zeros(1, dtype=np.float64)
        bounds = np.array([-np.inf, np.inf])
        counts = np.array([1, 1, 0, 0, 0, 0, n, 0, 0, 0], dtype=np.int64)
        # one outer iteration per call without shrinking (each is ~n steps anyway)
        avsf_min_steps = min_steps if shrinking else 1
        prefs = (p, p_saved, inactive, schedule, fstate)
        settings = (p_min, p_max, c_rate, shrinking, restore, systematic)
    # the problem and the run state as the kernels take them (see _uniform_run)
    problem = (y, qd, C, tol)
    state = (alpha, w, index, bounds, counts, rng)

    n_iter = n_steps = n_updates = 0
    n_checks = n_restores = 0
    converged = False
    spread = np.inf
    history: list = []
    max_iter = int(max_iter)
    while n_iter < max_iter and (max_steps is None or n_steps < max_steps):
        if should_stop is not None and should_stop():
            raise Cancelled(f"cancelled after {n_iter} outer iterations", n_iter=n_iter, n_steps=n_steps)
        if selection == "uniform":
            spread = _uniform_run(inp.arrays, problem, state, max_iter - n_iter, min_steps)
            n_steps += int(counts[2])
            n_updates += int(counts[3])
            n_iter += int(counts[4])
            converged = bool(counts[1])
            n_checks = int(counts[5])
        else:
            spread = _avsf_run(inp.arrays, problem, state, prefs, settings, max_iter - n_iter, avsf_min_steps)
            n_steps += int(counts[3])
            n_updates += int(counts[4])
            n_iter += int(counts[5])
            converged = bool(counts[2])
            n_checks, n_restores = int(counts[8]), int(counts[9])
        if progress is not None or record_history:
            info = {
                "selection": selection,
                "iteration": n_iter,
                "n_steps": n_steps,
                "n_updates": n_updates,
                "violation": float(spread),
                "dual": float(_dual_value(alpha, w)),
                "elapsed": time.perf_counter() - t0,
            }
            if record_history:
                history.append(info)
            if progress is not None:
                progress(dict(info))
        if converged:
            break
    wall = time.perf_counter() - t0
    primal, dual = objectives(inp, y, w, alpha, C)
    return LinearDualResult(
        w=w,
        alpha=alpha,
        n_iter=n_iter,
        n_steps=n_steps,
        n_updates=n_updates,
        converged=converged,
        wall_time=wall,
        primal=primal,
        dual=dual,
        final_violation=float(spread),
        n_checks=n_checks,
        n_restores=n_restores,
        history=history,
    )
