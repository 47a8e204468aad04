"""``svmstream replay --feedback`` against a real server: every row predicted and learned once
by id; on a stream whose concept flips halfway, labels that arrive late cost served accuracy
(the model adapts only as the labels come), labels that arrive at once do not."""

from __future__ import annotations

import io

import numpy as np
from sklearn.datasets import dump_svmlight_file

from svmstream.app.cli.main import build_parser
from svmstream.app.cli.replay_feedback import run_feedback_replay, schedule
from tests.conftest import two_moons_like


def test_schedule_never_labels_before_predicting():
    events = schedule(500, rate=10.0, delay_mean=3.0, seed=1)
    seen = set()
    for kind, row, _ in events:
        if kind == "predict":
            seen.add(row)
        else:
            assert row in seen
    assert sorted(r for k, r, _ in events if k == "feedback") == list(range(500))
    immediate = schedule(4, rate=1.0, delay_mean=0.0, seed=1)
    assert [(k, r) for k, r, _ in immediate] == [(k, r) for r in range(4) for k in ("predict", "feedback")]


def test_delayed_labels_cost_served_accuracy_on_a_drifting_stream(start_server, tmp_path):
    X, y = two_moons_like(3000, d=4, seed=8)
    y = np.where(np.arange(3000) < 1500, y, -y)  # the concept flips halfway
    path = tmp_path / "drift.libsvm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    server = start_server(tmp_path / "snap", env={"SVMSTREAM_FEEDBACK_WINDOW": "3000"})
    hyper = {"warmup": 200, "shuffle_buffer": 0, "gamma": 1.0, "C": 10.0}
    out = io.StringIO()
    results = {}
    for name, delay in (("at-once", 0.0), ("late", 5.0)):
        results[name] = run_feedback_replay(
            str(path),
            server.url,
            model=name,
            hyper=hyper,
            warm=300,
            rate=100.0,
            delay_mean=delay,
            shuffle_seed=None,
            out=out,
        )
    for r in results.values():
        assert r["predicted"] == r["learned"] == 2700 and r["duplicate"] == r["expired"] == 0
        assert r["model"]["n_seen"] == 3000
    at_once, late = results["at-once"]["served_accuracy"], results["late"]["served_accuracy"]
    print(
        f"drifting stream: served accuracy {at_once:.4f} with labels at once, {late:.4f} with ~Exp(5 s) at 100 rows/s"
    )
    assert late < at_once - 0.03, (late, at_once)
    # labels at once and in order: the served accuracy is the prequential one on the same rows
    assert abs(results["at-once"]["prequential_accuracy"] - at_once) < 0.02
    args = build_parser().parse_args(["replay", str(path), "--feedback", "--delay-mean", "2", "--rate", "50"])
    assert args.feedback and args.delay_mean == 2.0 and args.rate == 50.0 and args.warm == 1000
