"""No hyperparameters, raw and label-sorted data, through a real server: HTTP /learn, the
Redis stream, and ``svmstream replay`` (created / continued / replaced, shuffle, flush)."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

from tests.conftest import run_cli, write_libsvm
from tests.test_stream import produce, unique, wait_for, xb


def _sorted_raw_breast_cancer(repeats: int = 3):
    """Raw (unscaled: features up to ~4,000) breast_cancer, training part sorted by label and
    repeated; labels -1/+1."""
    X, y = load_breast_cancer(return_X_y=True)
    y = np.where(y == 1, 1, -1)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    order = np.argsort(ytr, kind="stable")
    return np.tile(Xtr[order], (repeats, 1)), np.tile(ytr[order], repeats), Xte, yte


def _accuracy_and_majority(c, model: str, Xte, yte) -> tuple[float, float]:
    pred = c.post("/predict", json={"model": model, "X": Xte.tolist()})
    assert pred.status_code == 200, pred.text
    accuracy = float(np.mean(np.asarray(pred.json()["labels"]) == yte))
    return accuracy, float(max(np.mean(yte == 1), np.mean(yte == -1)))


def _leader_c(info: dict) -> float:
    """C of the candidate that serves a no-settings model (``docs/selection.md``; λ = 1/(C · 30,000)),
    which is one of the default candidates' (1 or 0.1)."""
    race = info["statistics"]["selection"]
    c = race["candidates"][race["leader"]]["settings"]["C"]
    assert c in (1.0, 0.1), race
    return c


def test_raw_label_sorted_data_without_settings_over_http(start_server):
    X, y, Xte, yte = _sorted_raw_breast_cancer()
    server = start_server()
    with server.client() as c:
        for start in range(0, len(X), 100):
            r = c.post(
                "/learn", json={"X": X[start : start + 100].tolist(), "y": y[start : start + 100].tolist()}
            )
            assert r.status_code == 200, r.text
        info = c.get("/models/default").json()
        assert (
            info["lambda_eff"] == pytest.approx(1 / (30_000 * _leader_c(info)))
            and info["config"]["gamma"] == "scale"
        )
        assert info["metrics"]["single_label_runs"] == 0  # breast_cancer's runs are < 1,000
        assert c.post("/models/default/flush").json()["buffered"] == 0
        accuracy, majority = _accuracy_and_majority(c, "default", Xte, yte)
    assert accuracy >= majority + 0.15, (accuracy, majority)


def test_raw_label_sorted_data_without_settings_through_the_stream(start_server, redis_server):
    X, y, Xte, yte = _sorted_raw_breast_cancer()
    name = unique("raw")
    r = redis_server.client()
    produce(
        r,
        f"svmstream:{name}:examples",
        [{b"y": str(int(v)).encode(), b"xb": xb(row)} for row, v in zip(X, y)],
    )
    env = {
        "SVMSTREAM_REDIS_URL": redis_server.url,
        "SVMSTREAM_DEFAULT_MODEL": name,
        "SVMSTREAM_WARM_UP": "false",
    }
    server = start_server(env=env)
    with server.client() as c:
        wait_for(
            lambda: c.get(f"/models/{name}").json()["n_seen"] >= len(X), timeout=60, what="stream consumed"
        )
        info = c.get(f"/models/{name}").json()
        assert info["pending"] > 0 and info["lambda_eff"] == pytest.approx(1 / (30_000 * _leader_c(info)))
        assert c.post(f"/models/{name}/flush").status_code == 200
        accuracy, majority = _accuracy_and_majority(c, name, Xte, yte)
    assert accuracy >= majority + 0.15, (accuracy, majority)


def _replay(url: str, path, *args: str) -> subprocess.CompletedProcess:
    return run_cli(["replay", str(path), "--url", url, "--no-progress", "--json", *args], timeout=300)


def test_replay_creates_continues_and_replaces_honestly(start_server, tmp_path):
    X, y, Xte, yte = _sorted_raw_breast_cancer(repeats=1)
    train = write_libsvm(tmp_path / "bc.train", X, y)
    server = start_server()
    out = _replay(server.url, train, "--model", "bc")
    assert out.returncode == 0, out.stderr
    assert "model 'bc' created" in out.stderr and "in shuffled (seed 0)" in out.stderr
    assert "flushed" in out.stderr
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["model"]["pending"] == 0 and not result["model"]["warming_up"] and result["flushed"] > 0
    with server.client() as c:
        accuracy, majority = _accuracy_and_majority(c, "bc", Xte, yte)
    assert accuracy >= majority + 0.15, (accuracy, majority)
    # no hyperparameters: the existing model is continued, in file order on request
    out = _replay(server.url, train, "--model", "bc", "--file-order")
    assert out.returncode == 0, out.stderr
    assert f"model 'bc' continued (n_seen={len(X):,})" in out.stderr and "in file order" in out.stderr
    assert json.loads(out.stdout.splitlines()[-1])["model"]["n_seen"] == 2 * len(X)
    # other hyperparameters: refused without --replace, the model is untouched
    out = _replay(server.url, train, "--model", "bc", "--budget", "50")
    assert (
        out.returncode == 1 and "--replace" in out.stderr and "budget 500 (model) != 50 (given)" in out.stderr
    )
    with server.client() as c:
        assert c.get("/models/bc").json()["n_seen"] == 2 * len(X)
    # the same hyperparameters as the model's: continued
    out = _replay(server.url, train, "--model", "bc", "--budget", "500")
    assert out.returncode == 0 and "continued" in out.stderr, out.stderr
    out = _replay(server.url, train, "--model", "bc", "--budget", "50", "--replace")
    assert out.returncode == 0 and "model 'bc' replaced" in out.stderr, out.stderr
    info = json.loads(out.stdout.splitlines()[-1])["model"]
    assert info["config"]["budget"] == 50 and info["n_seen"] == len(X)
