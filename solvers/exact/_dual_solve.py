"""The driver of the exact dual CD: :func:`solve_dual` runs the numba loops of
:mod:`._dual_cd` in slices of bounded time, so that a job runner gets ``progress(dict)``
reports and can cancel through ``should_stop()`` (raising :class:`Cancelled`) within a
fraction of a second; :func:`solve_many` solves DC-SVM's sub-problems one after the other.

Its phases: the checked problem (:func:`_checked`), the gradient at the warm start
(:func:`_start_gradient`), the working arrays and column cache in position order with the
exact float64 refresh of the gradient (:class:`_Workspace`), the slices (:func:`_iterate`)
and the result in input order (:meth:`_Workspace.result`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..exceptions import Cancelled
from ._dual_cd import _cd_run, _cd_run_wss2, _max_violation
from ._dual_cd_cache import (
    _CAP,
    _HIT,
    _ITERS,
    _KEVALS,
    _L,
    _MISS,
    _N,
    _PAIRS,
    _SCANNED,
    _SHRINK_CNT,
    _SHRINK_EVERY,
    BUDGET,
    STALLED,
    _cache_reset,
    _shrink,
)
from ._kernels import KernelData, KernelSpec, kernel_matvec, with_single_thread_blas

__all__ = ["Cancelled", "KernelDualResult", "dual_objective", "exact_gradient", "solve_dual", "solve_many"]


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
def _checked(kd: KernelData, y, C, alpha0, selection):
    """``(y, Cb, alpha)``: labels (n,) float64, the box (n,) and the warm start clipped into
    it (zeros if None).  Raises ValueError as :func:`solve_dual`."""
    if selection not in ("wss2", "greedy"):
        raise ValueError(f"selection must be 'wss2' or 'greedy', got {selection!r}")
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
    return y, Cb, alpha


def _start_gradient(kd: KernelData, y, spec: KernelSpec, alpha, grad0):
    """The exact gradient ``Q alpha - 1`` at the warm start (rows of ``grad0`` taken as given)."""
    n = kd.n_samples
    if not np.any(alpha > 0):
        return -np.ones(n)
    if grad0 is None:
        return exact_gradient(kd, y, spec, alpha)
    rows0, vals0 = grad0
    rows0 = np.asarray(rows0, dtype=np.int64)
    G = np.empty(n)
    G[rows0] = np.asarray(vals0, dtype=np.float64)
    rest = np.ones(n, dtype=bool)
    rest[rows0] = False
    rest = np.flatnonzero(rest)
    G[rest] = exact_gradient(kd, y, spec, alpha, rows=rest)
    return G


class _Workspace:
    """The solver's state in position order (``perm`` maps positions to input rows; the
    active prefix ``[0, ist[_L])``), the kernel problem and the LRU column cache as the numba
    kernels take them, and the last exact gradient (input order) with the alpha it belongs to:
    a refresh only adds the kernel columns of the variables that changed since."""

    def __init__(self, kd, y, spec, Cb, alpha, G, cache_mb, shrinking, timing):
        n = kd.n_samples
        self.kd, self.y, self.spec, self.Cb, self.n = kd, y, spec, Cb, n
        self.alpha, self.G, self.shrinking, self.timing = alpha, G, shrinking, timing
        self.ref_alpha, self.ref_G = alpha.copy(), G.copy()
        kid, gamma, coef0, degree, offset = spec.params
        self.qd = kd.diag(spec)
        self.perm = np.arange(n, dtype=np.int64)
        Xw = kd.dense.copy() if not kd.is_sparse else np.zeros((0, 0))
        sqw = kd.sqnorm.copy()
        yw = y.copy()
        scatter = np.zeros(kd.n_features if kd.is_sparse else 0)
        self.work = np.empty(n)
        self.fst = np.zeros(4)
        ist = self.ist = np.zeros(16, dtype=np.int64)
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
        self.problem = (
            yw,
            Xw,
            sqw,
            kd.data,
            kd.indices,
            kd.indptr,
            scatter,
            kid,
            gamma,
            coef0,
            degree,
            offset,
        )
        self.cache = (buf, key_slot, slot_key, slot_valid, lru_prev, lru_next, free_stack)

    def shrink(self):
        """Shrink at the current maximal violation (every qualifying variable)."""
        M = _max_violation(self.n, self.alpha, self.G, self.Cb)
        _shrink(M, 0.0, self.ist, self.perm, self.alpha, self.G, self.Cb, self.qd, self.problem, self.cache)

    def refresh(self):
        """Exact float64 gradient for every position; re-activate everything."""
        tr0 = time.process_time()
        kd, y, spec, n, timing = self.kd, self.y, self.spec, self.n, self.timing
        alpha_orig = np.empty(n)
        alpha_orig[self.perm] = self.alpha
        delta = alpha_orig - self.ref_alpha
        changed = np.flatnonzero(delta)
        if changed.size <= np.count_nonzero(alpha_orig > 0):
            g_orig = self.ref_G + y * kernel_matvec(kd, kd, spec, delta[changed] * y[changed], cols=changed)
            timing["refresh_kernel_evals"] += n * changed.size
        else:
            g_orig = exact_gradient(kd, y, spec, alpha_orig)
            timing["refresh_kernel_evals"] += n * int(np.count_nonzero(alpha_orig > 0))
        self.ref_alpha[:] = alpha_orig
        self.ref_G[:] = g_orig
        self.G[:] = g_orig[self.perm]
        if self.ist[_L] < n:
            self.ist[_L] = n
            _cache_reset(self.ist, n, *self.cache[1:])
        if self.shrinking:
            self.shrink()  # LIBSVM shrinks again right after a reconstruction
        timing["refresh_cpu_s"] += time.process_time() - tr0

    def run(self, eps, eps_shrunk, max_steps, wss2, pairs):
        """One slice of at most ``max_steps`` steps; returns the loop's status."""
        args = (self.ist, self.fst, self.perm, self.alpha, self.G, self.Cb, self.qd, self.problem, self.cache)
        args = (*args, self.work, eps, eps_shrunk, max_steps, self.shrinking)
        return _cd_run_wss2(*args) if wss2 else _cd_run(*args, pairs)

    def result(self, C, eps, t0, n_refresh) -> KernelDualResult:
        """The solution in input order, its exact violation and the counters."""
        n, ist = self.n, self.ist
        alpha_out = np.empty(n)
        alpha_out[self.perm] = self.alpha
        g_out = np.empty(n)
        g_out[self.perm] = self.G
        viol = float(
            _max_violation(n, alpha_out, g_out, np.broadcast_to(np.asarray(C, dtype=np.float64), (n,)).copy())
        )
        return KernelDualResult(
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
                **self.timing,
            },
        )


