"""DC-SVM, batch jobs and search jobs on a real ``dask.distributed.LocalCluster``.

One cluster (2 worker processes, 1 thread each) serves the module.  DC-SVM on the cluster
must give the local run's dual objective and predictions; a search job through a real
server (``SVMSTREAM_DASK_ADDRESS``) on raw features with string labels must pick what plain
``GridSearchCV`` picks on the same folds, and its best model must answer ``/predict`` and go
on learning through ``/learn``; bad grids answer 422 naming the field.
"""

from __future__ import annotations

from types import SimpleNamespace

import httpx
import numpy as np
import pytest

from tests.conftest import ServerProcess, two_moons_like, write_libsvm

distributed = pytest.importorskip("distributed")

FINISHED = ("succeeded", "failed", "cancelled")


def _raw_moons(n: int, seed: int):
    """Two moons in 8 dimensions on raw, unscaled feature ranges, 5% labels flipped."""
    X, y = two_moons_like(n, seed=seed)
    X = X * np.array([120.0, 0.5, 3.0, 40.0, 1.0, 1.0, 2.0, 900.0]) + 17.0
    rng = np.random.default_rng(seed + 7)
    flip = rng.random(n) < 0.05
    y[flip] = -y[flip]
    return X, y


@pytest.fixture(scope="module")
def cluster():
    with (
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
        ) as cl,
        distributed.Client(cl) as client,
    ):
        yield SimpleNamespace(cluster=cl, client=client, address=cl.scheduler_address)


def test_dcsvm_on_the_cluster_equals_the_local_run(cluster):
    import joblib

    from svmstream.solvers import DCSVMClassifier
    from svmstream.solvers.exact import _dask

    X, y = _raw_moons(6000, seed=11)
    Xt, _ = _raw_moons(1000, seed=12)
    params = dict(C=4.0, gamma="scale", n_levels=2, random_state=0, tol=1e-4)
    local = DCSVMClassifier(**params, n_jobs=1).fit(X, y)
    assert _dask.active_client() is None
    with joblib.parallel_backend("dask"):
        assert _dask.active_client() is cluster.client
        remote = DCSVMClassifier(**params).fit(X, y)
    # the level sub-problems ran in both worker processes (each loaded the solver once)
    assert all(cluster.client.run(lambda: _dask._worker_ready).values())
    levels = [h for h in remote.fit_history_[0] if h["stage"] == "level"]
    assert [h["level"] for h in levels] == [2, 1] and levels[0]["n_clusters"] == 16
    rel = abs(remote.dual_objective_[0] - local.dual_objective_[0]) / abs(local.dual_objective_[0])
    assert rel <= 1e-6, (remote.dual_objective_, local.dual_objective_)
    np.testing.assert_array_equal(remote.predict(Xt), local.predict(Xt))
    np.testing.assert_array_equal(remote.predict(X), local.predict(X))
    # a cloned estimator keeps its parameters (no client object among them)
    from sklearn.base import clone

    assert clone(remote).get_params() == DCSVMClassifier(**params).get_params()


def _write_csv(path, X, labels):
    with open(path, "w") as fh:
        fh.write("kind," + ",".join(f"f{j}" for j in range(X.shape[1])) + "\n")
        for label, row in zip(labels, X):
            fh.write(label + "," + ",".join(repr(float(v)) for v in row) + "\n")


@pytest.fixture(scope="module")
def server(cluster, tmp_path_factory):
    root = tmp_path_factory.mktemp("dask")
    data = root / "data"
    data.mkdir()
    X, y = _raw_moons(900, seed=21)
    labels = np.where(y > 0, "spam", "ham")
    _write_csv(data / "mail.csv", X, labels)
    Xb, yb = _raw_moons(6000, seed=22)
    write_libsvm(data / "big.libsvm", Xb, yb)
    env = {
        "SVMSTREAM_DATA_DIR": str(data),
        "SVMSTREAM_JOBS_DIR": str(root / "jobs"),
        "SVMSTREAM_WARM_UP": "false",
        "SVMSTREAM_CREATE_DEFAULT_MODEL": "false",
        "SVMSTREAM_DASK_ADDRESS": cluster.address,
    }
    srv = ServerProcess(root / "snap", root / "server.log", env=env).wait_ready()
    client = httpx.Client(base_url=srv.url, timeout=60)
    yield SimpleNamespace(server=srv, client=client, data=data, X=X, labels=labels, Xb=Xb, yb=yb)
    client.close()
    srv.kill()


