"""Challengers of regression and novelty models through the real service (issue 38,
``docs/challengers.md``): the paired test on each task's loss (a regressor's absolute errors,
scaled by 4 σ of the first 200 targets and clipped; a novelty model's 0/1 loss of the outlier
flag against evaluation labels), a clearly better challenger promoted with its evidence in
``GET /models/{name}``, a worse one never, manual promotion of a novelty challenger without
labels, a replica serving the promoted model, OIP v2 outputs of the task, a rollback to before
the promotion, and challengers that survive a snapshot and restart exactly (max |Δ| = 0)."""

from __future__ import annotations

import re

import httpx
import numpy as np
import pytest

from tests.conftest import assert_examples_account, wait_for
from tests.test_task_service import blobs, friedman, post_rows

#: A champion whose γ is far too narrow for standardised rows (it predicts the mean, resp. one
#: score everywhere) and the good γ of a challenger (about "scale", 1/d, for these sets).
BAD, GOOD = {"gamma": 1000.0}, {"gamma": 0.2}
SEED = {"random_state": 3, "budget": 100}


def labelled_blobs(n: int, seed: int = 0, share: float = 0.1):
    """Inliers of :func:`blobs` (label 0) with a ``share`` of outliers (label 1): rows 8-20
    standard deviations away in a random direction."""
    rng = np.random.default_rng(seed + 100)
    X = blobs(n, seed)
    y = (rng.random(n) < share).astype(np.int64)
    far = rng.normal(size=(int(y.sum()), 4))
    far *= rng.uniform(8, 20, size=(far.shape[0], 1)) / np.linalg.norm(far, axis=1, keepdims=True)
    X[y == 1] = 100.0 + far * np.array([1.0, 5.0, 20.0, 50.0])
    return X, y


def stream(task: str, n: int, seed: int = 0):
    return friedman(n, seed) if task == "regression" else labelled_blobs(n, seed)


def outputs(c: httpx.Client, name: str, X) -> np.ndarray:
    """The task's values (regression) or scores (novelty) served for rows X."""
    r = c.post("/predict", json={"model": name, "X": X.tolist()})
    assert r.status_code == 200, r.text
    body = r.json()
    return np.asarray(body["values"] if "values" in body else body["scores"], dtype=np.float64)


def promotions_metric(c: httpx.Client, name: str) -> float:
    text = c.get("/metrics").text
    m = re.search(rf'^svmstream_promotions_total{{model="{re.escape(name)}"}} (\S+)$', text, re.M)
    assert m, "svmstream_promotions_total missing"
    return float(m.group(1))


def infer(c: httpx.Client, name: str, X) -> dict[str, dict]:
    tensor = {"name": "input", "datatype": "FP64", "shape": list(X.shape), "data": X.ravel().tolist()}
    r = c.post(f"/v2/models/{name}/infer", json={"inputs": [tensor]})
    assert r.status_code == 200, r.text
    return {o["name"]: o for o in r.json()["outputs"]}


def put(c: httpx.Client, name: str, body: dict) -> dict:
    r = c.put(f"/models/{name}", json=body)
    assert r.status_code == 201, r.text
    return r.json()


