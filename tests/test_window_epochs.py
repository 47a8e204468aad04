"""A stream that ends inside the warm-up window: the pipeline's ``window_epochs`` passes over it
(dual coordinate-ascent epochs for BSCA), checked against the dual optimum computed by brute
force, and the selector's window candidate that leads such a stream (docs/selection.md,
"Streams that end inside the window")."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.datasets import make_moons

from svmstream.solvers import BudgetedSCAClassifier, BudgetedSGDClassifier, StreamingClassifier
from svmstream.solvers.budgeted import RehearsalMemory
from svmstream.solvers.online.selection import DEFAULT_CANDIDATES, SelectionClassifier
from svmstream.solvers.persistence import decode_state, encode_state, estimator_from_state

GAMMA, C = 2.0, 1.0


def _rows(n=80, seed=0):
    X, y = make_moons(n_samples=n, noise=0.3, random_state=seed)
    return X / np.abs(X).max(axis=0), y  # max-abs scaled already: the window's scaling is 1


def _dual(alpha, K, s):
    """The no-bias SVM dual D(α) = Σα − ½ (α∘s)ᵀ K (α∘s), 0 ≤ α ≤ C (BSCA's problem)."""
    v = alpha * s
    return float(alpha.sum() - 0.5 * v @ K @ v)


def _brute_force_optimum(X, s):
    K = np.exp(-GAMMA * ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2))
    Q = K * np.outer(s, s)
    res = minimize(
        lambda a: (0.5 * a @ Q @ a - a.sum(), Q @ a - 1.0),
        np.zeros(len(s)), jac=True, bounds=[(0.0, C)] * len(s), method="L-BFGS-B",
        options={"ftol": 1e-14, "gtol": 1e-10, "maxiter": 10_000},
    )  # fmt: skip
    return -float(res.fun), K


def _pipeline_dual(window_epochs, X, y, K, s):
    engine = BudgetedSCAClassifier(C=C, gamma=GAMMA, budget=200, random_state=0)
    model = StreamingClassifier(
        engine, scaling="maxabs", warmup=200, rehearsal=1, window_epochs=window_epochs
    )
    model.partial_fit(X, y, classes=[0, 1]).flush()
    assert model.n_received_ == model.n_learned_ == len(y) and model.n_pending_ == 0
    # each row is one SV (budget > n, no merge): its coefficient is α_i·s_i, matched by position
    sv, coef = model.support_vectors_, np.ravel(model.dual_coef_)
    index = [int(np.flatnonzero((np.abs(X - row) < 1e-12).all(axis=1))[0]) for row in sv]
    alpha = np.zeros(len(y))
    alpha[index] = coef * s[index]
    assert np.all(alpha >= -1e-12) and np.all(alpha <= C + 1e-12)
    return _dual(alpha, K, s), model


def test_window_epochs_reach_the_dual_optimum_one_pass_does_not():
    X, y = _rows()
    s = np.where(y == 1, 1.0, -1.0)
    best, K = _brute_force_optimum(X, s)
    swept, model = _pipeline_dual(30, X, y, K, s)
    one, _ = _pipeline_dual(1, X, y, K, s)
    assert swept <= best + 1e-9 and swept >= 0.99 * best, (swept, best)
    assert one < 0.95 * best, (one, best)  # one pass (the default) is far from it
    assert model.n_rehearsed_ == 29 * len(y)  # 29 passes after each row's own step