def _wait(c: httpx.Client, job_id: str, timeout: float = 300.0) -> dict:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = c.get(f"/jobs/{job_id}").json()
        if job["state"] in FINISHED:
            return job
        time.sleep(0.1)
    raise TimeoutError(job)


def test_search_job_on_the_cluster_matches_grid_search_cv_and_serves(server):
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    from svmstream.app.jobs.datasets import load_dataset, prepare_X
    from svmstream.app.jobs.search import estimator_param, json_param, make_base

    c = server.client
    grid = {"C": [0.5, 20.0], "gamma": [0.001, 0.05, 2.0]}
    r = c.post(
        "/jobs",
        json={
            "algorithm": "search",
            "estimator": "bsgd",
            "grid": grid,
            "cv": 3,
            "data": "mail.csv",
            "model": "mail",
        },
    )
    assert r.status_code == 201, r.text
    job = _wait(c, r.json()["id"])
    assert job["state"] == "succeeded", (job["error"], server.server.log_text()[-3000:])
    search = job["result"]["search"]
    assert search["backend"] == "dask" and search["n_candidates"] == 6 and len(search["table"]) == 6
    assert job["result"]["classes"] == ["ham", "spam"]
    assert {tuple(sorted(row["params"])) for row in search["table"]} == {("C", "gamma")}
    assert all(len(row["fold_scores"]) == 3 for row in search["table"])
    # plain GridSearchCV on the same rows, estimator and folds picks the same candidate
    X, y = load_dataset(server.data / "mail.csv")
    classes, y_idx = np.unique(y, return_inverse=True)
    # (the base is the service's model: the plain estimator's parameters are estimator__<name>)
    plain = GridSearchCV(
        make_base("bsgd", search["base_params"]),
        {estimator_param(name, "bsgd"): values for name, values in grid.items()},
        cv=StratifiedKFold(3, shuffle=True, random_state=0),
    ).fit(prepare_X(X), y_idx)
    best = {json_param(name): value for name, value in plain.best_params_.items()}
    assert search["best_params"] == best
    assert search["best_score"] == pytest.approx(plain.best_score_, abs=1e-12)
    # the best model answers /predict with the string labels, as the refitted estimator does
    r = c.post("/predict", json={"model": "mail", "X": server.X[:200].tolist()})
    assert r.status_code == 200, r.text
    ours = np.asarray(r.json()["labels"])
    np.testing.assert_array_equal(ours, classes[plain.best_estimator_.predict(prepare_X(X[:200]))])
    info = c.get("/models/mail").json()
    assert info["algorithm"] == "bsgd" and info["config"]["C"] == best["C"]
    # an online model: it keeps learning
    v0 = info["version"]
    r = c.post(
        "/learn", json={"model": "mail", "X": server.X[:50].tolist(), "y": server.labels[:50].tolist()}
    )
    assert r.status_code == 200, r.text
    assert r.json()["version"] > v0