@pytest.mark.parametrize("task", ["regression", "novelty"])
def test_a_better_challenger_is_promoted_with_its_evidence_a_worse_one_never(
    task, start_server, own_redis, tmp_path
):
    """One learner and a replica: on the same stream a good-γ challenger beside a bad-γ champion
    is promoted on evidence (history, evidence, metric; the replica then serves it, OIP v2 gives
    the task's outputs of it), a bad-γ challenger beside a good champion never is; a rollback to
    a snapshot from before the promotion brings back the bad champion and its challenger."""
    learner = start_server(
        tmp_path / "learner", args=("--redis-url", own_redis.url, "--snapshot-interval", "100000")
    )
    replica = start_server(tmp_path / "replica", args=("--role", "replica", "--redis-url", own_redis.url))
    X, y = stream(task, 3000)
    probe = stream(task, 60, seed=9)[0]
    with learner.client() as c, replica.client() as rc:
        put(c, "better", {"task": task, **SEED, **BAD, "challengers": [GOOD]})
        put(c, "worse", {"task": task, **SEED, **GOOD, "challengers": [BAD]})
        post_rows(c, "better", X[:300], y[:300])
        before = c.post("/models/better/snapshot").json()["version"]
        served_before = outputs(c, "better", probe)
        post_rows(c, "better", X[300:], y[300:])
        post_rows(c, "worse", X, y)

        info = c.get("/models/better").json()
        assert info["promotion"]["promotions"] == 1 and info["config"]["gamma"] == GOOD["gamma"], info[
            "promotion"
        ]
        assert info["challengers"] == [] and promotions_metric(c, "better") == 1
        (event,) = [e for e in info["promotion"]["history"] if e["event"] == "promoted"]
        assert event["manual"] is False and event["settings"] == GOOD and event["previous"] == BAD
        evidence = event["evidence"]
        assert evidence["threshold"] == pytest.approx(160.0) and evidence["paired_examples"] >= 500
        assert evidence["e_value"] >= evidence["threshold"]
        assert evidence["wins"] > evidence["losses"]
        if task == "regression":  # |errors| scaled by 4 σ of the first 200 targets, clipped to [-1, 1]
            assert evidence["loss_scale"] == pytest.approx(4 * np.std(y[:200]), rel=1e-12)
            assert evidence["window_loss"] < evidence["champion_window_loss"]
            assert evidence["window_accuracy"] is None
        else:  # 0/1 losses of the outlier flag against the evaluation labels
            assert "loss_scale" not in evidence
            assert evidence["window_accuracy"] > evidence["champion_window_accuracy"]
        worse = c.get("/models/worse").json()
        assert worse["promotion"]["promotions"] == 0 and worse["config"]["gamma"] == GOOD["gamma"]
        (shadow,) = worse["challengers"]
        assert shadow["paired_examples"] >= 2000 and shadow["examples_seen"] == 3000 - 3000 % 128
        assert shadow["losses"] > shadow["wins"] and shadow["e_value"] < 1.0, shadow
        assert promotions_metric(c, "worse") == 0

        # the replica serves the promoted model; OIP v2 answers the task's outputs of it
        served = outputs(c, "better", probe)
        version = c.post("/models/better/snapshot").json()["version"]  # what the replica installs
        wait_for(lambda: (rc.get("/models/better").json().get("version") or -1) >= version, timeout=60,
                 what="the replica at the learner's version")  # fmt: skip
        theirs = rc.get("/models/better").json()
        assert (
            theirs["config"] == info["config"]
            and theirs["promotion"]["history"] == info["promotion"]["history"]
        )
        np.testing.assert_array_equal(outputs(rc, "better", probe), served)
        assert rc.post("/models/better/promote", json={"challenger": 0}).status_code == 409
        for client in (c, rc):
            tensors = infer(client, "better", probe)
            if task == "regression":
                assert [*tensors] == ["value", "decision"] and tensors["value"]["data"] == served.tolist()
            else:
                assert [*tensors] == ["outlier", "score", "decision"] and tensors["score"][
                    "data"
                ] == served.tolist()
        assert np.max(np.abs(served - served_before)) > 0

        # rollback to before the promotion: the bad champion and its challenger come back
        r = c.post("/models/better/rollback", json={"version": before})
        assert r.status_code == 200, r.text
        back = c.get("/models/better").json()
        assert back["config"]["gamma"] == BAD["gamma"] and [ch["settings"] for ch in back["challengers"]] == [
            GOOD
        ]
        np.testing.assert_array_equal(outputs(c, "better", probe), served_before)
        for name, sent in (("better", 300), ("worse", 3000)):
            assert_examples_account(c, name, sent=sent)
    replica.terminate()
    learner.terminate()


def test_a_novelty_challenger_without_labels_is_promoted_by_hand_only(start_server):
    """Rows without evaluation labels pair nothing: no evidence, no promotion on it; a manual
    promotion makes the challenger the champion at once."""
    server = start_server()
    X = blobs(2000)
    with server.client() as c:
        put(c, "n", {"task": "novelty", **SEED, **BAD, "challengers": [GOOD]})
        post_rows(c, "n", X)
        (ch,) = c.get("/models/n").json()["challengers"]
        assert (
            ch["paired_examples"] == 0
            and ch["examples_seen"] == 2000 - 2000 % 128
            and ch["log_e_value"] == 0.0
        )
        r = c.post("/models/n/promote", json={"challenger": 0})
        assert r.status_code == 200 and r.json()["config"]["gamma"] == GOOD["gamma"], r.text
        (event,) = r.json()["promotion"]["history"]
        assert event["event"] == "promoted" and event["manual"] is True
        scores = outputs(c, "n", np.array([[100.0, 100.0, 100.0, 100.0], [110.0, 150.0, 300.0, 600.0]]))
        assert scores[1] > scores[0]  # the good γ tells an outlier from the centre
        assert_examples_account(c, "n", sent=2000)
    server.terminate()


