"""What the compose checks share (``tests/compose/check_deployment.py``, ``handoff.py``):
addresses, the report's rows, ``docker compose``, bounded waits, the producer's replay."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import httpx
import numpy as np

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "benchmarks" / "results" / "compose.md"
TOKEN = os.environ["API_TOKEN"]
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LEARNER = f"http://127.0.0.1:{os.environ['LEARNER_PORT']}"
BALANCER = f"http://127.0.0.1:{os.environ['PREDICT_PORT']}"
STREAM_FILE = "a9a.bz2"  # in SVMSTREAM_DATA, mounted at /data/in (32,561 rows, 123 features)
# the model replay would make of it (--budget 200 --gamma 0.05 --C 10: lambda = 1/(C n))
STREAM_MODEL = {
    "budget": 200,
    "gamma": 0.05,
    "C": 10,
    "n_samples": 32561,
    "n_features": 123,
    "classes": [-1, 1],
}
# a DC-SVM job on the dask cluster: phishing (11,055 rows, 68 features; >= 5,000 rows, so the
# levels' sub-problems are dask tasks), scored on its own rows.  (The issue's ijcnn1 job took
# ~4-5 min per run at load 14 on 2 cores: too long for CI.)
DASK_JOB = {"algorithm": "dcsvm", "data": "phishing.bz2", "test": "phishing.bz2", "params": {"C": 8}}

rows: list[tuple[str, str, str]] = []  # (check, figure, status) for the report
T_START = time.monotonic()


class CheckFailed(AssertionError):
    pass


def log(msg: str) -> None:
    print(f"[compose +{time.monotonic() - T_START:6.1f}s] {msg}", flush=True)


def record(check: str, figure: str, ok: bool = True) -> None:
    rows.append((check, figure, "ok" if ok else "FAILED"))
    log(f"{'ok' if ok else 'FAILED'}: {check}: {figure}")
    if not ok:
        raise CheckFailed(f"{check}: {figure}")


def compose(*args: str, timeout: float = 600, check: bool = True, capture: bool = True) -> str:
    """``docker compose ARGS`` (project, files and variables from the environment of run.sh)."""
    cmd = ["docker", "compose", *args]
    try:
        done = subprocess.run(cmd, cwd=REPO, capture_output=capture, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise CheckFailed(f"`{' '.join(cmd)}` took over {timeout:.0f} s") from exc
    if check and done.returncode != 0:
        raise CheckFailed(f"`{' '.join(cmd)}` exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout or ""


def wait_for(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            value, last = None, exc
        if value:
            return value
        time.sleep(interval)
    raise CheckFailed(f"timed out after {timeout:.0f} s waiting for {what} (last error: {last!r})")


def containers(*services: str) -> list[dict]:
    out = compose("ps", "--format", "json", *services)
    text = out.strip()
    if not text:
        return []
    if text.startswith("["):
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def container_pid(name: str) -> int:
    out = subprocess.run(
        ["docker", "inspect", "-f", "{{.State.Pid}}", name], capture_output=True, text=True, check=True
    )
    return int(out.stdout.strip())


def sigkill(name: str) -> int:
    """SIGKILL the container's main process from the host: what the OOM killer or a crash does
    (docker sees an exit, not a manual stop, so the restart policy applies)."""
    pid = container_pid(name)
    os.kill(pid, 9)
    return pid


def problem(n: int, d: int = 6, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.5, 1.5, size=(n, d))
    y = np.where(np.sin(2 * X[:, 0]) + X[:, 1] ** 2 - 0.5 > 0, 1, -1)
    return X, y


def model(client: httpx.Client, name: str) -> dict:
    r = client.get(f"/models/{name}")
    r.raise_for_status()
    return r.json()


def predict(url: str, name: str, X, timeout: float = 10) -> dict:
    r = httpx.post(f"{url}/predict", json={"model": name, "X": X}, timeout=timeout)
    r.raise_for_status()
    return r.json()


def balancer_versions(name: str, X, n: int) -> set[int]:
    """The versions ``n`` successive balanced predictions carry (round robin: every replica)."""
    return {predict(BALANCER, name, X)["version"] for _ in range(n)}


def replay(name: str, *extra: str) -> dict:
    """``svmstream replay`` of the stream file into model ``name``'s Redis stream, run in a
    producer container (inside the compose network).  Only the entries: the model is created
    beforehand (on any learner: it moves to its owner); ``--url`` would send the replay's
    ``GET /models`` to one learner, which lists only its own models."""
    out = compose(
        "--profile",
        "producer",
        "run",
        "--rm",
        "-T",
        "--no-deps",
        "producer",
        "svmstream",
        "replay",
        f"/data/in/{STREAM_FILE}",
        "--redis",
        "redis://redis:6379/0",
        "--model",
        name,
        "--no-progress",
        "--json",
        *extra,
        timeout=600,
    )
    return json.loads(out.strip().splitlines()[-1])


def stream_state(lc: httpx.Client, name: str) -> dict:
    info = model(lc, name)
    stream = info.get("metrics", {}).get("stream") or {}
    return {"n_seen": info["n_seen"], "version": info["version"], **stream}


def applied_all(lc, name, n):
    s = stream_state(lc, name)
    return s if s["n_seen"] >= n and not s.get("lag") and not s.get("pending") else None


def metric(client: httpx.Client, name: str, model_name: str) -> float | None:
    text = client.get("/metrics").text
    for line in text.splitlines():
        if line.startswith(name) and f'model="{model_name}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


# ----------------------------------------------------------------------------- the learners
def cluster_view(url: str = LEARNER) -> dict:
    """``GET /cluster`` of a learner: the live members, every model's owner, recent moves."""
    r = httpx.get(url + "/cluster", headers=AUTH, timeout=30)
    r.raise_for_status()
    return r.json()


