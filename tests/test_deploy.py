"""docker/Dockerfile and docker-compose.yml, read without Docker: check that everything they
reference exists in the code -- settings names, CLI commands, ports, paths, files -- so that
they cannot silently drift from the service.  (They are also run for real by
``tests/compose/run.sh``, a separate step of ``.ci/run``; the defects that run found are pinned
in ``tests/test_compose_files.py``.)"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from svmstream.app.cli.main import build_parser
from svmstream.app.settings import Settings

yaml = pytest.importorskip("yaml")

REPO = Path(__file__).resolve().parents[1]
COMPOSE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "docker" / "Dockerfile"
FIELDS = set(Settings.model_fields)


def dockerfile_instructions() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` with line continuations joined and comments dropped."""
    out, current = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        current += " " + stripped.rstrip("\\").strip()
        if not stripped.endswith("\\"):
            keyword, _, args = current.strip().partition(" ")
            out.append((keyword.upper(), args.strip()))
            current = ""
    return out


def dockerfile_env() -> dict[str, str]:
    env = {}
    for keyword, args in dockerfile_instructions():
        if keyword == "ENV":
            for token in shlex.split(args):
                key, _, value = token.partition("=")
                env[key] = value
    return env


def setting_of(env_name: str) -> str:
    assert env_name.startswith("SVMSTREAM_"), env_name
    return env_name[len("SVMSTREAM_") :].lower()


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_cli_commands_of_compose_and_dockerfile_parse(compose):
    parser = build_parser()
    commands = [
        compose["services"]["producer"]["command"],
        compose["services"]["svmstream"]["healthcheck"]["test"][1:],
    ]
    for keyword, args in dockerfile_instructions():
        if keyword == "CMD":
            commands.append(json.loads(args))
        if keyword == "ENTRYPOINT":  # the token check, then exec "$@" (tests/test_compose_files.py)
            assert json.loads(args) == ["/opt/svmstream/entrypoint.sh"], args
        if keyword == "HEALTHCHECK":
            commands.append(json.loads(args.split("CMD", 1)[1]))
    for command in commands:
        assert command[0] == "svmstream", command
        parser.parse_args(command[1:])  # exits (SystemExit) on an unknown option
    pyproject = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^svmstream = "svmstream\.app\.cli\.main:main"', pyproject, re.M)


def test_every_svmstream_env_name_is_a_setting(compose):
    names = set(dockerfile_env())
    for service in compose["services"].values():
        names |= set(service.get("environment", {}))
    names = {n for n in names if n.startswith("SVMSTREAM_")}
    assert names, "no SVMSTREAM_* variables found"
    for name in names:
        assert setting_of(name) in FIELDS, f"{name} is not a field of app.settings.Settings"
    # and they validate
    env = {
        setting_of(k): v
        for k, v in compose["services"]["svmstream"]["environment"].items()
        if k.startswith("SVMSTREAM_") and "${" not in str(v)
    }
    Settings(**env)


def test_ports_paths_and_redis_wiring_agree(compose):
    env = dockerfile_env()
    svc = compose["services"]["svmstream"]
    port = svc["environment"]["SVMSTREAM_PORT"]
    assert port == env["SVMSTREAM_PORT"]
    assert any(p.split(":")[-1] == port for p in svc["ports"])
    assert any(k == "EXPOSE" and a == port for k, a in dockerfile_instructions())
    # the snapshot volume is where the service writes
    snap = svc["environment"]["SVMSTREAM_SNAPSHOT_DIR"]
    assert snap == env["SVMSTREAM_SNAPSHOT_DIR"]
    assert any(v.split(":")[1] == snap for v in svc["volumes"])
    # no VOLUME in the image: compose mounts the learner's; replicas would each get an unused one
    assert not any(k == "VOLUME" for k, _ in dockerfile_instructions())
    # Redis: the URL names the redis service; AOF on; health-gated start
    redis_svc = compose["services"]["redis"]
    assert svc["environment"]["SVMSTREAM_REDIS_URL"].startswith("redis://redis:6379")
    assert svc["depends_on"]["redis"]["condition"] == "service_healthy"
    assert "healthcheck" in redis_svc and "--appendonly" in redis_svc["command"]
    assert redis_svc["command"][redis_svc["command"].index("--appendonly") + 1] == "yes"
    assert any(v.split(":")[1] == "/data" for v in redis_svc["volumes"])
    assert "API_TOKEN" in str(svc["environment"]["SVMSTREAM_API_TOKEN"])
    # the producer talks to the same Redis and service, and only runs with its profile
    producer = compose["services"]["producer"]
    assert producer["profiles"] == ["producer"]
    args = build_parser().parse_args(producer["command"][1:])
    assert args.redis_url == svc["environment"]["SVMSTREAM_REDIS_URL"]
    assert args.url == f"http://svmstream:{port}"
    mount = next(v for v in producer["volumes"] if "SVMSTREAM_DATA" in v)
    assert args.file.startswith(mount.split(":")[-2] + "/")
    for volume in ("redis-data", "snapshots"):
        assert volume in compose["volumes"]


