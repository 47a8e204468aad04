"""Batch steps of the budgeted kernel regressor and one-class SVM (numba kernels).

Sources:

* ε-insensitive SGD and the one-class hinge: Kivinen, Smola & Williamson (2004), "Online
  learning with kernels", IEEE Trans. Signal Processing 52(8) — NORMA, §III-B (novelty
  detection, loss ``max(0, ρ − f(x)) − νρ``) and §III-C (regression, ``max(0, |y − f(x)| − ε)``);
  the budget as in Wang, Crammer & Vucetic (2012), §6, merging as Glasmachers & Qaadan (2018);
  the ε-insensitive loss on a budget: Le, Nguyen, Nguyen & Phung (2017), "Approximation vector
  machines for large-scale online learning", JMLR 18.
* the one-class SVM: Schölkopf, Platt, Shawe-Taylor, Smola & Williamson (2001), "Estimating the
  support of a high-dimensional distribution", Neural Computation 13, eq. (3)–(4).
* the dual coordinate step of ε-SVR: the bias-free ε-SVR dual
  ``min_α ½αᵀKα − yᵀα + ε‖α‖₁, −C ≤ α_i ≤ C`` (Smola & Schölkopf 2004, "A tutorial on support
  vector regression", eq. 12 without the equality constraint of the bias) by one exact
  coordinate minimisation per visit, as BSCA does for the hinge (Qaadan, Schüler & Glasmachers
  2019, Algorithm 2).

The state arrays are those of :mod:`._state` (``coef`` (B+1, 1): one column; regression's
coefficients have both signs, the one-class model's are all positive) so the classifier's
budget maintenance (:func:`._maintenance.add_support_vector`, :func:`._maintenance.maintain_budget`)
applies unchanged: merging pairs coefficients of the same sign (:func:`._merging.merge_smallest`).

Every step is a pure function of the state and the example: cutting a stream into batches
differently gives bit-identical models.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ._bsgd import learning_rate
from ._maintenance import add_support_vector, maintain_budget
from ._sparse_pool import pool_row_log, row_close, row_open
from ._state import C_N_SV, C_STEPS, C_VIOLATIONS, R_SCALE, RESCALE_BELOW


@nb.njit(nogil=True, cache=True)
def _margin(sv_t, x, x_sq, sv_sq, coef, n_sv, gamma, row_buf):
    """Σ_j coef[j, 0]·k(x, sv_j) (raw units); leaves the kernel row (and its log) in ``row_buf``."""
    pool_row_log(sv_t, x, x_sq, sv_sq, n_sv, gamma, row_buf, row_buf[row_buf.shape[0] // 2 :])
    acc = 0.0
    for j in range(n_sv):
        acc += coef[j, 0] * row_buf[j]
    return acc


@nb.njit(nogil=True, cache=True)
def _clear(coef, n_sv):
    for j in range(n_sv):
        coef[j, 0] = 0.0


@nb.njit(nogil=True, cache=True)
def _fold_scale(coef, n_sv, scale):
    """Fold a small ``scale`` into the coefficients (returns the new scale, 1)."""
    if scale < RESCALE_BELOW:
        for j in range(n_sv):
            coef[j, 0] *= scale
        return 1.0
    return scale


@nb.njit(nogil=True, cache=True)
def _shrunk(coef, n_sv, scale, shrink):
    """``w ← shrink·w`` on the scale; a factor ≤ 0 (Pegasos at t = 1) clears the model.
    Returns ``(n_sv, scale)``."""
    if shrink <= 0.0:
        _clear(coef, n_sv)
        return 0, 1.0
    return n_sv, scale * shrink


@nb.njit(nogil=True, cache=True)
def _enter(X, i, x, x_sq, value, weight, sv_t, sv_sq, coef, n_sv, gamma, budget, maintenance, k_inv,
           counters, reals, scale, scratch):  # fmt: skip
    """Add ``value``·φ(x) (raw units: ``value`` / scale) and bring the model back to B SVs;
    returns the SV count.  ``weight`` (1,) float64 scratch; the kernel row of x is in
    ``scratch.row_buf`` (:func:`_margin`)."""
    counters[C_VIOLATIONS] += 1
    weight[0] = value / scale
    n_sv = add_support_vector(
        X, i, x, x_sq, weight, sv_t, sv_sq, coef, n_sv, maintenance, k_inv, scratch.row_buf, False, reals
    )
    if n_sv > budget:
        n_sv = maintain_budget(
            sv_t, sv_sq, coef, n_sv, gamma, maintenance, k_inv, counters, reals, scale, False, scratch
        )
    return n_sv


# Long on purpose (as bsgd_steps): the whole per-example loop in one call per batch.
@nb.njit(nogil=True, cache=True)
def svr_sgd_steps(
    X, y, weights, order, sv_t, sv_sq, coef, bias, counters, reals, k_inv, gamma, lam, eta0, epsilon,
    budget, schedule, maintenance, use_bias, out, scratch,
):  # fmt: skip
    """One BSGD step with the ε-insensitive loss per entry of ``order``.

    The model is ``f(x) = scale·Σ_j coef[j]·k(sv_j, x) + b``; the objective
    ``λ/2‖w‖² + (1/n)Σ_i max(0, |y_i − f(x_i)| − ε)`` (= the ε-SVR primal divided by C·n when
    λ = 1/(C·n)).  One step on (x, y): ``f`` before the step goes to ``out``; ``w ← (1 − η_tλ)w``
    (on ``scale``); if ``|y − f| > ε``: x enters with ``η_t·sign(y − f)`` and, with the bias,
    ``b += η_t·sign(y − f)``; then budget maintenance if B + 1 SVs are held.

    Importance weights (``docs/weights.md``): the objective's loss term of row i is scaled by
    w_i, so a violating step enters ``η_t·w_i·sign(y − f)`` (the bias moves by the same); the
    shrink ``1 − η_tλ`` and t are an unweighted step's; w_i = 0 is no step (t, the shrink and
    the model unchanged; f is still reported).

    Parameters
    ----------
    X : (n, d) float64 C-contiguous; y : (n,) float64 targets; weights : (n,) float64 >= 0
    (ones: unweighted); order : (m,) int64 rows to apply
    sv_t, sv_sq, coef, bias, counters, reals, k_inv : state (:mod:`._state`)
    gamma, lam, eta0 : RBF γ, λ, η of the Norma/constant schedules; epsilon : ε ≥ 0
    budget : B; schedule : ``SCHED_*`` (the perceptron is not offered); maintenance :
    :class:`._maintenance.Maintenance`; use_bias : bool
    out : (m,) float64 — f(x) before each step; scratch : :class:`._maintenance.Scratch`
    """
    row_buf = scratch.row_buf
    n_sv = counters[C_N_SV]
    t = counters[C_STEPS]
    scale = reals[R_SCALE]
    weight = np.zeros(1)
    for r in range(order.shape[0]):
        i = order[r]
        x, x_sq = row_open(X, i, sv_t)
        f = scale * _margin(sv_t, x, x_sq, sv_sq, coef, n_sv, gamma, row_buf) + bias[0]
        out[r] = f
        w = weights[i]
        if w == 0.0:  # a zero weight: no step
            row_close(X, i, sv_t)
            continue
        t += 1
        eta, shrink = learning_rate(schedule, t, lam, eta0)
        n_sv, scale = _shrunk(coef, n_sv, scale, shrink)
        resid = y[i] - f
        if resid > epsilon or resid < -epsilon:
            sign = w if resid > 0.0 else -w
            n_sv = _enter(
                X, i, x, x_sq, eta * sign, weight, sv_t, sv_sq, coef, n_sv, gamma, budget, maintenance, k_inv,
                counters, reals, scale, scratch,
            )  # fmt: skip
            if use_bias:
                bias[0] += eta * sign
        scale = _fold_scale(coef, n_sv, scale)
        row_close(X, i, sv_t)
    counters[C_N_SV] = n_sv
    counters[C_STEPS] = t
    reals[R_SCALE] = scale
    return order.shape[0]


@nb.njit(nogil=True, cache=True, inline="always")
def soft_box(z, epsilon, C):
    """argmin_u ½(u − z)² + ε|u| over −C ≤ u ≤ C: the soft threshold of z by ε, clipped."""
    if z > epsilon:
        u = z - epsilon
    elif z < -epsilon:
        u = z + epsilon
    else:
        u = 0.0
    return min(max(u, -C), C)


@nb.njit(nogil=True, cache=True)
def svr_sca_steps(
    X, y, weights, order, alpha, stream, C, epsilon, sv_t, sv_sq, coef, counters, reals, k_inv, gamma,
    budget, maintenance, out, scratch, min_delta,
):  # fmt: skip
    """One dual coordinate step of the bias-free ε-SVR per entry of ``order``.

    With ``f(x_i) = Σ_j coef[j]·k(sv_j, x_i)`` and ``Q_ii = k(x_i, x_i) = 1`` (RBF), the exact
    minimiser of the dual over α_i is ``u = soft_box(α_i + y_i − f(x_i), ε, C)``
    (:func:`soft_box`); ``δ = u − α_i`` enters the model as a coefficient of x_i (budget
    maintenance as BSCA's).  Streaming mode (``stream``): every example is a fresh coordinate
    with α = 0, visited once — the passive-aggressive regression step PA-I with the ε-tube
    (Crammer et al. 2006, "Online passive-aggressive algorithms", JMLR 7, §5) in kernel form.

    Importance weights: row i's box is ``−C·w_i ≤ α_i ≤ C·w_i`` (the dual of
    ``½‖w‖² + C·Σ w_i·max(0, |y_i − f| − ε)``, LIBSVM's per-instance weights); w_i = 0 is no
    step (not counted, the model unchanged; f is still reported).

    Parameters as :func:`svr_sgd_steps`, and ``alpha`` (n,) float64 (dataset mode), ``stream``
    bool, ``C`` the box (the ε-SVR's C: objective ½‖w‖² + C·Σ max(0, |y − f| − ε)),
    ``min_delta`` ≥ 0: a step whose |δ| is not above it changes nothing (0: every δ ≠ 0 is taken;
    the streaming pipeline's rehearsal skips tiny dataset-mode steps, each of which would add an
    SV and merge).

    Returns the last entry's δ (the α a streaming step gave its row; 0 when skipped).
    """
    row_buf = scratch.row_buf
    n_sv = counters[C_N_SV]
    weight = np.zeros(1)
    for r in range(order.shape[0]):
        i = order[r]
        x, x_sq = row_open(X, i, sv_t)
        f = _margin(sv_t, x, x_sq, sv_sq, coef, n_sv, gamma, row_buf)
        out[r] = f
        box = C * weights[i]
        delta = 0.0
        if box == 0.0:  # a zero weight: no step
            row_close(X, i, sv_t)
            continue
        counters[C_STEPS] += 1
        a_old = 0.0 if stream else alpha[i]
        delta = soft_box(a_old + y[i] - f, epsilon, box) - a_old
        if delta > min_delta or delta < -min_delta:
            if not stream:
                alpha[i] = a_old + delta
            n_sv = _enter(
                X, i, x, x_sq, delta, weight, sv_t, sv_sq, coef, n_sv, gamma, budget, maintenance, k_inv,
                counters, reals, 1.0, scratch,
            )  # fmt: skip
        else:
            delta = 0.0
        row_close(X, i, sv_t)
    counters[C_N_SV] = n_sv
    return delta


@nb.njit(nogil=True, cache=True)
def oneclass_sgd_steps(
    X, weights, order, sv_t, sv_sq, coef, rho, counters, reals, k_inv, gamma, nu, eta0, budget, schedule,
    maintenance, out, scratch,
):  # fmt: skip
    """One NORMA novelty step per entry of ``order`` (Kivinen et al. 2004, §III-B).

    Objective ``ν/2‖w‖² + (1/n)Σ_i max(0, ρ − f(x_i)) − νρ`` — Schölkopf et al.'s (2001) ν
    one-class primal ``½‖w‖² + 1/(νn)·Σξ_i − ρ`` times ν — so λ = ν.  One step on x:
    ``f(x) − ρ`` before the step goes to ``out``; ``w ← (1 − η_tν)w``; if ``f(x) < ρ``: x
    enters with ``η_t`` and ``ρ −= η_t(1 − ν)``, else ``ρ += η_tν`` (the subgradient of the
    loss in ρ is ``1[f < ρ] − ν``).  Coefficients are all positive, as one class's.

    Importance weights: the hinge term of row i is scaled by w_i (objective
    ``ν/2‖w‖² + (1/n)Σ w_i·max(0, ρ − f(x_i)) − νρ``): if ``f(x) < ρ`` x enters with
    ``η_t·w_i`` and ``ρ −= η_t(w_i − ν)``, else ``ρ += η_tν``; the shrink and t are an
    unweighted step's; w_i = 0 is no step.  ν then bounds the *weight* outside the boundary per
    example: ``(1/n)Σ_{f<ρ} w_i ≤ ν`` at the optimum (with weights of mean 1: the weighted
    share of outliers).  ``weights`` (n,) float64 >= 0 (ones: unweighted).

    Parameters as :func:`svr_sgd_steps`; ``rho`` (1,) float64 the offset ρ; ``nu`` ∈ (0, 1].
    """
    row_buf = scratch.row_buf
    n_sv = counters[C_N_SV]
    t = counters[C_STEPS]
    scale = reals[R_SCALE]
    weight = np.zeros(1)
    for r in range(order.shape[0]):
        i = order[r]
        x, x_sq = row_open(X, i, sv_t)
        f = scale * _margin(sv_t, x, x_sq, sv_sq, coef, n_sv, gamma, row_buf)
        out[r] = f - rho[0]
        w = weights[i]
        if w == 0.0:  # a zero weight: no step
            row_close(X, i, sv_t)
            continue
        t += 1
        eta, shrink = learning_rate(schedule, t, nu, eta0)
        n_sv, scale = _shrunk(coef, n_sv, scale, shrink)
        if f < rho[0]:
            rho[0] -= eta * (w - nu)
            n_sv = _enter(
                X, i, x, x_sq, eta * w, weight, sv_t, sv_sq, coef, n_sv, gamma, budget, maintenance, k_inv,
                counters, reals, scale, scratch,
            )  # fmt: skip
        else:
            rho[0] += eta * nu
        scale = _fold_scale(coef, n_sv, scale)
        row_close(X, i, sv_t)
    counters[C_N_SV] = n_sv
    counters[C_STEPS] = t
    reals[R_SCALE] = scale
    return order.shape[0]
