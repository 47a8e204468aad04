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

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from .._params import SELECTIONS
from ..exceptions import Cancelled
from ._cd_kernels import (
    _avsf_run,
    _csr_decision,
    _dual_value,
    _margins,
    _row_sq_norms,
    _uniform_run,
)

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


@dataclass(frozen=True)
class CDOptions:
    """The keyword options of :func:`dual_cd` beyond the problem and the selection rule.

    Attributes
    ----------
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
    """

    progress: Callable[[dict], Any] | None = None
    should_stop: Callable[[], bool] | None = None
    max_steps: int | None = None
    record_history: bool = False
    p_min: float = AVSF_P_MIN
    p_max: float = AVSF_P_MAX
    c_rate: float = AVSF_C
    avsf_shrinking: bool | None = None
    avsf_restore: bool | None = None
    avsf_systematic: bool | None = None


def _check(C, tol, max_iter, selection, o: CDOptions):
    """Raise ValueError naming the first invalid argument of :func:`dual_cd`."""
    if selection not in _SELECTIONS:
        raise ValueError(f"selection must be one of {_SELECTIONS}, got {selection!r}")
    if not (C > 0 and np.isfinite(C)):
        raise ValueError(f"C must be a positive finite number, got {C!r}")
    if not (tol > 0):
        raise ValueError(f"tol must be positive, got {tol!r}")
    if int(max_iter) < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter!r}")
    if not (0 < o.p_min <= 1 <= o.p_max):
        raise ValueError("need 0 < p_min <= 1 <= p_max")


class _Run:
    """One :func:`dual_cd` run: the problem and the run state as the kernels take them (see
    :func:`._cd_kernels._uniform_run`), AVSF's preferences and settings, and the counts."""

    def __init__(self, inp: CDInput, y, C, tol, selection, seed, o: CDOptions):
        n, d = inp.n_samples, inp.n_features
        self.inp, self.selection = inp, selection
        self.min_steps = max(n, 1)  # work per kernel call for "uniform" (see should_stop)
        rng = _seed_state(seed)
        qd = _row_sq_norms(inp.arrays, n)
        self.alpha = np.zeros(n, dtype=np.float64)
        self.w = np.zeros(d, dtype=np.float64)
        index = np.arange(n, dtype=np.int64)
        bounds = np.array([-np.inf, np.inf])
        if selection == "uniform":
            self.counts = np.array([n, 0, 0, 0, 0, 0], dtype=np.int64)
        else:
            paper = selection == "avsf-paper"
            shrinking = (not paper) if o.avsf_shrinking is None else bool(o.avsf_shrinking)
            restore = False if o.avsf_restore is None else bool(o.avsf_restore)
            systematic = False if o.avsf_systematic is None else bool(o.avsf_systematic)
            p = np.ones(n, dtype=np.float64)
            p_saved = np.ones(n, dtype=np.float64)
            inactive = np.zeros(n, dtype=np.uint8)
            schedule = np.empty(2 * n + 1, dtype=np.int64)
            fstate = np.zeros(1, dtype=np.float64)
            self.counts = np.array([1, 1, 0, 0, 0, 0, n, 0, 0, 0], dtype=np.int64)
            # one outer iteration per call without shrinking (each is ~n steps anyway)
            self.avsf_min_steps = self.min_steps if shrinking else 1
            self.prefs = (p, p_saved, inactive, schedule, fstate)
            self.settings = (o.p_min, o.p_max, o.c_rate, shrinking, restore, systematic)
        self.problem = (y, qd, C, tol)
        self.state = (self.alpha, self.w, index, bounds, self.counts, rng)
        self.n_iter = self.n_steps = self.n_updates = self.n_checks = self.n_restores = 0
        self.converged, self.spread = False, np.inf

    def call(self, iterations_left):
        """One kernel call of at most ``iterations_left`` outer iterations; adds its counts."""
        counts = self.counts
        if self.selection == "uniform":
            self.spread = _uniform_run(
                self.inp.arrays, self.problem, self.state, iterations_left, self.min_steps
            )
            self.n_steps += int(counts[2])
            self.n_updates += int(counts[3])
            self.n_iter += int(counts[4])
            self.converged = bool(counts[1])
            self.n_checks = int(counts[5])
            return
        args = (self.inp.arrays, self.problem, self.state, self.prefs, self.settings)
        self.spread = _avsf_run(*args, iterations_left, self.avsf_min_steps)
        self.n_steps += int(counts[3])
        self.n_updates += int(counts[4])
        self.n_iter += int(counts[5])
        self.converged = bool(counts[2])
        self.n_checks, self.n_restores = int(counts[8]), int(counts[9])

    def report(self, t0) -> dict:
        return {
            "selection": self.selection,
            "iteration": self.n_iter,
            "n_steps": self.n_steps,
            "n_updates": self.n_updates,
            "violation": float(self.spread),
            "dual": float(_dual_value(self.alpha, self.w)),
            "elapsed": time.perf_counter() - t0,
        }