def test_a_novelty_challenger_is_promoted_once_feedback_labels_arrive(start_server):
    """Unlabelled rows pair nothing; labels that arrive later through ``/feedback`` (a user
    confirming or rejecting flags of remembered rows) are learned as evaluation labels, pair the
    models' outlier flags, and the better challenger is promoted on that evidence."""
    server = start_server()
    with server.client() as c:
        put(c, "f", {"task": "novelty", **SEED, **BAD, "challengers": [GOOD]})
        post_rows(c, "f", blobs(1024, seed=1))
        assert c.get("/models/f").json()["challengers"][0]["paired_examples"] == 0
        X, y = labelled_blobs(2048, seed=2)
        for lo in range(0, 2048, 256):
            body = {"model": "f", "X": X[lo : lo + 256].tolist(), "remember": True}
            ids = c.post("/predict", json=body).json()["ids"]
            r = c.post("/feedback", json={"model": "f", "ids": ids, "y": y[lo : lo + 256].tolist()})
            assert r.status_code == 200 and r.json()["learned"] == 256, r.text
        info = c.get("/models/f").json()
        (event,) = [e for e in info["promotion"]["history"] if e["event"] == "promoted"]
        assert event["manual"] is False and event["settings"] == GOOD and event["at"] > 1024
        assert (
            event["evidence"]["paired_examples"] >= 500
            and event["evidence"]["wins"] > event["evidence"]["losses"]
        )
        assert info["config"]["gamma"] == GOOD["gamma"]
        assert_examples_account(c, "f", sent=1024 + 2048)
    server.terminate()


def _every_model(c: httpx.Client, name: str, probe) -> list[np.ndarray]:
    """The champion's outputs, then each challenger's (promoted by hand in turn)."""
    out = [outputs(c, name, probe)]
    for _ in range(len(c.get(f"/models/{name}").json()["challengers"])):
        assert c.post(f"/models/{name}/promote", json={"challenger": 0}).status_code == 200
        out.append(outputs(c, name, probe))
    return out


FIGURES = ("paired_examples", "wins", "losses", "examples_seen", "log_e_value", "window_accuracy",
           "window_loss", "loss_scale")  # fmt: skip


@pytest.mark.parametrize("task", ["regression", "novelty"])
def test_challengers_survive_a_snapshot_and_restart_exactly(task, start_server, tmp_path):
    """A promotion on evidence, then a restart with rows of an open scoring cell held: the
    champion's and every challenger's outputs and figures, and the history, equal an
    uninterrupted run's (max |Δ| = 0), the batches cut differently."""
    X, y = stream(task, 2500, seed=5)
    probe = stream(task, 80, seed=50)[0]
    body = {"task": task, **SEED, **BAD, "challengers": [GOOD, {"gamma": 0.05}]}
    ref = start_server(tmp_path / "ref")
    with ref.client() as c:
        put(c, "m", body)
        post_rows(c, "m", X, y, batch=170)
        expected_info = c.get("/models/m").json()
        expected = _every_model(c, "m", probe)
    ref.terminate()
    assert expected_info["promotion"]["promotions"] >= 1, expected_info["promotion"]

    snap, env = tmp_path / "snap", {"SVMSTREAM_SNAPSHOT_INTERVAL_S": "0.2"}
    server = start_server(snap, env=env)
    with server.client() as c:
        put(c, "m", body)
        post_rows(c, "m", X[:1100], y[:1100], batch=130)
        before = c.get("/models/m").json()
        assert before["promotion"]["held"] == 1100 % 128
    server.terminate()
    server = start_server(snap, env=env)
    with server.client() as c:
        after = c.get("/models/m").json()
        assert after["challengers"] == before["challengers"] and after["promotion"]["held"] == 1100 % 128
        assert_examples_account(c, "m", sent=1100)
        post_rows(c, "m", X[1100:], y[1100:], batch=90)
        info = c.get("/models/m").json()
        assert info["n_seen"] == expected_info["n_seen"] == 2500
        for field in FIGURES:
            assert [ch.get(field) for ch in info["challengers"]] == [
                ch.get(field) for ch in expected_info["challengers"]
            ], field
        strip = [{k: v for k, v in e.items() if k != "time"} for e in info["promotion"]["history"]]
        assert strip == [
            {k: v for k, v in e.items() if k != "time"} for e in expected_info["promotion"]["history"]
        ]
        got = _every_model(c, "m", probe)
    server.terminate()
    for a, b in zip(got, expected, strict=True):
        assert np.max(np.abs(a - b)) == 0.0