def test_dockerfile_is_slim_non_root_with_a_writable_numba_cache():
    instructions = dockerfile_instructions()
    env = dockerfile_env()
    # the base image is a build argument whose default is the official slim image
    args = dict(a.split("=", 1) for k, a in instructions if k == "ARG" and "=" in a)
    assert dict(instructions)["FROM"] == "${PYTHON_IMAGE}"
    assert re.match(r"python:3\.1[1-9][\w.-]*-slim", args["PYTHON_IMAGE"])
    users = [a for k, a in instructions if k == "USER"]
    assert users and users[-1] not in ("root", "0")
    cache = env["NUMBA_CACHE_DIR"]
    run = " ".join(a for k, a in instructions if k == "RUN")
    assert "mkdir -p" in run and cache in run
    owned = re.search(rf"chown -R {users[-1]}\S* (.+?)(?:&&|$)", run).group(1).split()
    assert any(cache.startswith(path) for path in owned), (cache, owned)
    for keyword, args in instructions:
        if keyword == "COPY":
            for source in shlex.split(args)[:-1]:
                assert (REPO / source).exists(), f"COPY source {source} missing"
    assert (REPO / "docker" / "Dockerfile.dockerignore").exists()


def test_healthcheck_exits_1_when_nothing_answers():
    from svmstream.app.cli.main import main
    from tests.conftest import free_port

    assert main(["healthcheck", "--url", f"http://127.0.0.1:{free_port()}", "--timeout", "1"]) == 1


def test_build_time_warm_up_runs_outside_the_source_tree():
    """numba caches by source path: the warm-up must import the installed package, as the
    service does, not the copy in the build directory."""
    workdir = None
    for keyword, args in dockerfile_instructions():
        if keyword == "WORKDIR":
            workdir = args
        if keyword == "RUN" and "warm_up" in args:
            break
    else:
        raise AssertionError("no build-time warm-up")
    copies = [shlex.split(a)[-1] for k, a in dockerfile_instructions() if k == "COPY"]
    build_dirs = {next(a for k, a in dockerfile_instructions() if k == "WORKDIR")}
    assert workdir not in build_dirs and all(not c.startswith(workdir) for c in copies if c.startswith("/"))


def test_replicas_follow_the_learner_behind_the_load_balancer(compose):
    """The replica service runs the same image as a prediction replica on the learner's Redis;
    the load balancer forwards to it on the port the service listens on (docs/deployment.md)."""
    learner, replica = compose["services"]["svmstream"], compose["services"]["replica"]
    env = replica["environment"]
    assert env["SVMSTREAM_ROLE"] == "replica" and Settings(role=env["SVMSTREAM_ROLE"]).role == "replica"
    assert env["SVMSTREAM_REDIS_URL"] == learner["environment"]["SVMSTREAM_REDIS_URL"]
    assert replica["image"] == learner["image"] and replica["deploy"]["replicas"] >= 2
    assert "ports" not in replica, "replicas are reached through the load balancer only"
    assert (
        learner["environment"]["SVMSTREAM_ADVERTISE_URL"]
        == f"http://svmstream:{learner['environment']['SVMSTREAM_PORT']}"
    )
    build_parser().parse_args(replica["healthcheck"]["test"][2:])
    lb = compose["services"]["predict-lb"]
    host_conf, _, container_conf = lb["volumes"][0].partition(":")
    conf = (REPO / host_conf.removeprefix("./")).read_text()
    assert container_conf.startswith("/etc/nginx/conf.d/")
    assert re.search(rf"server\s+replica:{env['SVMSTREAM_PORT']}\b", conf)
    listen = re.search(r"listen\s+(\d+);", conf).group(1)
    assert any(p.split(":")[-1] == listen for p in lb["ports"])
    assert lb["depends_on"]["replica"]["condition"] == "service_healthy"


