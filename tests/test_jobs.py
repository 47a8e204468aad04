"""Batch jobs end to end: a real ``svmstream serve`` process, real worker processes, real files.

One server (module scope) serves every test in file order; the last test restarts it on the
same snapshot directory.  Data: generated two-moons-like sets and scikit-learn's bundled
digits, written as LIBSVM/CSV files.
"""

from __future__ import annotations

import gzip
import os
import re
import signal
import time
from types import SimpleNamespace

import httpx
import numpy as np
import pytest

from tests.conftest import (
    ServerProcess,
    run_cli,
    two_moons_like,
    write_libsvm,
)

FINISHED = ("succeeded", "failed", "cancelled")


def _noisy_moons(n: int, seed: int, flip: float = 0.1):
    X, y = two_moons_like(n, seed=seed)
    rng = np.random.default_rng(seed + 100)
    mask = rng.random(n) < flip
    y[mask] = -y[mask]
    return X, y


def _digits():
    from sklearn.datasets import load_digits

    d = load_digits()
    X = d.data / 16.0
    rng = np.random.default_rng(0)
    order = rng.permutation(len(X))
    X, y = X[order], d.target[order]
    return X[:1200], y[:1200], X[1200:], y[1200:]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("jobs")
    data = root / "data"
    data.mkdir()
    X, y = two_moons_like(1500, seed=1)
    Xt, yt = two_moons_like(600, seed=2)
    write_libsvm(data / "moons.bz2", X, y)
    write_libsvm(data / "moons.t", Xt, yt)
    # long enough to be cancelled: ~30 s of DC-SVM with a process pool (n >= 5,000)
    write_libsvm(data / "long.libsvm", *_noisy_moons(8000, seed=3))
    (data / "bad.libsvm").write_text("1 1:0.5 2:0.1\n-1 1:0.2 2:oops\n1 1:0.3\n")
    secret = root / "secret.libsvm"
    write_libsvm(secret, X[:10], y[:10])
    os.symlink(secret, data / "link.libsvm")
    server_env = {
        "SVMSTREAM_DATA_DIR": str(data),
        "SVMSTREAM_JOBS_DIR": str(root / "jobs"),
        "SVMSTREAM_WARM_UP": "false",
        "SVMSTREAM_CREATE_DEFAULT_MODEL": "false",
        "SVMSTREAM_MAX_UPLOAD_BYTES": str(4 * 1024 * 1024),
    }
    ns = SimpleNamespace(
        root=root, data=data, X=X, y=y, Xt=Xt, yt=yt, secret=secret, server_env=server_env, decisions={}
    )
    ns.server = ServerProcess(root / "snap", root / "server-0.log", env=server_env).wait_ready()
    ns.client = httpx.Client(base_url=ns.server.url, timeout=60)
    yield ns
    ns.client.close()
    if ns.server.proc.poll() is None:
        ns.server.kill()


def wait_job(client: httpx.Client, job_id: str, timeout: float = 120.0, until=None):
    """Poll GET /jobs/{id} every 0.05 s until it finishes (or ``until(job)`` holds);
    returns ``(job, seen)`` with every running progress seen."""
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/jobs/{job_id}").json()
        if job["state"] == "running":
            seen.append(job["progress"])
        if job["state"] in FINISHED or (until is not None and until(job)):
            return job, seen
        time.sleep(0.05)
    raise TimeoutError(f"job {job_id} not finished after {timeout} s: {job}")


def predict_labels(client, model: str, X: np.ndarray) -> tuple[np.ndarray, list]:
    r = client.post("/predict", json={"model": model, "X": X.tolist()})
    assert r.status_code == 200, r.text
    body = r.json()
    return np.asarray(body["labels"]), body["decision"]


def submit_job(c, body: dict) -> dict:
    """POST /jobs; asserts 201 Created and returns the job record."""
    r = c.post("/jobs", json=body)
    assert r.status_code == 201, r.text
    return r.json()


# the DC-SVM job on the moons files of the two tests below (exact, and early prediction)
MOONS_DCSVM = {
    "algorithm": "dcsvm",
    "data": "moons.bz2",
    "test": "moons.t",
    "params": {"C": 10, "gamma": 1.0, "random_state": 0},
}


