"""The support-vector pool of a budgeted RBF model, dense or sparse, behind one set of primitives.

A budgeted model keeps its SVs in a *pool*; every budget-maintenance and step kernel
(:mod:`._bsgd`, :mod:`._bsca`, :mod:`._merging`, :mod:`._projection`, :mod:`._decision`) is
written once against the primitives below and compiled by numba separately for each pool type,
so the dense path keeps its machine code (no per-example branch) and the sparse path is its
own specialisation (docs/defaults.md, sparse support vectors):

* **dense pool**: ``sv_t`` (d, B+1) float64, SVs as columns (:mod:`svmstream.solvers.kernels`);
* **sparse pool**: the tuple ``(sv_data, sv_idx, sv_start, sv_len, sv_used, scratch)`` —
  an **append-only arena** ``sv_data`` float64 / ``sv_idx`` int32 (the SVs' nonzeros, sorted
  indices per SV), per slot ``sv_start``/``sv_len`` int64 (B+1,), the fill mark ``sv_used``
  int64 (1,), and ``scratch`` (d,) float64, all zeros at rest.  A new SV or a merged z is
  appended at ``sv_used`` and its slot points there; removal moves a slot's (start, len).
  Entries below ``sv_used`` are never written again: published read-only copies of a model
  share the arena arrays (``_publish.py``).  When a step could overrun the arena the step
  kernel stops early (:func:`pool_room`) and the caller compacts the live SVs into a new,
  larger arena (:func:`grow_arena`); the old arrays are left untouched.

Inputs come as a dense (n, d) matrix (dense pool) or CSR arrays ``(data, indices, indptr)``
with sorted indices (sparse pool).  A sparse input row is scattered into ``scratch`` (reset
after the row), so a kernel row costs O(nnz of the pool) and the dot products add the same
nonzero products in the same (increasing feature) order as the dense sweep of
:func:`svmstream.solvers.kernels.sv_dot_products`: both storages give the same model
(``tests/test_sparse_svs.py``, 1e-9).  Merging writes z = h·x_min + (1 − h)·x as the union of
the two supports, with the dense path's expression per feature.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba import types
from numba.extending import overload

from .._params import SV_STORAGES, check_choice
from ..kernels import exp_inplace, rbf_row, rbf_row_and_log, squared_norm
from ._preprocessing import (
    BUFFER_MAX_BYTES,
    GUARD_RESERVOIR,
    SPARSE_GUARD_MAX_BYTES,
    wide_sparse,
)
from ._sparse_rows import SPARSE_ENTRY_BYTES

#: Bytes of one stored nonzero (float64 value + int32 index).
ENTRY_BYTES = SPARSE_ENTRY_BYTES
#: :func:`sparse_model_bytes` counts this many nonzeros per sparse SV on average (merged SVs hold
#: the union of their parents' supports: after one pass at B = 500 reuters held 88 per SV, the
#: largest 2,596; sector 608, the largest 29,504 — ``docs/defaults.md``).
SV_NNZ_BOUND = 2048
#: A new arena holds at least this many entries.
MIN_ARENA = 1024


def _is_sparse(pool):
    return isinstance(pool, types.BaseTuple)


# ------------------------------------------------------------------------------ stubs
# Pure-Python names that numba resolves through the overloads below (by the pool's type).
def pool_row(pool, x, x_sq, sv_sq, n_sv, gamma, out):
    """``out[j] = k(x, sv_j)`` for ``j < n_sv``; x dense (d,) (a scattered row for a sparse pool)."""
    raise NotImplementedError("numba only")


def pool_row_log(pool, x, x_sq, sv_sq, n_sv, gamma, out, log_out):
    """:func:`pool_row` that also keeps ``log_out[j] = −γ‖x − sv_j‖²``."""
    raise NotImplementedError("numba only")


def pool_load(pool, j, buf):
    """SV ``j`` into the dense (d,) ``buf`` (a sparse pool scatters: ``buf`` must be zero)."""
    raise NotImplementedError("numba only")


def pool_unload(pool, j, buf):
    """Undo :func:`pool_load` for a sparse pool (zero ``buf`` on SV ``j``'s support); dense: nothing."""
    raise NotImplementedError("numba only")


def pool_move(pool, src, dst):
    """Slot ``dst`` takes slot ``src``'s vector (removal by moving the last slot)."""
    raise NotImplementedError("numba only")


def pool_append(pool, slot, X, i, x):
    """Slot ``slot`` takes input row ``i`` (``x``: that row dense, as :func:`row_open` gave it)."""
    raise NotImplementedError("numba only")


def pool_place_merged(pool, sv_sq, x_min, i_min, j, h):
    """Slot ``j`` takes z = h·sv_{i_min} + (1 − h)·sv_j (``x_min``: sv_{i_min} loaded dense); ‖z‖² cached."""
    raise NotImplementedError("numba only")


def pool_room(pool, X, i, n_sv):
    """True if one step on row ``i`` (an append and a merge) fits the arena; dense: always."""
    raise NotImplementedError("numba only")


def row_open(X, i, pool):
    """``(x, ‖x‖²)`` of input row ``i`` as a dense (d,) vector (sparse: scattered into the pool's scratch)."""
    raise NotImplementedError("numba only")


def row_close(X, i, pool):
    """Reset the scratch :func:`row_open` filled (sparse input); dense: nothing."""
    raise NotImplementedError("numba only")


# ------------------------------------------------------------------------------ kernel rows
@nb.njit(nogil=True, cache=True, inline="always")
def _sparse_rbf(data, idx, start, length, x, x_sq, sv_sq, n_sv, gamma, out):
    """``out[j] = −γ·max(0, ‖x‖² + ‖sv_j‖² − 2⟨x, sv_j⟩)`` from sparse SVs against dense x."""
    for j in range(n_sv):
        s = start[j]
        acc = 0.0
        for k in range(s, s + length[j]):
            acc += data[k] * x[idx[k]]
        dist = x_sq + sv_sq[j] - 2.0 * acc
        out[j] = -gamma * (dist if dist > 0.0 else 0.0)


@overload(pool_row)
def _ol_pool_row(pool, x, x_sq, sv_sq, n_sv, gamma, out):
    if _is_sparse(pool):

        def impl(pool, x, x_sq, sv_sq, n_sv, gamma, out):
            _sparse_rbf(pool[0], pool[1], pool[2], pool[3], x, x_sq, sv_sq, n_sv, gamma, out)
            exp_inplace(out, n_sv)

        return impl

    def impl(pool, x, x_sq, sv_sq, n_sv, gamma, out):
        rbf_row(x, x_sq, pool, sv_sq, n_sv, gamma, out)

    return impl


@overload(pool_row_log)
def _ol_pool_row_log(pool, x, x_sq, sv_sq, n_sv, gamma, out, log_out):
    if _is_sparse(pool):

        def impl(pool, x, x_sq, sv_sq, n_sv, gamma, out, log_out):
            _sparse_rbf(pool[0], pool[1], pool[2], pool[3], x, x_sq, sv_sq, n_sv, gamma, out)
            for j in range(n_sv):
                log_out[j] = out[j]
            exp_inplace(out, n_sv)

        return impl

    def impl(pool, x, x_sq, sv_sq, n_sv, gamma, out, log_out):
        rbf_row_and_log(x, x_sq, pool, sv_sq, n_sv, gamma, out, log_out)

    return impl


# ------------------------------------------------------------------------------ slots
@overload(pool_load)
def _ol_pool_load(pool, j, buf):
    if _is_sparse(pool):

        def impl(pool, j, buf):
            data, idx, s = pool[0], pool[1], pool[2][j]
            for k in range(s, s + pool[3][j]):
                buf[idx[k]] = data[k]

        return impl

    def impl(pool, j, buf):
        for k in range(pool.shape[0]):
            buf[k] = pool[k, j]

    return impl


@overload(pool_unload)
def _ol_pool_unload(pool, j, buf):
    if _is_sparse(pool):

        def impl(pool, j, buf):
            idx, s = pool[1], pool[2][j]
            for k in range(s, s + pool[3][j]):
                buf[idx[k]] = 0.0

        return impl

    def impl(pool, j, buf):
        pass

    return impl


@overload(pool_move)
def _ol_pool_move(pool, src, dst):
    if _is_sparse(pool):

        def impl(pool, src, dst):
            pool[2][dst] = pool[2][src]
            pool[3][dst] = pool[3][src]

        return impl

    def impl(pool, src, dst):
        for k in range(pool.shape[0]):
            pool[k, dst] = pool[k, src]

    return impl


@overload(pool_append)
def _ol_pool_append(pool, slot, X, i, x):
    if _is_sparse(pool):

        def impl(pool, slot, X, i, x):
            data, idx, used = pool[0], pool[1], pool[4]
            x_data, x_idx, indptr = X[0], X[1], X[2]
            at = used[0]
            n = indptr[i + 1] - indptr[i]
            for k in range(n):
                data[at + k] = x_data[indptr[i] + k]
                idx[at + k] = x_idx[indptr[i] + k]
            pool[2][slot] = at
            pool[3][slot] = n
            used[0] = at + n

        return impl

    def impl(pool, slot, X, i, x):
        for k in range(x.shape[0]):
            pool[k, slot] = x[k]

    return impl


@overload(pool_place_merged)
def _ol_pool_place_merged(pool, sv_sq, x_min, i_min, j, h):
    if _is_sparse(pool):

        def impl(pool, sv_sq, x_min, i_min, j, h):
            data, idx, start, length, used = pool[0], pool[1], pool[2], pool[3], pool[4]
            a, a_end = start[i_min], start[i_min] + length[i_min]
            b, b_end = start[j], start[j] + length[j]
            at = used[0]
            out = at
            z_sq = 0.0
            g = 1.0 - h
            # the union of the two sorted supports; z_k as the dense path computes it
            while a < a_end or b < b_end:
                if b >= b_end or (a < a_end and idx[a] < idx[b]):
                    k, zk = idx[a], h * data[a] + g * 0.0
                    a += 1
                elif a >= a_end or idx[b] < idx[a]:
                    k, zk = idx[b], h * 0.0 + g * data[b]
                    b += 1
                else:
                    k, zk = idx[a], h * data[a] + g * data[b]
                    a += 1
                    b += 1
                z_sq += zk * zk
                if zk != 0.0:
                    data[out] = zk
                    idx[out] = k
                    out += 1
            start[j] = at
            length[j] = out - at
            used[0] = out
            sv_sq[j] = z_sq

        return impl

    def impl(pool, sv_sq, x_min, i_min, j, h):
        z_sq = 0.0
        for k in range(pool.shape[0]):
            zk = h * x_min[k] + (1.0 - h) * pool[k, j]
            pool[k, j] = zk
            z_sq += zk * zk
        sv_sq[j] = z_sq

    return impl


@overload(pool_room)
def _ol_pool_room(pool, X, i, n_sv):
    if _is_sparse(pool):

        def impl(pool, X, i, n_sv):
            nnz = X[2][i + 1] - X[2][i]
            longest = nnz
            length = pool[3]
            for j in range(n_sv):
                if length[j] > longest:
                    longest = length[j]
            # the row itself, then at most one merge of two SVs
            return pool[4][0] + nnz + 2 * longest <= pool[0].shape[0]

        return impl

    def impl(pool, X, i, n_sv):
        return True

    return impl


# ------------------------------------------------------------------------------ input rows
@overload(row_open)
def _ol_row_open(X, i, pool):
    if isinstance(X, types.BaseTuple):

        def impl(X, i, pool):
            data, idx, indptr, scratch = X[0], X[1], X[2], pool[5]
            x_sq = 0.0
            for k in range(indptr[i], indptr[i + 1]):
                v = data[k]
                scratch[idx[k]] = v
                x_sq += v * v
            return scratch, x_sq

        return impl

    def impl(X, i, pool):
        x = X[i]
        return x, squared_norm(x)

    return impl


@overload(row_close)
def _ol_row_close(X, i, pool):
    if isinstance(X, types.BaseTuple):

        def impl(X, i, pool):
            idx, indptr, scratch = X[1], X[2], pool[5]
            for k in range(indptr[i], indptr[i + 1]):
                scratch[idx[k]] = 0.0

        return impl

    def impl(X, i, pool):
        pass

    return impl


# ------------------------------------------------------------------------------ the arena (Python side)
@nb.njit(nogil=True, cache=True)
def _compact(data, idx, start, length, n_sv, new_data, new_idx):
    """Copy the live SVs' entries into the new arena, slot by slot; returns its fill mark."""
    at = 0
    for j in range(n_sv):
        s = start[j]
        n = length[j]
        for k in range(n):
            new_data[at + k] = data[s + k]
            new_idx[at + k] = idx[s + k]
        start[j] = at
        at += n
    return at


def new_arena(entries: int) -> tuple[np.ndarray, np.ndarray]:
    """An empty arena of ``entries`` nonzeros: ``(sv_data float64, sv_idx int32)``."""
    entries = max(MIN_ARENA, int(entries))
    return np.zeros(entries, dtype=np.float64), np.zeros(entries, dtype=np.int32)


def live_entries(sv_len, n_sv: int) -> int:
    """Nonzeros of the live SVs."""
    return int(sv_len[:n_sv].sum())


def grow_arena(sv_data, sv_idx, sv_start, sv_len, sv_used, n_sv: int, room: int):
    """A new arena holding the live SVs compacted plus room for ``room`` more entries (2 × live
    + room + :data:`MIN_ARENA`); ``sv_start`` and ``sv_used`` are updated in place, the old
    arrays are not written.  Returns ``(new_data, new_idx)``."""
    live = live_entries(sv_len, n_sv)
    new_data, new_idx = new_arena(2 * live + int(room) + MIN_ARENA)
    sv_used[0] = _compact(sv_data, sv_idx, sv_start, sv_len, int(n_sv), new_data, new_idx)
    return new_data, new_idx


def step_room(indptr, n_sv: int, sv_len) -> int:
    """Arena entries one step on the longest row of ``indptr`` may append (:func:`pool_room`'s bound)."""
    nnz = int(np.diff(indptr).max()) if indptr.shape[0] > 1 else 0
    longest = max(nnz, int(sv_len[:n_sv].max()) if n_sv else 0)
    return nnz + 2 * longest


def run_with_room(step, X_csr, order, margins, arena):
    """Run ``step(order_part, margins_part, pool) -> steps done`` over ``order``, giving the
    sparse pool a larger arena whenever the kernel stops for room.

    ``arena`` is an object with the attributes ``_sv_data``, ``_sv_idx``, ``_sv_start``,
    ``_sv_len``, ``_sv_used``, ``_sv_scratch`` and ``n_support_vectors_`` (the estimator)."""
    done = 0
    m = order.shape[0]
    while True:
        pool = (
            arena._sv_data,
            arena._sv_idx,
            arena._sv_start,
            arena._sv_len,
            arena._sv_used,
            arena._sv_scratch,
        )
        done += int(step(order[done:], margins[done:], pool))
        if done >= m:
            return
        n_sv = arena.n_support_vectors_
        room = step_room(X_csr[2], n_sv, arena._sv_len)
        arena._sv_data, arena._sv_idx = grow_arena(
            arena._sv_data, arena._sv_idx, arena._sv_start, arena._sv_len, arena._sv_used, n_sv, room
        )


# ------------------------------------------------------------------------------ the policy
def auto_is_sparse(X) -> bool:
    """The ``sv_storage="auto"`` rule: X is CSR, wide (d > :data:`SPARSE_MIN_FEATURES`) and sparse
    (density ≤ :data:`SPARSE_MAX_DENSITY`)."""
    return wide_sparse(X)


def resolve_sv_storage(sv_storage, X, scaling) -> str:
    """``sv_storage_`` of a model whose first input is X: "dense" or "sparse".

    "auto" is "sparse" when :func:`auto_is_sparse` and the scaling keeps zeros (not
    ``"standard"``), else "dense".

    Raises
    ------
    ValueError
        Naming ``sv_storage`` for an unknown value, or "sparse" with ``scaling="standard"``.
    """
    check_choice("sv_storage", sv_storage, SV_STORAGES)
    if sv_storage == "sparse" and scaling == "standard":
        raise ValueError(
            "sv_storage='sparse' needs a scaling that keeps zeros (scaling 'auto', 'maxabs' or 'none'), "
            "got scaling='standard'"
        )
    if sv_storage != "auto":
        return sv_storage
    return "sparse" if scaling != "standard" and auto_is_sparse(X) else "dense"


def sparse_model_bytes(
    budget, n_features, shuffle_buffer=0, run_guard=False, n_classes=2, maintenance="merge"
):
    """Bytes of a sparse-storage model (an estimate made before any allocation): the arena at
    3 × (B + 1) SVs of min(d, :data:`SV_NNZ_BOUND`) entries × 12 bytes (live SVs, and the room
    :func:`grow_arena` keeps), the slot arrays, three (d,) scatter vectors, K⁻¹ for projection, and
    the shuffle buffer and guard of sparse rows at their byte bounds (64 MiB, 16 MiB) × 2 for their
    arena's free half."""
    d = max(1, int(n_features))
    cap = int(budget) + 1
    n_cols = 1 if n_classes == 2 else int(n_classes)
    total = 3 * cap * min(d, SV_NNZ_BOUND) * ENTRY_BYTES + cap * 8 * (4 + n_cols) + 3 * d * 8
    k_buf = max(0, int(shuffle_buffer))
    total += 2 * min(BUFFER_MAX_BYTES, k_buf * d * ENTRY_BYTES) + 24 * k_buf
    if run_guard:
        rows = GUARD_RESERVOIR * int(n_classes)
        total += 2 * min(SPARSE_GUARD_MAX_BYTES, rows * d * ENTRY_BYTES) + 16 * rows
    if maintenance == "project":
        total += cap * cap * 8
    return int(total)