def test_dcsvm_job_runs_on_the_cluster(server):
    from svmstream.solvers import DCSVMClassifier

    c = server.client
    params = {"C": 4.0, "gamma": 0.002, "n_levels": 2, "random_state": 0, "probability": False}
    r = c.post("/jobs", json={"algorithm": "dcsvm", "data": "big.libsvm", "model": "big", "params": params})
    assert r.status_code == 201, r.text
    job = _wait(c, r.json()["id"])
    assert job["state"] == "succeeded", (job["error"], server.server.log_text()[-3000:])
    assert {("level", 2), ("level", 1), ("global", 0)} <= {
        (e["stage"], e.get("level")) for e in job["timeline"]
    }
    from svmstream.app.jobs.datasets import load_dataset, prepare_X

    X, y = load_dataset(server.data / "big.libsvm")  # the rows as the job read them
    Xb = prepare_X(X)
    local = DCSVMClassifier(**params, n_jobs=1).fit(Xb, np.searchsorted([-1.0, 1.0], y))
    rel = abs(job["result"]["dual_objective"][0] - local.dual_objective_[0]) / abs(local.dual_objective_[0])
    assert rel <= 1e-6
    r = c.post("/predict", json={"model": "big", "X": Xb[:300].tolist()})
    assert r.status_code == 200
    np.testing.assert_array_equal(
        np.asarray(r.json()["labels"], dtype=float), np.array([-1.0, 1.0])[local.predict(Xb[:300])]
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"estimator": "bsgd", "grid": {"C": [1, 2], "sigma": [1]}}, "grid.sigma"),
        ({"estimator": "bsgd", "grid": {"C": [-1, 2]}}, "grid.C"),
        ({"estimator": "bsgd", "grid": {"C": []}}, "grid.C"),
        ({"estimator": "bsgd", "grid": {"C": 3}}, "grid.C"),
        ({"estimator": "avsf", "grid": {"gamma": [1.0]}}, "grid.gamma"),
        ({"estimator": "bsgd", "grid": {"C": list(range(1, 21)), "gamma": list(range(1, 21))}}, "grid"),
        ({"estimator": "bsgd", "grid": {}}, "grid"),
        ({"estimator": "svc", "grid": {"C": [1]}}, "estimator"),
        ({"estimator": "bsgd", "grid": {"C": [1]}, "cv": 1}, "cv"),
        ({"estimator": "bsgd", "grid": {"C": [1]}, "cv": 11}, "cv"),
        ({"estimator": "bsgd", "grid": {"C": [1]}, "params": {"budget": 0}}, "params"),
    ],
)
def test_bad_search_requests_answer_422_naming_the_field(server, body, field):
    c = server.client
    before = c.get("/jobs").json()["jobs"]
    r = c.post("/jobs", json={"algorithm": "search", "data": "mail.csv", "model": "bad", **body})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field, r.json()
    assert field.split(".")[0] in r.json()["detail"]
    assert c.get("/jobs").json()["jobs"] == before  # nothing queued


def test_grid_on_a_training_job_is_refused(server):
    r = server.client.post(
        "/jobs", json={"algorithm": "dcsvm", "data": "mail.csv", "model": "x", "grid": {"C": [1]}}
    )
    assert r.status_code == 422 and r.json()["field"] == "grid"