def _iterate(ws: _Workspace, eps, max_iter, wss2, pairs, t0, watch):
    """Slices of about 0.1 s until convergence (nothing moved since an exact refresh), the
    step budget or a stall; ``watch = (progress, should_stop, report_interval, info)``.
    Returns ``(converged, refreshes)``; raises Cancelled when ``should_stop()`` is true."""
    progress, should_stop, report_interval, info = watch
    ist = ws.ist
    steps = 256
    n_refresh = 0
    iters_at_refresh = -1
    unshrunk = not ws.shrinking
    last_report = t0
    while True:
        if should_stop is not None and should_stop():
            raise Cancelled("dual CD cancelled")
        # a shrunk active set converges at 10 eps first (LIBSVM), then all variables at eps
        eps_shrunk = eps if unshrunk else 10.0 * eps
        remaining = max_iter - int(ist[_ITERS])
        if remaining <= 0:
            return False, n_refresh
        ts = time.perf_counter()
        status = ws.run(eps, eps_shrunk, min(steps, remaining), wss2, pairs)
        dt = time.perf_counter() - ts
        if status == BUDGET:
            # aim at ~0.1 s per slice so that cancellation is prompt
            steps = int(min(max(steps * (0.1 / max(dt, 1e-4)), 16), 1_000_000))
        else:
            if ist[_L] < ws.n:
                unshrunk = True
            if int(ist[_ITERS]) == iters_at_refresh:
                # nothing moved since the exact refresh: every variable satisfies the test
                return True, n_refresh
            ws.refresh()
            n_refresh += 1
            iters_at_refresh = int(ist[_ITERS])
            if status == STALLED and n_refresh > 50:
                return False, n_refresh
        now = time.perf_counter()
        if progress is not None and now - last_report >= report_interval:
            last_report = now
            progress(
                {
                    **info,
                    "iterations": int(ist[_ITERS]),
                    "objective": dual_objective(ws.alpha, ws.G),
                    "max_violation": float(ws.fst[0]),
                    "active": int(ist[_L]),
                    "elapsed": now - t0,
                }
            )


@with_single_thread_blas
def solve_dual(
    kd: KernelData, y, spec: KernelSpec, C, alpha0=None, *, eps: float = 1e-3, cache_mb: float = 200.0,
    shrinking: bool = True, pairs: bool = True, selection: str = "wss2", grad0=None, max_iter: int | None = None,
    progress=None, should_stop=None, report_interval: float = 0.5, info: dict | None = None,
) -> KernelDualResult:  # fmt: skip
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
    y, Cb, alpha = _checked(kd, y, C, alpha0, selection)
    n, info = kd.n_samples, dict(info or {})
    max_iter = max(10_000_000, 100 * n) if max_iter is None else max_iter
    if n == 0:
        return KernelDualResult(alpha, np.zeros(0), 0.0, 0.0, 0, True, 0.0)
    warm, tg0 = bool(np.any(alpha > 0)), time.process_time()
    G = _start_gradient(kd, y, spec, alpha, grad0)
    timing = {"gradient_cpu_s": time.process_time() - tg0, "refresh_cpu_s": 0.0, "refresh_kernel_evals": 0}
    ws = _Workspace(kd, y, spec, Cb, alpha, G, cache_mb, shrinking, timing)
    if shrinking and warm:
        ws.shrink()
    watch = (progress, should_stop, report_interval, info)
    converged, n_refresh = _iterate(ws, eps, max_iter, selection == "wss2", pairs, t0, watch)
    if not converged:
        ws.refresh()
    res = ws.result(C, eps, t0, n_refresh)
    if progress is not None:
        progress({**info, **_done_report(res, n)})
    return res


def _done_report(res: KernelDualResult, n: int) -> dict:
    """The last ``progress`` report of a solve (exact objective and violation)."""
    return {
        "iterations": res.n_iter,
        "objective": res.objective,
        "max_violation": res.max_violation,
        "active": n,
        "elapsed": res.elapsed,
        "done": True,
    }


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
