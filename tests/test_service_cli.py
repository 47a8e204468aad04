"""``svmstream`` command line: option parsing (the processes themselves run in test_e2e_service.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import numpy as np

from svmstream.app.cli.main import build_parser, main
from svmstream.app.cli.replay_bodies import request_bodies
from svmstream.app.cli.serve import settings_from_args
from svmstream.app.jobs.datasets import load_dataset as load_libsvm
from tests.conftest import run_cli, serve_args, write_libsvm


def test_serve_options_override_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SVMSTREAM_DEFAULT_GAMMA", "0.25")
    monkeypatch.setenv("SVMSTREAM_PORT", "9001")
    args = build_parser().parse_args(
        [
            "serve",
            "--port",
            "9100",
            "--snapshot-dir",
            str(tmp_path),
            "--budget",
            "64",
            "--C",
            "32",
            "--lambda",
            "0.001",
            "--n-samples",
            "1000",
            "--classes=0,1",
            "--snapshot-interval",
            "0.5",
        ]
    )
    s = settings_from_args(args)
    assert s.port == 9100 and s.snapshot_dir == Path(tmp_path) and s.snapshot_interval_s == 0.5
    assert (s.default_budget, s.default_gamma, s.default_c, s.default_lambda, s.default_n_samples) == (
        64,
        0.25,
        32.0,
        0.001,
        1000,
    )
    assert s.default_classes == [0, 1]


def test_replay_bodies_follow_file_order_dense_and_sparse(tmp_path):
    import orjson

    X = np.array([[0.5, 0.0, -1.0], [0.0, 0.0, 2.0], [1.0, 1.0, 0.0]])
    y = np.array([1, -1, 1])
    path = write_libsvm(tmp_path / "f.bz2", X, y)
    Xs, ys = load_libsvm(str(path))
    for dense in (True, False):
        bodies = list(request_bodies("m", Xs, ys.astype(np.int64), 2, dense, passes=2))
        assert [n for n, _ in bodies] == [2, 1, 2, 1]
        objs = [orjson.loads(b) for _, b in bodies]
        assert [o["y"] for o in objs] == [[1, -1], [1], [1, -1], [1]]
        rows = objs[0]["X"] + objs[1]["X"]
        if dense:
            assert rows == X.tolist()
        else:
            assert rows == [{"0": 0.5, "2": -1.0}, {"2": 2.0}, {"0": 1.0, "1": 1.0}]


def test_replay_errors_are_one_line(tmp_path, capsys):
    assert main(["replay", str(tmp_path / "missing.txt"), "--url", "http://127.0.0.1:9"]) == 1
    assert "No such file" in capsys.readouterr().err
    path = write_libsvm(tmp_path / "f", np.eye(2), np.array([1, -1]))
    assert main(["replay", str(path), "--url", "http://127.0.0.1:9", "--no-progress"]) == 2
    assert "cannot talk to http://127.0.0.1:9" in capsys.readouterr().err


def test_replay_shuffle_sends_each_row_once_per_pass_in_a_seeded_order(tmp_path):
    import orjson

    X = np.arange(1, 31, dtype=np.float64).reshape(10, 3)
    y = np.array([1, -1] * 5)
    Xs, ys = load_libsvm(str(write_libsvm(tmp_path / "f", X, y)))

    def order(seed):
        bodies = list(request_bodies("m", Xs, ys.astype(np.int64), 4, True, passes=2, shuffle_seed=seed))
        return [row[0] for _, b in bodies for row in orjson.loads(b)["X"]]

    first = order(7)
    assert first == order(7)  # deterministic
    assert sorted(first[:10]) == sorted(first[10:]) == sorted(X[:, 0].tolist())  # each row once per pass
    assert first[:10] != X[:, 0].tolist() and first[:10] != first[10:]  # shuffled, new order per pass
    bodies = list(request_bodies("m", Xs, ys.astype(np.int64), 4, True, shuffle_seed=7))
    for _, b in bodies:  # labels travel with their rows
        obj = orjson.loads(b)
        assert [int(row[0] - 1) // 3 % 2 for row in obj["X"]] == [(1 - v) // 2 for v in obj["y"]]


def test_serve_on_a_port_in_use_fails_first_with_a_clear_message(tmp_path):
    """A real ``svmstream serve`` on a port another socket listens on: exit status 1 and a
    one-line error before anything starts (never "svmstream ready")."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        proc = run_cli([*serve_args(port, tmp_path / "snap"), "--log-level", "info"], timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert f"error: cannot listen on 127.0.0.1:{port}" in proc.stderr
    assert "Address already in use" in proc.stderr
    assert "svmstream ready" not in output
    assert not (tmp_path / "snap").exists()  # nothing started: no snapshot directory either


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_serve_with_an_unreachable_redis_fails_with_one_line(tmp_path):
    """``serve --redis-url`` at a Redis that is down: one line naming the URL (its password
    hidden), exit status 1, nothing started (no traceback from the replication start, no
    snapshot directory, never "svmstream ready"); before the application is even imported."""
    port, dead = _closed_port(), _closed_port()
    url = f"redis://:s3cret@127.0.0.1:{dead}/0"
    proc = run_cli([*serve_args(port, tmp_path / "snap"), "--redis-url", url], timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        f"error: cannot reach Redis at redis://:***@127.0.0.1:{dead}/0: Error 111 connecting to "
        f"127.0.0.1:{dead}. Connection refused."
    ], proc.stderr
    assert proc.stdout == "" and not (tmp_path / "snap").exists()
    replica = run_cli(
        [*serve_args(port, tmp_path / "snap"), "--role", "replica", "--redis-url", url], timeout=120
    )
    assert replica.returncode == 1 and len(replica.stderr.splitlines()) == 1, replica.stderr
