"""The numba kernels of the linear dual CD and AVSF (:mod:`._cd` is their Python driver).

Per-example loops on preallocated arrays (``nogil``, cached): the solver's own xorshift64*
generator, row norms, margins and the dual value, CSR decisions, LIBLINEAR's sweeps
(:func:`_uniform_run`), AVSF's schedule (:func:`_avsf_schedule`) and its sweeps
(:func:`_avsf_run`).  Input layout as in :mod:`._cd`: ``X = (is_sparse, data, indices,
indptr, dense)``.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ._cd_rng import _below, _uniform01

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
# size: one numba kernel, LIBLINEAR's outer iterations with inline dot products
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
# size: one numba kernel, AVSF's outer iterations, schedule and shrinking in one loop
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
