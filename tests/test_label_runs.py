"""Pairs of a one-class run are held until the run ends and dropped when it proves improbable
(``svmstream.app.models.label_runs``): the pairing against a row-by-row brute force, and a
label-sorted stream through the service, where a drift challenger with no buffer follows each
run."""

from __future__ import annotations

import math

import numpy as np
import pytest

from svmstream.app.models.label_runs import LabelRuns
from svmstream.solvers.online.race.evidence import PairedEvidence
from tests.conftest import assert_examples_account, learn_all, two_moons_like


def _brute(labels: np.ndarray, outcomes: np.ndarray, ends: list[int]) -> list[tuple[int, int, int]]:
    """Row by row: each row's run and whether that run proved improbable (the guard's criterion,
    sticky); at each cell end T, the counted pairs are those of the runs that ended by T (a row
    of another label arrived by T) and never proved improbable.  ``outcomes``: +1 win, -1 loss,
    0 tie per row."""
    run_of, void_of, run, run_class, run_len, counts = [], [], -1, None, 0, {}
    for c in labels.tolist():
        if c != run_class:
            run, run_class, run_len = run + 1, c, 0
            void_of.append(False)
        run_len += 1
        counts[c] = counts.get(c, 0) + 1
        q = counts[c] / sum(counts.values())
        if run_len >= 1000 and (q == 1.0 or run_len * math.log(q) <= math.log(1e-6)):
            void_of[run] = True
        run_of.append(run)
    out = []
    for end in ends:
        open_run = run_of[end - 1]  # still open at T: its pairs are held
        rows = [i for i in range(end) if run_of[i] < open_run and not void_of[run_of[i]]]
        o = outcomes[rows]
        out.append((len(rows), int(np.sum(o == 1)), int(np.sum(o == -1))))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_held_pairs_count_when_their_run_ends_and_drop_when_it_proves_improbable(seed):
    """The contest's pairing (``LabelRuns.pieces`` + ``PairedEvidence`` held pairs) against the
    brute force, in 128-row cells, with both saved and restored after each cell."""
    rng = np.random.default_rng(seed)
    parts = [rng.integers(0, 3, 3000), np.full(2500, 1), rng.integers(0, 3, 800), np.full(4000, 2),
             np.full(1200, 0), rng.integers(0, 2, 500), np.full(700, 1), rng.integers(0, 2, 300)]  # fmt: skip
    labels = np.concatenate(parts)
    champion = rng.random(labels.shape[0]) < 0.8
    challenger = rng.random(labels.shape[0]) < 0.8
    outcomes = challenger.astype(int) - champion.astype(int)
    ends = list(range(128, labels.shape[0] + 1, 128))
    expected = _brute(labels, outcomes, ends)
    runs, ev = LabelRuns(), PairedEvidence(100)
    for end, want in zip(ends, expected):
        lo = end - 128
        for a, b, new_run, void_before, void_after in runs.pieces(labels[lo:end]):
            if new_run:
                ev.commit()
            if not void_before:
                ev.add(champion[lo + a : lo + b], challenger[lo + a : lo + b], tentative=True)
            if void_after and not void_before:
                ev.discard()
        assert (ev.n, ev.wins, ev.losses) == want, end
        runs, ev = LabelRuns.from_json(runs.to_json()), PairedEvidence.from_json(ev.to_json(), 100)
    assert expected[-1][0] < ends[-1] - 7000  # the long runs (2,500 + 4,000 + 1,200 rows) were dropped


def test_a_shuffled_stream_never_shows_an_improbable_run():
    labels = np.random.default_rng(0).permutation(np.r_[np.zeros(45_000, int), np.ones(5_000, int)])
    runs = LabelRuns()
    pieces = [p for i in range(0, labels.shape[0], 128) for p in runs.pieces(labels[i : i + 128])]
    assert not any(p[4] for p in pieces) and sum(p[2] for p in pieces) > 5000


def test_a_label_sorted_stream_does_not_promote_a_drift_challenger_that_follows_the_runs(start_server):
    """Labels sorted (all -1, then all +1), no settings but a small model: the champion's
    detector fires inside the second run and a warm drift challenger (no buffer) starts; it
    predicts the run's class and would win every pair, but those pairs are not counted, so it
    is not promoted, and the champion serves both classes."""
    X, y = two_moons_like(16_000, d=6, seed=41)
    order = np.argsort(y, kind="stable")
    X, y = X[order], y[order]
    server = start_server()
    with server.client() as c:
        settings = {"budget": 40, "gamma": 1.0, "C": 10.0, "shuffle_buffer": 4000, "classes": [-1, 1]}
        assert c.put("/models/s", json=settings).status_code == 201
        learn_all(c, "s", X, y, batch=500)
        info = c.get("/models/s").json()
        events = [(e["event"], e["at"]) for e in info["promotion"]["history"]]
        assert "drift challenger started" in [e for e, _ in events], events
        assert "promoted" not in [e for e, _ in events], events
        assert_examples_account(c, "s", sent=16_000)
        c.post("/models/s/flush")
        probe, truth = two_moons_like(400, d=6, seed=42)
        labels = np.asarray(c.post("/predict", json={"model": "s", "X": probe.tolist()}).json()["labels"])
        assert np.mean(labels == truth) > 0.75
    server.terminate()