def test_a_regression_drift_challenger_wins_after_the_target_changes(start_server):
    """``on_drift: "challenger"`` on a regression model: a detection starts a warm drift
    challenger (a copy of the champion with an empty rehearsal memory) at a scoring cell; it is not
    promoted while nothing changes, and once the relation flips half-way it adapts faster than the
    champion (which keeps rehearsing old rows) and is promoted on evidence; nothing is lost."""
    X, y = friedman(8000, seed=7)
    y = y.copy()
    y[4000:] = 2 * np.mean(y[:4000]) - y[4000:]  # the relation flips around the mean
    server = start_server()
    with server.client() as c:
        r = c.put("/models/d", json={"task": "regression", **SEED, "on_drift": "challenger"})
        assert r.status_code == 201 and r.json()["challengers"] == [], r.text
        assert r.json()["config"]["on_drift"] == "challenger" and r.json()["config"]["shuffle_buffer"] == 0
        post_rows(c, "d", X, y, batch=250)
        info = c.get("/models/d").json()
        history = info["promotion"]["history"]
        started = [e for e in history if e["event"] == "drift challenger started"]
        assert started and all(e["start"] == "warm" and e["at"] % 128 == 0 for e in started), history
        promoted = [e for e in history if e["event"] == "promoted"]
        assert promoted and all(4000 < p["at"] < 6000 and p["origin"] == "drift" for p in promoted), history
        for p in promoted:
            assert p["evidence"]["wins"] > p["evidence"]["losses"] and p["settings"] == {}
            assert p["evidence"]["window_loss"] < p["evidence"]["champion_window_loss"]
        assert promotions_metric(c, "d") == len(promoted)
        assert_examples_account(c, "d", sent=8000)
    server.terminate()


def _entries(X, y) -> list[dict[bytes, bytes]]:
    """Stream entries: raw float64 rows and the task's ``y`` (a number, or a 0/1 evaluation label)."""
    return [{b"y": repr(t.item()).encode(), b"xd": np.asarray(r, "<f8").tobytes()} for r, t in zip(X, y)]


def _outcome(c: httpx.Client, name: str, probe) -> dict:
    info = c.get(f"/models/{name}").json()
    return {
        "history": [{k: v for k, v in e.items() if k != "time"} for e in info["promotion"]["history"]],
        "figures": [{k: ch.get(k) for k in ("settings", "origin", "started_at", *FIGURES)} for ch in info["challengers"]],
        "outputs": _every_model(c, name, probe),
        "n_seen": info["n_seen"],
    }  # fmt: skip


@pytest.mark.parametrize("task", ["regression", "novelty"])
def test_challengers_of_a_task_through_the_stream_with_sigkills_equal_an_uninterrupted_run(
    task, redis_server, start_server, tmp_path
):
    """A task model with user challengers and ``on_drift="challenger"`` learns from its Redis
    stream while the service is SIGKILLed twice: the history (promotions, drift challengers),
    the challengers' figures and every model's outputs equal an uninterrupted run's (max |Δ| = 0)."""
    from tests.test_challengers_exactly_once import _env, _info
    from tests.test_stream import produce, unique

    n = 3000
    X, y = stream(task, n, seed=11)
    probe = stream(task, 60, seed=12)[0]
    config = {"task": task, **SEED, **BAD, "on_drift": "challenger", "challengers": [GOOD, {"gamma": 0.05}]}
    redis, snap = redis_server.client(), tmp_path / "snap"
    ref_name, name = unique("ref"), unique("killed")
    server = start_server(snap, env=_env(redis_server.url, f"{ref_name},{name}"))
    with server.client() as c:
        for model in (ref_name, name):
            put(c, model, config)
        produce(redis, f"svmstream:{ref_name}:examples", _entries(X, y))
        wait_for(lambda: c.get(f"/models/{ref_name}").json()["n_seen"] >= n, timeout=120, what="reference")
        ref = _outcome(c, ref_name, probe)
    assert any(e["event"] == "promoted" for e in ref["history"]), ref["history"]
    produce(redis, f"svmstream:{name}:examples", _entries(X, y))
    killed_at = []
    for at in (0.3, 0.65):
        seen = wait_for(lambda at=at, server=server: (k := _info(server, name)["n_seen"]) >= at * n and k,
                        timeout=120, interval=0.005, what=f"kill at {at}")  # fmt: skip
        server.kill()
        killed_at.append(seen)
        server = start_server(snap, env=_env(redis_server.url, name))
    assert all(k < n for k in killed_at), killed_at  # killed mid-stream
    with server.client() as c:
        wait_for(lambda: c.get(f"/models/{name}").json()["n_seen"] >= n, timeout=120, what="stream consumed")
        assert_examples_account(c, name, sent=n)
        got = _outcome(c, name, probe)
    server.terminate()
    assert redis.xpending(f"svmstream:{name}:examples", f"svmstream:{name}")["pending"] == 0
    assert got["history"] == ref["history"] and got["figures"] == ref["figures"]
    assert got["n_seen"] == ref["n_seen"] == n
    assert len(got["outputs"]) == len(ref["outputs"]) >= 2
    assert (
        max(float(np.max(np.abs(a - b))) for a, b in zip(got["outputs"], ref["outputs"], strict=True)) == 0.0
    )