def test_dcsvm_job_over_http_progress_result_and_serving(env):
    from sklearn.svm import SVC

    c = env.client
    job = submit_job(c, {**MOONS_DCSVM, "model": "moons"})
    assert job["state"] in ("queued", "running") and job["model"] == "moons"
    job, seen = wait_job(c, job["id"])
    assert job["state"] == "succeeded", (job["error"], env.server.log_text()[-3000:])
    # progress was visible while it ran: solver stages with level/objective/violation
    solver_stages = {p["stage"] for p in seen if p.get("phase") == "training"}
    assert solver_stages & {"kmeans", "level", "refine", "global"}, seen[-5:]
    timeline = {(e["stage"], e.get("level")) for e in job["timeline"]}
    assert {
        ("loading", None),
        ("training", None),
        ("level", 4),
        ("level", 1),
        ("global", 0),
        ("testing", None),
    } <= timeline, job["timeline"]
    level = next(e for e in job["timeline"] if e["stage"] == "level" and e["level"] == 4)
    assert level["subproblems_done"] == level["subproblems"] and level["objective"] > 0
    res = job["result"]
    assert (
        res["model"] == "moons"
        and res["mode"] == "exact"
        and res["n_train"] == 1500
        and res["n_features"] == 8
    )
    assert 0 < res["n_sv"] <= 1500 and res["train_seconds"] > 0 and res["classes"] == [-1, 1]
    # the served model predicts the test file at the accuracy the worker measured ...
    labels, decision = predict_labels(c, "moons", env.Xt)
    acc = float(np.mean(labels == env.yt))
    assert acc == pytest.approx(res["test_accuracy"], abs=1e-12)
    # ... which is that of an exact SVM (LIBSVM, same C and gamma) up to its intercept handling
    svc = SVC(C=10, gamma=1.0).fit(env.X, env.y).score(env.Xt, env.yt)
    assert abs(acc - svc) <= 0.02, (acc, svc)
    env.decisions["moons"] = decision
    info = c.get("/models/moons").json()
    assert info["algorithm"] == "dcsvm" and info["fitted"] and info["n_features"] == 8
    assert info["extra"]["job"]["id"] == job["id"] and info["extra"]["job"]["n_sv"] == res["n_sv"]
    assert info["last_snapshot_path"]  # snapshotted at registration
    # a batch model does not learn online
    r = c.post("/learn", json={"model": "moons", "X": env.Xt[:3].tolist(), "y": env.yt[:3].tolist()})
    assert r.status_code == 409 and "trained by a batch job" in r.json()["detail"]
    assert [j["id"] for j in c.get("/jobs").json()["jobs"]][0] == job["id"]


def test_dcsvm_early_prediction_job(env):
    c = env.client
    job, _ = wait_job(c, submit_job(c, {**MOONS_DCSVM, "early_level": 2, "model": "moons-early"})["id"])
    assert job["state"] == "succeeded", job["error"]
    res = job["result"]
    assert res["mode"] == "early" and res["early_level"] == 2 and res["early_clusters"] == 16
    assert not any(e["stage"] == "global" for e in job["timeline"])  # stopped after level 2
    labels, decision = predict_labels(c, "moons-early", env.Xt)
    assert float(np.mean(labels == env.yt)) == pytest.approx(res["test_accuracy"], abs=1e-12)
    assert res["test_accuracy"] > 0.8
    env.decisions["moons-early"] = decision


def test_upload_and_multiclass_avsf_job(env, tmp_path):
    from sklearn.svm import LinearSVC

    c = env.client
    X, y, Xt, yt = _digits()
    train = write_libsvm(tmp_path / "digits.libsvm", X, y)
    gz = tmp_path / "digits.libsvm.gz"
    gz.write_bytes(gzip.compress(train.read_bytes()))
    r = c.post("/uploads", params={"filename": gz.name}, content=gz.read_bytes())  # raw body
    assert r.status_code == 201, r.text
    up_train = r.json()
    assert (
        up_train["format"] == "libsvm"
        and up_train["compression"] == "gzip"
        and up_train["id"].startswith("up-")
    )
    csv = (
        "label,"
        + ",".join(f"f{j}" for j in range(X.shape[1]))
        + "\n"
        + "".join(f"{int(lab)}," + ",".join(f"{v:.6g}" for v in row) + "\n" for row, lab in zip(Xt, yt))
    )
    r = c.post("/uploads", files={"file": ("digits_test.csv", csv.encode(), "text/csv")})  # multipart
    assert r.status_code == 201, r.text
    up_test = r.json()
    assert up_test["format"] == "csv" and up_test["compression"] is None
    assert {u["id"] for u in c.get("/uploads").json()["uploads"]} >= {up_train["id"], up_test["id"]}
    body = {
        "algorithm": "avsf",
        "data": up_train["id"],
        "test": up_test["id"],
        "params": {"C": 1.0, "tol": 0.01, "random_state": 0},
        "model": "digits",
    }
    job, _ = wait_job(c, submit_job(c, body)["id"])
    assert job["state"] == "succeeded", job["error"]
    res = job["result"]
    assert res["mode"] == "linear" and res["classes"] == list(range(10)) and res["n_sv"] is None
    assert any(
        e["stage"] == "solve" and e.get("problem") == 9 for e in job["timeline"]
    )  # one-vs-rest, 10 problems
    labels, decision = predict_labels(c, "digits", Xt)
    assert np.asarray(decision).shape == (len(Xt), 10)  # one-vs-rest scores; label = argmax
    np.testing.assert_array_equal(labels, np.argmax(decision, axis=1))
    acc = float(np.mean(labels == yt))
    assert acc == pytest.approx(res["test_accuracy"], abs=1e-12)
    ref = LinearSVC(C=1.0, loss="hinge", dual=True, fit_intercept=False, tol=1e-4, max_iter=100_000)
    assert abs(acc - ref.fit(X, y).score(Xt, yt)) <= 0.02
    env.decisions["digits"] = decision
    assert c.get("/models/digits").json()["algorithm"] == "avsf"


