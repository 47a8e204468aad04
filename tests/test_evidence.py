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


def _brute_log_e(d: np.ndarray) -> float:
    """log mean_λ Π (1 + λ d_i), pair by pair."""
    wealth = np.array([np.prod(1.0 + lam * d) for lam in BETS])
    return float(np.log(np.mean(wealth)))


def test_continuous_losses_bet_on_the_clipped_scaled_difference():
    """A regressor's pairs: d = (champion - challenger) / scale clipped to [-1, 1], the e-value
    the mixture wealth of those d, whatever cells they came in; NaN pairs are skipped; the
    window's mean losses and the JSON round trip keep everything."""
    rng = np.random.default_rng(4)
    a, b = np.abs(rng.normal(1.0, 1.0, 700)), np.abs(rng.normal(0.8, 1.0, 700))
    a[[3, 50]] = [40.0, 0.0]  # a difference beyond the scale: clipped
    b[10] = np.nan  # no pair
    ev, keep = PairedEvidence(window=100), np.isfinite(b)
    for lo in range(0, 700, 128):
        ev.add_losses(a[lo : lo + 128], b[lo : lo + 128], scale=4.0)
        ev = PairedEvidence.from_json(ev.to_json(), 100)
    d = np.clip((a[keep] - b[keep]) / 4.0, -1, 1)
    assert ev.scale == 4.0 and (ev.n, ev.wins, ev.losses) == (699, int((d > 0).sum()), int((d < 0).sum()))
    assert abs(ev.log_e_value() - _brute_log_e(d)) < 1e-9
    champion, challenger = ev.window_losses()
    assert abs(champion - np.mean(a[-100:])) < 1e-12 and abs(challenger - np.mean(b[-100:])) < 1e-12
    assert ev.window_accuracies() == (None, None, 100)
    # the 0/1 path is the same as before: add() is add_losses of 0/1 losses without a scale
    right_a, right_b = rng.random(500) < 0.6, rng.random(500) < 0.7
    one, two = PairedEvidence(50), PairedEvidence(50)
    one.add(right_a, right_b)
    two.add_losses((~right_a).astype(float), (~right_b).astype(float))
    assert one.to_json() == two.to_json() and one.scale is None
    wins, losses = int((right_b & ~right_a).sum()), int((right_a & ~right_b).sum())
    logs = wins * np.log1p(BETS) + losses * np.log1p(-BETS)
    assert one.log_e_value() == logs.max() + np.log(np.mean(np.exp(logs - logs.max())))


def test_held_continuous_pairs_count_on_commit_and_vanish_on_discard():
    ev = PairedEvidence(window=10)
    ev.add_losses(np.array([2.0, 0.5]), np.array([1.0, 1.5]), scale=2.0, tentative=True)
    assert ev.n == 0 and ev.log_e_value() == 0.0
    ev.commit()
    assert (ev.n, ev.wins, ev.losses) == (2, 1, 1)
    assert abs(ev.log_e_value() - _brute_log_e(np.array([0.5, -0.5]))) < 1e-12
    ev.add_losses(np.array([9.0]), np.array([0.0]), scale=2.0, tentative=True)
    ev.discard()
    assert ev.n == 2 and abs(ev.log_e_value() - _brute_log_e(np.array([0.5, -0.5]))) < 1e-12