def dual_cd(
    X, y, C: float = 1.0, tol: float = 0.1, max_iter: int = 1000, selection: str = "uniform", seed: int = 0,
    **options,
) -> LinearDualResult:  # fmt: skip
    """Train a bias-free linear hinge-loss SVM by dual coordinate descent.

    ``selection="uniform"`` is the paper's Algorithm 2 (LIBLINEAR's dual CD with shrinking,
    Hsieh et al. 2008, Algorithm 3); ``selection="avsf-paper"`` is Algorithm 3 of
    Glasmachers & Dogan (arXiv:1302.5608) with the schedule of Algorithm 4 and the
    preference update of Algorithm 5, as published; ``selection="avsf"`` (the recommended
    variant) is the same with LIBLINEAR's shrinking of variables stuck at a bound
    (``docs/avsf.md`` documents the departure and its measured effect).  The numba kernels
    release the GIL.

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
    **options
        The fields of :class:`CDOptions`: ``progress``, ``should_stop``, ``max_steps``,
        ``record_history``, ``p_min``, ``p_max``, ``c_rate``, ``avsf_*``.

    Returns
    -------
    LinearDualResult

    Raises
    ------
    ValueError
        On invalid ``C``, ``tol``, ``max_iter``, ``selection``, or mismatched shapes.
    TypeError
        On an unknown option.
    Cancelled
        When ``should_stop()`` returns true.
    """
    o = CDOptions(**options)
    _check(C, tol, max_iter, selection, o)
    inp = X if isinstance(X, CDInput) else as_cd_input(X)
    y = np.asarray(y)
    if y.shape != (inp.n_samples,):
        raise ValueError(f"y must have shape ({inp.n_samples},), got {y.shape}")
    y = np.where(y > 0, 1.0, -1.0)
    C, tol, max_iter = float(C), float(tol), int(max_iter)
    t0 = time.perf_counter()
    run = _Run(inp, y, C, tol, selection, seed, o)
    history: list = []
    while run.n_iter < max_iter and (o.max_steps is None or run.n_steps < o.max_steps):
        if o.should_stop is not None and o.should_stop():
            raise Cancelled(
                f"cancelled after {run.n_iter} outer iterations", n_iter=run.n_iter, n_steps=run.n_steps
            )
        run.call(max_iter - run.n_iter)
        if o.progress is not None or o.record_history:
            info = run.report(t0)
            if o.record_history:
                history.append(info)
            if o.progress is not None:
                o.progress(dict(info))
        if run.converged:
            break
    wall = time.perf_counter() - t0
    primal, dual = objectives(inp, y, run.w, run.alpha, C)
    return LinearDualResult(
        w=run.w, alpha=run.alpha, n_iter=run.n_iter, n_steps=run.n_steps, n_updates=run.n_updates,
        converged=run.converged, wall_time=wall, primal=primal, dual=dual, final_violation=float(run.spread),
        n_checks=run.n_checks, n_restores=run.n_restores, history=history,
    )  # fmt: skip