def learner_addresses() -> dict[str, tuple[str, str]]:
    """Container hostname -> ``(container name, URL from the host)`` of every running learner:
    "svmstream" at its host port, the "learner" containers at their address on the compose
    network (reachable from the host: docker's bridge)."""
    out = {}
    for c in containers("svmstream", "learner"):
        if c.get("State") != "running":
            continue
        done = subprocess.run(["docker", "inspect", c["Name"]], capture_output=True, text=True, check=True)
        info = json.loads(done.stdout)[0]
        if c["Service"] == "svmstream":
            url = LEARNER
        else:
            ips = [n["IPAddress"] for n in info["NetworkSettings"]["Networks"].values() if n.get("IPAddress")]
            url = f"http://{ips[0]}:8000"
        out[info["Config"]["Hostname"]] = (c["Name"], url)
    return out


def member_address(member: str) -> tuple[str, str]:
    """``(container name, URL)`` of a member (its name is ``<hostname>-<pid>-<random>``)."""
    return learner_addresses()[member.rsplit("-", 2)[0]]


def settle(members: int = 2, url: str = LEARNER, timeout: float = 180, models=()) -> dict:
    """Wait until ``members`` learners are live, the catalogue lists ``models`` and every model
    is held by its rendezvous owner over them (``docs/cluster.md``); returns ``GET /cluster``."""
    from svmstream.app.cluster.rendezvous import owner

    def settled():
        view = cluster_view(url)
        live = [m["name"] for m in view["members"]]
        if len(live) != members or not set(models) <= set(view["models"]):
            return None
        for name, held in view["models"].items():
            if held is None or held["member"] != owner(name, live):
                return None
        return view

    return wait_for(settled, timeout, f"every model held by its owner among {members} learners", 0.3)


def owner_url(name: str, url: str = LEARNER) -> str:
    """The host-side URL of the learner owning ``name`` once ownership has settled."""
    return member_address(settle(url=url, models=[name])["models"][name]["member"])[1]
