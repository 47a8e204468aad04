"""The promotion test's e-value (``solvers/online/race/evidence.py``): under the null (the challenger is
no better) it crosses 1/α at most about α of the time, however often it is looked at; with a
clear edge (8 points) it crosses within 1,000 pairs; the window survives its JSON form."""

from __future__ import annotations

import numpy as np

from svmstream.solvers.online.race.evidence import BETS, PairedEvidence, challenger_alpha


def _ever_crosses(p_win: float, p_loss: float, n: int, streams: int, alpha: float, seed: int) -> np.ndarray:
    """For ``streams`` simulated paired streams of ``n`` pairs: whether the e-value ever reached 1/α."""
    rng = np.random.default_rng(seed)
    u = rng.random((streams, n))
    wins = np.cumsum(u < p_win, axis=1)
    losses = np.cumsum((u >= p_win) & (u < p_win + p_loss), axis=1)
    logs = wins[..., None] * np.log1p(BETS) + losses[..., None] * np.log1p(-BETS)  # (streams, n, bets)
    top = logs.max(axis=2)
    log_e = top + np.log(np.mean(np.exp(logs - top[..., None]), axis=2))
    return (log_e >= np.log(1 / alpha)).any(axis=1)


def test_false_promotions_stay_under_alpha_whenever_one_looks():
    crossed = _ever_crosses(0.1, 0.1, 3000, 400, alpha=0.05, seed=0)  # equal models, checked every pair
    assert crossed.mean() <= 0.05, crossed.mean()
    crossed = _ever_crosses(0.08, 0.12, 3000, 400, alpha=0.05, seed=1)  # a worse challenger
    assert crossed.mean() == 0.0


def test_a_clear_edge_is_found_quickly():
    crossed = _ever_crosses(0.12, 0.04, 1000, 200, alpha=0.0125, seed=2)  # an 8-point edge
    assert crossed.mean() >= 0.95, crossed.mean()


def test_counts_window_and_json_round_trip():
    ev = PairedEvidence(window=5)
    ev.add(np.array([1, 1, 0, 0, 1, 0, 1], bool), np.array([1, 0, 1, 0, 1, 1, 1], bool))
    assert (ev.n, ev.wins, ev.losses) == (7, 2, 1)
    assert ev.window_accuracies() == (0.4, 0.8, 5)  # the last 5 pairs
    again = PairedEvidence.from_json(ev.to_json(), window=5)
    assert again.window_accuracies() == ev.window_accuracies() and again.log_e_value() == ev.log_e_value()
    assert PairedEvidence(3).log_e_value() == 0.0  # no evidence: E = 1


def test_levels_sum_to_at_most_alpha():
    users = 4 * challenger_alpha(0.05, 0, 4, None)
    drift = sum(challenger_alpha(0.05, 0, 4, j) for j in range(1, 10_000))
    assert users == 0.025 and drift <= 0.025