def test_dask_profile_runs_as_written(compose, tmp_path):
    """The ``dask`` profile's scheduler and worker commands, run here as written (host and
    port made local), form a cluster on which DC-SVM's sub-problems run; the server's
    address setting names that scheduler; workers see the server's data and job paths."""
    import os
    import socket
    import subprocess
    import sys

    import numpy as np

    distributed = pytest.importorskip("distributed")
    sched, worker, svc = (compose["services"][n] for n in ("dask-scheduler", "dask-worker", "svmstream"))
    assert sched["profiles"] == ["dask"] and worker["profiles"] == ["dask"]
    assert sched["command"][:2] == ["dask", "scheduler"] and worker["command"][:2] == ["dask", "worker"]
    port = sched["command"][sched["command"].index("--port") + 1]
    assert worker["command"][2] == f"tcp://dask-scheduler:{port}"
    assert "DASK_ADDRESS" in svc["environment"]["SVMSTREAM_DASK_ADDRESS"]
    assert f"tcp://dask-scheduler:{port}" in COMPOSE.read_text()  # the documented address
    for path in (svc["environment"]["SVMSTREAM_JOBS_DIR"], svc["environment"]["SVMSTREAM_DATA_DIR"]):
        assert any(v.split(":")[-2 if v.endswith(":ro") else -1] == path for v in worker["volumes"]), path
        assert any(v.split(":")[-2 if v.endswith(":ro") else -1] == path for v in svc["volumes"]), path
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = str(s.getsockname()[1])
    dask_cli = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    sched_cmd = [*dask_cli, *sched["command"][2:]]
    sched_cmd[sched_cmd.index("--host") + 1] = "127.0.0.1"
    sched_cmd[sched_cmd.index("--port") + 1] = free
    worker_cmd = [sys.executable, "-m", "distributed.cli.dask_worker", f"tcp://127.0.0.1:{free}"]
    worker_cmd += worker["command"][3:]
    worker_cmd[worker_cmd.index("--worker-port") + 1] = "0"  # fixed in its container; any port here
    at = worker_cmd.index("--preload")  # the image's file (docker/dask_preload.py), run by tests/compose
    assert (
        worker_cmd[at + 1] == "/opt/svmstream/dask_preload.py" and (REPO / "docker/dask_preload.py").exists()
    )
    del worker_cmd[at : at + 2]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            sched_cmd, env=env, stdout=subprocess.DEVNULL, stderr=(tmp_path / "s.log").open("w")
        ),
        subprocess.Popen(
            worker_cmd, env=env, stdout=subprocess.DEVNULL, stderr=(tmp_path / "w.log").open("w")
        ),
    ]
    try:
        import joblib

        from svmstream.solvers import DCSVMClassifier
        from svmstream.solvers.exact import _dask

        with distributed.Client(f"tcp://127.0.0.1:{free}", timeout="60s") as client:
            client.wait_for_workers(1, timeout=60)
            info = client.scheduler_info()["workers"]
            assert [w["nthreads"] for w in info.values()] == [1]
            rng = np.random.default_rng(0)
            X = rng.normal(size=(5200, 4)) * [1, 10, 100, 1000]
            y = X[:, 0] + X[:, 1] / 10 > 0
            with joblib.parallel_backend("dask"):
                est = DCSVMClassifier(n_levels=1, k=2, random_state=0).fit(X, y)
            local = DCSVMClassifier(n_levels=1, k=2, random_state=0, n_jobs=1).fit(X, y)
            assert est.dual_objective_[0] == pytest.approx(local.dual_objective_[0], rel=1e-6)
            assert list(client.run(lambda: _dask._worker_ready).values()) == [True]
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(30)
