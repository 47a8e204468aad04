"""The column cache and shrinking of the exact dual CD (:mod:`._dual_cd`): numba kernels.

* an LRU cache of kernel columns in one float32 buffer (columns hold the active positions
  only; when the active set halves the buffer is re-sliced into more, shorter columns);
* shrinking (Joachims 1999; Fan, Chen & Lin 2005 §3, as LIBSVM/LIBLINEAR): variables at a bound
  whose gradient points outwards by more than the current maximal violation leave the active
  prefix ``[0, L)`` of the working arrays.

The integer state ``ist`` is shared with the main loops; its slots are named here.
"""

from __future__ import annotations

import numba
import numpy as np

from ._kernels import kernel_column_into

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


# size: one numba kernel, the stable in-place partition of every per-variable array and the cache
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