def _start_long_job(c, model: str) -> dict:
    body = {
        "algorithm": "dcsvm",
        "data": "long.libsvm",
        "model": model,
        "params": {"C": 1000, "gamma": 4.0, "tol": 1e-5, "random_state": 0, "n_jobs": 2},
    }
    job, _ = wait_job(
        c,
        submit_job(c, body)["id"],
        until=lambda j: (
            j["progress"].get("stage") in ("level", "kmeans") and j["progress"].get("phase") == "training"
        ),
    )
    assert job["state"] == "running", job
    return job


def _group_gone(pgid: int, timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_cancel_stops_the_worker_within_a_second(env):
    c = env.client
    job = _start_long_job(c, "long")
    # /predict keeps answering while the job's pool computes
    for _ in range(3):
        labels, _ = predict_labels(c, "moons", env.Xt[:50])
        assert len(labels) == 50
    t0 = time.monotonic()
    r = c.delete(f"/jobs/{job['id']}")
    wall = time.monotonic() - t0
    assert r.status_code == 200, r.text
    done = r.json()
    assert done["state"] == "cancelled" and done["result"] is None
    assert done["cancel"]["stopped_after_s"] < 1.0, done["cancel"]
    assert wall < 2.0, wall
    assert _group_gone(job["pid"]), "worker or its pool processes still alive"
    assert c.get("/models/long").status_code == 404
    assert c.delete(f"/jobs/{job['id']}").status_code == 409  # already finished


def test_crashed_worker_marks_the_job_failed_with_the_reason(env):
    c = env.client
    job, _ = wait_job(
        c, submit_job(c, {"algorithm": "liblinear-cd", "data": "bad.libsvm", "model": "bad"})["id"]
    )
    assert job["state"] == "failed" and "bad.libsvm" in job["error"] and "LIBSVM" in job["error"], job[
        "error"
    ]
    assert c.get("/models/bad").status_code == 404
    # a worker killed from outside (out-of-memory killer, segfault, ...)
    job = _start_long_job(c, "killed")
    os.kill(job["pid"], signal.SIGKILL)
    job, _ = wait_job(c, job["id"], timeout=30)
    assert job["state"] == "failed" and "SIGKILL" in job["error"], job["error"]
    assert _group_gone(job["pid"])
    # the server is unaffected and runs the next job
    r = c.post("/jobs", json={"algorithm": "liblinear-cd", "data": "moons.bz2", "model": "moons-linear"})
    job, _ = wait_job(c, r.json()["id"])
    assert job["state"] == "succeeded", job["error"]


def test_refused_jobs_and_uploads(env):
    c = env.client
    base = {"algorithm": "avsf", "model": "m1"}

    def post(**kw):
        return c.post("/jobs", json={**base, **kw})

    r = post(data="../secret.libsvm")
    assert r.status_code == 403 and "path traversal" in r.json()["detail"]
    r = post(data="sub/../../secret.libsvm")
    assert r.status_code == 403
    r = post(data=str(env.secret))  # absolute path outside the data directory
    assert r.status_code == 403 and "outside" in r.json()["detail"]
    r = post(data="link.libsvm")  # a symbolic link pointing outside
    assert r.status_code == 403 and "outside" in r.json()["detail"]
    r = post(data="moons.bz2", test="../secret.libsvm")
    assert r.status_code == 403 and r.json()["field"] == "test"
    assert post(data="nope.libsvm").status_code == 404
    assert post(data="up-" + "0" * 20).status_code == 404
    r = post(data="moons.bz2", params={"bogus": 1})
    assert r.status_code == 422 and "bogus" in r.json()["detail"]
    assert post(data="moons.bz2", params={"C": -1}).status_code == 422
    assert post(data="moons.bz2", early_level=2).status_code == 422  # dcsvm only
    assert post(data="moons.bz2", algorithm="svm").status_code == 422
    assert post(data="moons.bz2", model="bad name").status_code == 422
    r = post(data="moons.bz2", model="moons")  # exists, replace not given
    assert r.status_code == 409 and "replace" in r.json()["detail"]
    assert c.get("/jobs/0123456789abcdef").status_code == 404
    # batch algorithms cannot be created empty through PUT /models
    assert c.put("/models/x", json={"algorithm": "dcsvm"}).status_code == 422
    # uploads: size limit (4 MiB in this server) and content check
    r = c.post("/uploads", content=b"1 1:0.5\n" * (600 * 1024))
    assert r.status_code == 413
    r = c.post("/uploads", content=os.urandom(4096))
    assert r.status_code == 422 and "not a LIBSVM or CSV" in r.json()["detail"]
    assert c.post("/uploads", content=b"").status_code == 422
    assert not [
        p for p in (env.root / "jobs" / "uploads").iterdir() if p.name.startswith(".")
    ]  # no temp left


def test_train_cli_submits_to_the_server(env, tmp_path, capsys):
    import json

    from svmstream.app.cli.main import main

    X, y, Xt, yt = _digits()
    train = write_libsvm(tmp_path / "d.libsvm", X[:600], y[:600] % 2)
    test = write_libsvm(tmp_path / "d.t.libsvm", Xt, yt % 2)
    # the console entry point in its own process: files uploaded (POST /uploads), one JSON line
    argv = [
        "train",
        "--algorithm",
        "liblinear-cd",
        str(train),
        "--test",
        str(test),
        "--C",
        "1",
        "--server",
        env.server.url,
        "--model",
        "cli-upload",
        "--json",
        "--no-progress",
    ]
    out = run_cli(argv, timeout=120)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["model"] == "cli-upload" and 0.8 < res["test_accuracy"] <= 1.0
    labels, _ = predict_labels(env.client, "cli-upload", Xt)
    assert float(np.mean(labels == yt % 2)) == pytest.approx(res["test_accuracy"], abs=1e-12)
    # --server-path: files named in the server's data directory; progress display on
    argv = [
        "train",
        "--algorithm",
        "dcsvm",
        "moons.bz2",
        "--test",
        "moons.t",
        "--early-level",
        "3",
        "--C",
        "10",
        "--gamma",
        "1",
        "--server",
        env.server.url,
        "--server-path",
        "--model",
        "cli-path",
    ]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "test accuracy on moons.t:" in captured.out and "served as model 'cli-path'" in captured.out
    # one line per level (stderr is no terminal: no bars), levels finished between two polls included
    assert re.search(
        r"level 4 \(\d+ clusters\).*\n(.*\n)*.*level 3 \(64 clusters\): 64/64 sub", captured.err
    ), captured.err
    # a refused request is one error line and exit status 1
    argv[argv.index("--early-level") + 1] = "9"
    assert main(argv) == 1
    assert "early_level" in capsys.readouterr().err


def test_batch_models_survive_a_restart(env):
    env.server.terminate()
    env.server = ServerProcess(env.root / "snap", env.root / "server-1.log", env=env.server_env).wait_ready()
    env.client.close()
    env.client = c = httpx.Client(base_url=env.server.url, timeout=60)
    assert c.get("/jobs").json()["jobs"] == []  # job records are in memory only
    X, y, Xt, yt = _digits()
    for model, rows in (("moons", env.Xt), ("moons-early", env.Xt), ("digits", Xt)):
        info = c.get(f"/models/{model}").json()
        assert info["fitted"] and info["extra"]["job"]["algorithm"] in ("dcsvm", "avsf")
        _, decision = predict_labels(c, model, rows)
        assert decision == env.decisions[model]  # bit-identical after snapshot + restore
    r = c.post("/learn", json={"model": "digits", "X": Xt[:2].tolist(), "y": yt[:2].tolist()})
    assert r.status_code == 409
