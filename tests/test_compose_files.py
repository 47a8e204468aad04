"""The deployment files as deployed (fast, no Docker; the real run is
``tests/compose/run.sh``): with no variables set they name the official base images; the
defects that running them found stay fixed (balancer retries, dask health checks, no image
VOLUME, compose commands without API_TOKEN, a pinned image, the jobs' numba kernels in the
image's cache)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from tests.test_deploy import COMPOSE, DOCKERFILE, REPO, dockerfile_instructions

yaml = pytest.importorskip("yaml")

_VAR = re.compile(r"\$\{(\w+)(?::?([-?])([^}]*))?\}")


def interpolate(value, env: dict[str, str]):
    """Compose's ``${VAR}``, ``${VAR:-default}``, ``${VAR:?error}`` with ``env`` (raises
    KeyError where compose would refuse to run)."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match) -> str:
        name, op, arg = m.group(1), m.group(2), m.group(3)
        if env.get(name):
            return env[name]
        if op == "?":
            raise KeyError(f"{name}: {arg}")
        return arg if op == "-" else ""

    return _VAR.sub(one, value)


@pytest.fixture(scope="module")
def bare() -> dict:
    """The compose file as compose reads it with no variable set."""
    return interpolate(yaml.safe_load(COMPOSE.read_text()), {})


def test_no_variables_means_the_official_images(bare):
    images = {name: svc.get("image") for name, svc in bare["services"].items()}
    assert images["redis"] == "redis:7.2-alpine"
    assert images["predict-lb"] == "nginx:1.27-alpine"
    assert bare["services"]["svmstream"]["build"]["args"]["PYTHON_IMAGE"] == "python:3.11-slim"
    args = dict(a.split("=", 1) for k, a in dockerfile_instructions() if k == "ARG" and "=" in a)
    assert args["PYTHON_IMAGE"] == "python:3.11-slim"
    first_from = next(a for k, a in dockerfile_instructions() if k == "FROM")
    assert first_from == "${PYTHON_IMAGE}"
    # and the variables do take over (the local images of ../shared/tools/container-engine.sh)
    local = interpolate(
        yaml.safe_load(COMPOSE.read_text()),
        {"REDIS_IMAGE": "local/redis:bookworm", "NGINX_IMAGE": "local/nginx:sid", "PYTHON_IMAGE": "local/py"},
    )
    assert local["services"]["redis"]["image"] == "local/redis:bookworm"
    assert local["services"]["predict-lb"]["image"] == "local/nginx:sid"
    assert local["services"]["svmstream"]["build"]["args"]["PYTHON_IMAGE"] == "local/py"


def test_compose_commands_do_not_need_api_token_but_the_services_refuse_to_start_without_it(bare):
    # interpolating with no variable raised nothing (the fixture); the services that need a token say so
    for name in ("svmstream", "replica", "producer"):
        env = bare["services"][name]["environment"]
        assert env["SVMSTREAM_API_TOKEN"] == "" and env["REQUIRE_API_TOKEN"] == "1", name
    script = REPO / "docker" / "entrypoint.sh"
    assert os.access(script, os.X_OK)
    base = {"PATH": os.environ["PATH"], "REQUIRE_API_TOKEN": "1"}
    refused = subprocess.run(["sh", str(script), "echo", "started"], env=base, capture_output=True, text=True)
    assert refused.returncode == 64 and "SVMSTREAM_API_TOKEN is empty" in refused.stderr
    assert "started" not in refused.stdout
    ok = subprocess.run(
        ["sh", str(script), "echo", "started"],
        env={**base, "SVMSTREAM_API_TOKEN": "t"},
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0 and ok.stdout.strip() == "started"
    plain = subprocess.run(["sh", str(script), "true"], env={"PATH": os.environ["PATH"]})
    assert plain.returncode == 0  # the image used without compose: no requirement


def test_the_balancer_retries_a_prediction_whose_replica_died():
    conf = (REPO / "docker" / "nginx-replicas.conf").read_text()
    line = re.search(r"^\s*proxy_next_upstream\s+([^;]+);", conf, re.M).group(1).split()
    assert {"error", "timeout", "non_idempotent"} <= set(line)


def test_dask_containers_have_their_own_health_checks(bare):
    for name, port in (("dask-scheduler", "8786"), ("dask-worker", "8788")):
        svc = bare["services"][name]
        test = svc["healthcheck"]["test"]
        assert "svmstream" not in test and port in " ".join(test), (name, test)
        assert port in svc["command"], (name, svc["command"])
    worker = bare["services"]["dask-worker"]
    assert worker["depends_on"]["dask-scheduler"]["condition"] == "service_healthy"


def test_restart_policies_are_what_the_docs_say(bare):
    docs = (REPO / "docs" / "deployment.md").read_text()
    for name, svc in bare["services"].items():
        expected = "no" if name == "producer" else "unless-stopped"
        assert svc["restart"] == expected, name
    assert "`docker kill`" in docs and "unless-stopped" in docs


def test_the_image_declares_no_volume_and_installs_the_lock():
    instructions = dockerfile_instructions()
    assert not any(k == "VOLUME" for k, _ in instructions)
    run = " ".join(a for k, a in instructions if k == "RUN")
    assert "pip install --no-deps -r requirements.lock" in run
    assert "pip install --no-deps --no-build-isolation ." in run
    lock = (REPO / "docker" / "requirements.lock").read_text().splitlines()
    pins = dict(line.split("==") for line in lock if line and not line.startswith("#"))
    assert all(re.fullmatch(r"[\w.]+", v) for v in pins.values()), pins
    pyproject = (REPO / "pyproject.toml").read_text()
    block = re.search(r"^dependencies = \[(.*?)^\]", pyproject, re.M | re.S).group(1)
    for dep in re.findall(r'"([A-Za-z0-9_.-]+)', block):
        assert dep.lower().replace("_", "-") in pins, f"{dep} is not pinned in docker/requirements.lock"
    assert "setuptools" in pins  # the build backend too (--no-build-isolation)
    ignore = (REPO / "docker" / "Dockerfile.dockerignore").read_text()
    for source in ("docker/requirements.lock", "docker/warm_jobs.py", "docker/entrypoint.sh"):
        assert f"!{source}" in ignore


def test_the_image_compiles_the_batch_jobs_kernels():
    """``docker/warm_jobs.py`` (run at build time) trains every batch algorithm through the
    jobs' code path; the real run measures the effect (first DC-SVM job <= 2 x the second)."""
    from svmstream.app.models.config import BATCH_ALGORITHMS

    text = (REPO / "docker" / "warm_jobs.py").read_text()
    assert "BATCH_ALGORITHMS" in text and "run_training" in text and set(BATCH_ALGORITHMS) >= {"dcsvm"}
    run = [a for k, a in dockerfile_instructions() if k == "RUN" and "warm_jobs.py" in a]
    assert run and DOCKERFILE.exists()