def test_search_cli_on_the_server_and_locally(server, tmp_path):
    import json

    from tests.conftest import run_cli

    csv = str(server.data / "mail.csv")
    grid = ["--grid", "C=0.1,1,10"]
    r = run_cli(
        [
            "search",
            csv,
            "--estimator",
            "avsf",
            *grid,
            "--server",
            server.server.url,
            "--model",
            "mail-lin",
            "--json",
        ],
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    remote = json.loads(r.stdout.strip().splitlines()[-1])
    assert remote["search"]["backend"] == "dask" and remote["model"] == "mail-lin"
    r = run_cli(
        ["search", csv, "--estimator", "avsf", *grid, "--save", str(tmp_path / "best.svmstate")], timeout=300
    )
    assert r.returncode == 0, r.stderr
    assert "rank" in r.stdout and "best:" in r.stdout and (tmp_path / "best.svmstate").exists()
    local = json.loads(
        run_cli(["search", csv, "--estimator", "avsf", *grid, "--json"], timeout=300).stdout.splitlines()[-1]
    )
    assert local["search"]["backend"] == "local"
    assert local["search"]["best_params"] == remote["search"]["best_params"]
    assert [row["mean_test_score"] for row in local["search"]["table"]] == [
        row["mean_test_score"] for row in remote["search"]["table"]
    ]
    r = run_cli(["search", csv, "--estimator", "avsf", "--grid", "gamma=1"], timeout=120)
    assert r.returncode == 1 and "grid.gamma" in r.stderr


def test_search_job_without_a_cluster_runs_in_a_worker_process(start_server, tmp_path):
    """No SVMSTREAM_DASK_ADDRESS: the search runs in the job's local worker process (DC-SVM
    candidates here, string labels), and picks what plain GridSearchCV picks."""
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    from svmstream.app.jobs.datasets import load_dataset, prepare_X
    from svmstream.app.jobs.search import make_base

    data = tmp_path / "data"
    data.mkdir()
    X, y = _raw_moons(600, seed=31)
    _write_csv(data / "pix.csv", X, np.where(y > 0, "skin", "other"))
    srv = start_server(
        env={
            "SVMSTREAM_DATA_DIR": str(data),
            "SVMSTREAM_JOBS_DIR": str(tmp_path / "jobs"),
            "SVMSTREAM_WARM_UP": "false",
            "SVMSTREAM_CREATE_DEFAULT_MODEL": "false",
            "SVMSTREAM_JOB_DCSVM_N_JOBS": "1",
        }
    )
    with srv.client() as c:
        body = {
            "algorithm": "search",
            "estimator": "dcsvm",
            "grid": {"C": [0.5, 8.0], "gamma": [0.0001, 0.01]},
            "cv": 2,
            "random_state": 3,
            "params": {"probability": False, "n_levels": 1},
            "data": "pix.csv",
            "model": "pix",
        }
        r = c.post("/jobs", json=body)
        assert r.status_code == 201, r.text
        assert r.json()["search"]["estimator"] == "dcsvm"
        job = _wait(c, r.json()["id"])
        assert job["state"] == "succeeded", (job["error"], srv.log_text()[-3000:])
        search = job["result"]["search"]
        assert search["backend"] == "local" and search["base_params"]["n_jobs"] == 1
        Xf, yl = load_dataset(data / "pix.csv")
        classes, y_idx = np.unique(yl, return_inverse=True)
        plain = GridSearchCV(
            make_base("dcsvm", search["base_params"]),
            body["grid"],
            cv=StratifiedKFold(2, shuffle=True, random_state=3),
        ).fit(prepare_X(Xf), y_idx)
        assert search["best_params"] == plain.best_params_
        assert [row["mean_test_score"] for row in search["table"]] == sorted(
            plain.cv_results_["mean_test_score"], reverse=True
        )
        r = c.post("/predict", json={"model": "pix", "X": X[:100].tolist()})
        assert r.status_code == 200, r.text
        np.testing.assert_array_equal(
            r.json()["labels"], classes[plain.best_estimator_.predict(prepare_X(Xf[:100]))]
        )
        info = c.get("/models/pix").json()
        assert info["algorithm"] == "dcsvm" and info["config"]["C"] == plain.best_params_["C"]
        assert (
            c.post("/learn", json={"model": "pix", "X": X[:2].tolist(), "y": ["skin", "other"]}).status_code
            == 409
        )


def test_cancel_a_dcsvm_job_on_the_cluster_stops_its_tasks(server, cluster):
    """DELETE /jobs/{id} while DC-SVM's level sub-problems run on the workers: the job ends
    cancelled, and the stop event ends the sub-problem tasks too (the cluster goes idle)."""
    import time

    c = server.client
    params = {"C": 1000.0, "gamma": 0.5, "tol": 1e-7, "n_levels": 2, "k": 2, "probability": False}
    r = c.post("/jobs", json={"algorithm": "dcsvm", "data": "big.libsvm", "model": "slow", "params": params})
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = c.get(f"/jobs/{job_id}").json()
        if job["progress"].get("stage") in ("level", "refine", "global") or job["state"] != "running":
            break
        time.sleep(0.05)
    assert job["state"] == "running", job
    r = c.delete(f"/jobs/{job_id}")
    assert r.status_code == 200, r.text
    job = _wait(c, job_id, timeout=60)
    assert job["state"] == "cancelled" and job["cancel"]["stopped_after_s"] is not None
    assert "slow" not in [m["name"] for m in c.get("/models").json()["models"]]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(cluster.client.processing().values()):
        time.sleep(0.2)
    assert not any(cluster.client.processing().values()), cluster.client.processing()
