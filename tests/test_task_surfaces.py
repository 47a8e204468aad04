"""The service's other surfaces for regression and novelty models (issue 38), through real
processes: versions, a pinned prediction and a rollback, a prediction replica through Redis, OIP v2
``/infer`` and MLflow ``/invocations`` outputs, delayed numeric feedback learned once per id,
Prometheus figures, and the settings a task's challenger or ``on_drift`` does not take refused by
name (challengers themselves: tests/test_task_challengers.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import assert_examples_account, wait_for
from tests.test_task_service import blobs, friedman, post_rows, refused

NEVER = "100000"  # snapshots only when the test asks


def _snapshot(c, name: str) -> int:
    r = c.post(f"/models/{name}/snapshot")
    assert r.status_code == 200, r.text
    return r.json()["version"]


def _values(c, name: str, X, version=None) -> tuple[list[float], int]:
    body = {"model": name, "X": X.tolist()}
    if version is not None:
        body["version"] = version
    r = c.post("/predict", json=body)
    assert r.status_code == 200, r.text
    answer = r.json()
    return answer.get("values", answer.get("scores")), answer["model_version"]


@pytest.mark.parametrize("task", ["regression", "novelty"])
def test_versions_pinned_predictions_rollback_oip_mlflow_and_metrics(task, start_server):
    server = start_server(args=("--snapshot-interval", NEVER))
    X, y = friedman(2000) if task == "regression" else (blobs(2000), None)
    probe = X[:50] * 1.01
    with server.client() as c:
        # a challenger takes its task's settings only; a task model has no schedule to reset
        foreign = {"nu": 0.3} if task == "regression" else {"C": 2.0}
        refused(
            c.put("/models/t", json={"task": task, "challengers": [foreign]}),
            f"challengers[0].{[*foreign][0]}",
        )
        refused(c.put("/models/t", json={"task": task, "challengers": [{"task": "classification"}]}),
                "challengers[0].task")  # fmt: skip
        refused(c.put("/models/t", json={"task": task, "on_drift": "reset_schedule"}), "on_drift")
        assert c.put("/models/t", json={"task": task}).status_code == 201
        post_rows(c, "t", X[:1000], None if y is None else y[:1000])
        clean = _snapshot(c, "t")
        clean_values, _ = _values(c, "t", probe)
        # a bad upstream change: the target shifted by 5 standard deviations / the rows moved
        if y is None:
            post_rows(c, "t", X[1000:] + 60.0)
        else:
            post_rows(c, "t", X[1000:], y[1000:] + 5 * np.std(y))
        bad = _snapshot(c, "t")
        bad_values, _ = _values(c, "t", probe)
        assert np.max(np.abs(np.subtract(clean_values, bad_values))) > 1e-3
        assert _values(c, "t", probe, version=clean) == (clean_values, clean)

        r = c.post("/models/t/rollback", json={"version": clean})
        assert r.status_code == 200, r.text
        live, version = _values(c, "t", probe)
        assert live == clean_values and version == bad + 1

        # OIP v2: the task's outputs (metadata and infer agree), MLflow: the task's predictions
        meta = c.get("/v2/models/t").json()
        names = [o["name"] for o in meta["outputs"]]
        assert names == (["value", "decision"] if task == "regression" else ["outlier", "score", "decision"])
        tensor = {
            "name": "input",
            "datatype": "FP64",
            "shape": list(probe.shape),
            "data": probe.ravel().tolist(),
        }
        infer = c.post("/v2/models/t/infer", json={"inputs": [tensor]})
        assert infer.status_code == 200, infer.text
        outputs = {o["name"]: o for o in infer.json()["outputs"]}
        assert [o["name"] for o in infer.json()["outputs"]] == names
        mlflow = c.post("/invocations", json={"instances": probe.tolist(), "params": {"model": "t"}})
        mlflow = mlflow.json()["predictions"]
        if task == "regression":
            assert outputs["value"]["data"] == live and mlflow == live
        else:
            assert outputs["score"]["data"] == live and outputs["outlier"]["datatype"] == "BOOL"
            assert mlflow == outputs["outlier"]["data"]
        assert (
            c.post(
                "/invocations",
                json={"instances": probe.tolist(), "params": {"model": "t", "output": "proba"}},
            ).status_code
            == 400
        )

        metrics = c.get("/metrics").text
        wanted = (
            "svmstream_prequential_rmse" if task == "regression" else "svmstream_prequential_outlier_rate"
        )
        assert any(line.startswith(wanted + '{model="t"}') for line in metrics.splitlines()), wanted
        assert_examples_account(c, "t", sent=1000)  # the rolled-back version's account
    server.terminate()


def test_delayed_numeric_feedback_learns_each_id_once(start_server):
    server = start_server(args=("--snapshot-interval", NEVER))
    X, y = friedman(1500)
    with server.client() as c:
        assert c.put("/models/f", json={"task": "regression"}).status_code == 201
        post_rows(c, "f", X[:1000], y[:1000])
        answer = c.post("/predict", json={"model": "f", "X": X[1000:1100].tolist(), "remember": True}).json()
        ids = answer["ids"]
        assert len(ids) == 100 and len(answer["values"]) == 100
        refused(c.post("/feedback", json={"model": "f", "ids": ids[:2], "y": [1.0, "x"]}), "y[1]")
        r = c.post("/feedback", json={"model": "f", "ids": ids, "y": y[1000:1100].tolist()})
        assert r.status_code == 200, r.text
        assert r.json()["learned"] == 100
        again = c.post("/feedback", json={"model": "f", "ids": ids, "y": y[1000:1100].tolist()}).json()
        assert again["learned"] == 0 and again["duplicate"] == 100
        info = c.get("/models/f").json()
        assert info["n_seen"] == 1100
        assert_examples_account(c, "f", sent=1100)
    server.terminate()


@pytest.mark.parametrize("task", ["regression", "novelty"])
def test_a_replica_serves_the_snapshots_of_a_task_model_exactly(task, start_server, own_redis, tmp_path):
    learner = start_server(
        tmp_path / "learner",
        args=(
            "--redis-url",
            own_redis.url,
            "--snapshot-interval",
            "0.3",
            "--advertise-url",
            "http://learner:8000",
        ),
    )
    replica = start_server(tmp_path / "replica", args=("--role", "replica", "--redis-url", own_redis.url))
    X, y = friedman(1500) if task == "regression" else (blobs(1500), None)
    probe = X[:100]
    with learner.client() as lc, replica.client() as rc:
        assert lc.put("/models/r", json={"task": task}).status_code == 201
        post_rows(lc, "r", X, y, batch=500)
        version = lc.get("/models/r").json()["version"]
        wait_for(
            lambda: (
                rc.get("/models/r").status_code == 200 and rc.get("/models/r").json()["version"] >= version
            ),
            timeout=60,
            what="the replica at the learner's version",
        )
        body = {"model": "r", "X": probe.tolist(), **({"interval": 0.9} if task == "regression" else {})}
        mine, theirs = lc.post("/predict", json=body).json(), rc.post("/predict", json=body).json()
        keys = ("values", "lower", "upper") if task == "regression" else ("scores", "outlier", "threshold")
        for key in keys:
            assert mine[key] == theirs[key]
        assert rc.get("/models/r").json()["task"] == task
        assert rc.post("/learn", json={"model": "r", "X": probe[:2].tolist()}).status_code == 409