def test_a_sweep_plan_is_each_row_then_permutations_and_remembers_every_row():
    memory = RehearsalMemory(100, 2, seed=3)
    X = np.arange(20.0).reshape(10, 2)
    assert memory.sweeps_fit(10) and not memory.sweeps_fit(101)
    order, new_pos, gather = memory.extend_sweeps(X, 3)
    assert order.shape == (40,) and gather.shape == (0,)
    np.testing.assert_array_equal(order[:10], np.arange(10))
    np.testing.assert_array_equal(new_pos, np.arange(10))
    for k in range(1, 4):
        assert sorted(order[10 * k : 10 * (k + 1)]) == list(range(10))
    memory.commit(X, np.ones(10), np.ones(10), np.linspace(0, 1, 10))
    assert memory.fill == 10 and memory.steps == 30 and not memory.sweeps_fit(5)
    np.testing.assert_array_equal(memory.X[:10], X)
    np.testing.assert_allclose(memory.alpha[:10], np.linspace(0, 1, 10))
    with pytest.raises(ValueError, match="empty memory"):
        memory.extend_sweeps(X, 1)


def test_sweeps_apply_only_to_a_flush_of_the_whole_stream():
    X, y = _rows(300)
    engine = BudgetedSCAClassifier(C=C, gamma=GAMMA, budget=200, random_state=0)
    model = StreamingClassifier(engine, warmup=100, rehearsal=1, window_epochs=10)
    model.partial_fit(X, y, classes=[0, 1]).flush()  # the window closed by data: no sweeps
    assert model.n_rehearsed_ == model.n_learned_ == 300


def test_window_epochs_is_validated():
    X, y = _rows(20)
    for bad in (0, True, 1.5):
        with pytest.raises(ValueError, match="window_epochs"):
            StreamingClassifier(BudgetedSGDClassifier(), window_epochs=bad).partial_fit(X, y, classes=[0, 1])


def test_the_window_candidate_leads_a_short_stream_restores_and_retires_at_the_first_rung():
    X, y = make_moons(n_samples=2600, noise=0.25, random_state=1)
    plain = BudgetedSGDClassifier(budget=40, random_state=0)
    sel = SelectionClassifier(plain, warmup=300, shuffle_buffer=100, first_rung=600)
    sel.partial_fit(X[:250], y[:250], classes=[0, 1]).flush()  # the stream ends in the window
    lead = sel.leader_
    assert DEFAULT_CANDIDATES[lead].get("window") and sel.settings_[lead]["solver"] == "bsca"
    assert type(sel.candidates_[lead].model_).__name__ == "BudgetedSCAClassifier"
    restored = estimator_from_state(*decode_state(encode_state(*sel.get_state())))
    assert restored.leader_ == lead
    np.testing.assert_array_equal(restored.decision_function(X[2000:]), sel.decision_function(X[2000:]))
    # the stream goes on: every candidate learns it, the window candidate retires at the first rung
    for lo in range(250, 2000, 250):
        sel.partial_fit(X[lo : lo + 250], y[lo : lo + 250])
    assert sel.rungs_ and sel.candidates_[lead] is None and sel.leader_ != lead
    assert sel.n_received_ == 2000 == sel.n_learned_ + sel.n_pending_


def test_the_window_candidates_passes_are_bounded_by_the_work():
    from svmstream.solvers.online.selection.candidates import WINDOW_EPOCHS, WINDOW_WORK, window_epochs

    assert window_epochs(513, 19, 133) == WINDOW_EPOCHS == window_epochs(327, 2, 48)  # the short sets
    assert window_epochs(999, 1000, 256) == 1  # one pass: the work of more would exceed the bound
    k = window_epochs(900, 40, 200)
    assert 1 < k < WINDOW_EPOCHS and (k - 1) * 900 * 40 * 200 <= WINDOW_WORK < k * 900 * 40 * 200
    X, y = make_moons(n_samples=200, noise=0.3, random_state=0)
    sel = SelectionClassifier(BudgetedSGDClassifier(budget=40, random_state=0), warmup=300)
    sel.partial_fit(X, y, classes=[0, 1]).flush()
    window = next(s for s in sel.settings_ if s["window"])
    assert window["window_epochs"] == WINDOW_EPOCHS
    assert sel.candidates_[len(sel.settings_) - 1].window_epochs == WINDOW_EPOCHS
