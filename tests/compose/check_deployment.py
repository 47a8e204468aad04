"""The docker-compose deployment, run for real: driven by ``tests/compose/run.sh``.

Every check goes through the published ports (learner on ``LEARNER_PORT``, the balancer on
``PREDICT_PORT``) or through ``docker compose`` itself; the figures go to
``benchmarks/results/compose.md``.  Not a pytest module (the normal ``pytest -q`` never runs it):
``.ci/run`` runs it as its own step.

Steps: build; up and wait healthy; create a model, learn, predict at the learner and through the
balancer; replicas follow each snapshot; ``--scale replica=3``; SIGKILL the learner under a Redis
stream (model and applied count back exactly, decisions equal to an uninterrupted run's);
``down`` then ``up`` (replicas serve the learner's newest version); SIGKILL a replica under
``/predict`` load through the balancer (0 errors); the dask profile runs a DC-SVM job twice on a
fresh worker (first within 2 x the second) and no dask container is ever unhealthy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
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
STREAM_MODEL = ["--budget", "200", "--gamma", "0.05", "--C", "10"]
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


# ----------------------------------------------------------------------------- steps
def step_build() -> None:
    t0 = time.monotonic()
    fresh = os.environ.get("COMPOSE_NO_CACHE") == "1"  # measure a build from nothing (as in CI)
    compose("build", *(["--no-cache"] if fresh else []), timeout=1500, capture=False)
    record(f"build (docker compose build{' --no-cache' if fresh else ''})", f"{time.monotonic() - t0:.0f} s")


def step_up(what: str = "up -d (redis, learner, 2 replicas, balancer) to all healthy") -> float:
    t0 = time.monotonic()
    compose("up", "-d", "--wait", "--wait-timeout", "300", timeout=360, capture=False)
    seconds = time.monotonic() - t0
    states = {c["Service"] + "/" + c["Name"]: c.get("Health") or c["State"] for c in containers()}
    bad = {k: v for k, v in states.items() if v not in ("healthy", "running")}
    record(what, f"{seconds:.1f} s; {len(states)} containers {sorted(set(states.values()))}", not bad)
    return seconds


def step_learn_predict(lc: httpx.Client) -> tuple[int, list]:
    r = lc.put("/models/m", json={"warmup": 200, "shuffle_buffer": 500, "budget": 200})
    assert r.status_code == 201, r.text
    X, y = problem(4000, seed=1)
    probe = problem(200, seed=2)[0].tolist()
    delays = []
    version = 0
    for k in range(3):
        part = slice(1000 * k, 1000 * (k + 1))
        t_learn = time.time()
        r = lc.post("/learn", json={"model": "m", "X": X[part].tolist(), "y": y[part].tolist()})
        assert r.status_code == 200, r.text
        version = r.json()["version"]
        # the learner snapshots every 10 s (SVMSTREAM_SNAPSHOT_INTERVAL_S); each replica then
        # installs that version: the delay counts from the snapshot's time to every replica serving it
        wait_for(lambda t=t_learn: _snapshot_after(lc, "m", t), 30, f"a snapshot of version {version}")
        wait_for(
            lambda v=version: balancer_versions("m", probe[:2], 6) == {v},
            30,
            f"both replicas at version {version}",
            interval=0.05,
        )
        seen = time.time()
        delays.append(seen - model(lc, "m")["last_snapshot_time"])  # the snapshot they serve
    mine = predict(LEARNER, "m", probe)
    theirs = predict(BALANCER, "m", probe)
    same = mine["version"] == theirs["version"] == version and mine["decision"] == theirs["decision"]
    record(
        "create, learn 3 batches, predict at learner and through the balancer",
        f"version {version}; 200 decisions identical at learner and balancer: {same}",
        same,
    )
    record(
        "replicas follow each snapshot (snapshot written -> every replica serving it, via balancer)",
        ", ".join(f"{d:.2f} s" for d in delays) + f" (max {max(delays):.2f} s)",
        max(delays) < 10,
    )
    return version, probe


def _snapshot_after(lc: httpx.Client, name: str, t: float) -> float | None:
    """The learner's last snapshot time if it was written after ``t`` (one /learn before it)."""
    snap = model(lc, name).get("last_snapshot_time")
    return snap if snap and snap >= t else None


def step_scale(probe, version: int) -> None:
    t0 = time.monotonic()
    compose("up", "-d", "--wait", "--wait-timeout", "300", "--scale", "replica=3", timeout=360, capture=False)
    seconds = time.monotonic() - t0
    reps = [c for c in containers("replica") if c.get("Health") == "healthy"]
    wait_for(lambda: balancer_versions("m", probe[:2], 9) == {version}, 30, "3 replicas at the version")
    record(
        "--scale replica=3",
        f"{len(reps)} healthy replicas after {seconds:.1f} s, all at version {version}",
        len(reps) == 3,
    )


def replay(name: str, *extra: str) -> dict:
    """``svmstream replay`` of the stream file into model ``name``'s Redis stream, run in a
    producer container (inside the compose network)."""
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
        "--url",
        "http://svmstream:8000",
        "--model",
        name,
        *STREAM_MODEL,
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


def _applied_all(lc, name, n):
    s = stream_state(lc, name)
    return s if s["n_seen"] >= n and not s.get("lag") and not s.get("pending") else None


def step_learner_sigkill(lc: httpx.Client) -> None:
    t0 = time.monotonic()
    n = int(replay("ref")["examples"])
    ref = wait_for(lambda: _applied_all(lc, "ref", n), 300, "the uninterrupted run to apply the stream", 0.5)
    t_ref = time.monotonic() - t0
    rng = np.random.default_rng(3)
    probe = (rng.random((200, 123)) < 0.11).astype(float).tolist()
    ref_pred = predict(LEARNER, "ref", probe, timeout=60)

    t0 = time.monotonic()
    killer_done = threading.Event()
    kill_at: dict = {}

    def kill_mid_stream():
        try:
            wait_for(lambda: stream_state(lc, "s")["n_seen"] >= n * 0.3, 300, "the stream half applied", 0.05)
            kill_at["n_seen"] = stream_state(lc, "s")["n_seen"]
            name = containers("svmstream")[0]["Name"]
            kill_at["pid"] = sigkill(name)
            kill_at["t"] = time.monotonic()
        finally:
            killer_done.set()

    killer = threading.Thread(target=kill_mid_stream, daemon=True)
    killer.start()
    replay("s")
    killer.join(320)
    if "t" not in kill_at:
        raise CheckFailed("the learner was never killed mid-stream")
    # docker restarts it (restart: unless-stopped; a SIGKILL of the process is not a manual stop)
    wait_for(lambda: httpx.get(LEARNER + "/health", timeout=2).status_code == 200, 180, "the learner back")
    back = time.monotonic() - kill_at["t"]
    with httpx.Client(base_url=LEARNER, headers=AUTH, timeout=60) as lc2:
        got = wait_for(lambda: _applied_all(lc2, "s", n), 300, "the killed run to apply the stream", 0.5)
        mine = predict(LEARNER, "s", probe, timeout=60)
        applied_metric = _metric(lc2, "svmstream_examples_applied", "s")
    mid = kill_at["n_seen"] < n
    exact = mid and got["n_seen"] == n == ref["n_seen"] and applied_metric == n
    same = mine["decision"] == ref_pred["decision"]
    restarts = containers("svmstream")[0]
    record(
        "learner SIGKILL under a Redis stream (a9a, 32,561 entries): exactly once",
        f"killed at {kill_at['n_seen']:,} applied (mid-stream: {mid}); back healthy after {back:.1f} s (restart policy); "
        f"applied {got['n_seen']:,} of {n:,} (uninterrupted run: {ref['n_seen']:,}; "
        f"svmstream_examples_applied {applied_metric}); {restarts.get('Status', '')}",
        exact,
    )
    record(
        "decisions after the SIGKILL equal an uninterrupted run's",
        f"200 decisions equal: {same}; uninterrupted stream applied in {t_ref:.1f} s, "
        f"killed one in {time.monotonic() - t0:.1f} s",
        same,
    )


def _metric(client: httpx.Client, name: str, model_name: str) -> float | None:
    text = client.get("/metrics").text
    for line in text.splitlines():
        if line.startswith(name) and f'model="{model_name}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def step_down_up(lc_version: int, probe) -> None:
    # learn once more and go down at once: only the shutdown's final snapshot holds this version
    with httpx.Client(base_url=LEARNER, headers=AUTH, timeout=60) as lc:
        X, y = problem(1000, seed=9)
        r = lc.post("/learn", json={"model": "m", "X": X.tolist(), "y": y.tolist()})
        assert r.status_code == 200, r.text
        newest = r.json()["version"]
    t0 = time.monotonic()
    compose("down", "--timeout", "60", timeout=240, capture=False)
    t_down = time.monotonic() - t0
    t_up = step_up("up -d again after down (volumes kept) to all healthy")
    with httpx.Client(base_url=LEARNER, headers=AUTH, timeout=60) as lc:
        restored = model(lc, "m")["version"]
    served = wait_for(
        lambda: balancer_versions("m", probe[:2], 9) == {newest} and newest,
        30,
        f"every replica at the learner's newest version {newest}",
    )
    record(
        "down then up: replicas serve the learner's newest version",
        f"learned version {newest} just before down ({t_down:.1f} s); learner restored {restored}; "
        f"replicas serve {served} (up {t_up:.1f} s)",
        restored == newest == served,
    )


def _hit(probe, codes: list, stop: threading.Event) -> None:
    """A /predict client of the balancer until ``stop``: each answer's status or error name."""
    with httpx.Client(base_url=BALANCER, timeout=10) as c:
        while not stop.is_set():
            try:
                codes.append(c.post("/predict", json={"model": "m", "X": probe[:5]}).status_code)
            except httpx.HTTPError as exc:
                codes.append(type(exc).__name__)


def step_replica_sigkill(probe, trials: int = 2) -> None:
    results = []
    for trial in range(trials):
        codes: list = []
        stop = threading.Event()

        threads = [threading.Thread(target=_hit, args=(probe, codes, stop)) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(1.5)
        replicas = containers("replica")
        victim = replicas[trial % len(replicas)]["Name"]
        sigkill(victim)
        time.sleep(3.0)
        stop.set()
        for t in threads:
            t.join(15)
        errors = [c for c in codes if c != 200]
        results.append((victim, len(codes), errors))
        wait_for(
            lambda n=len(replicas): (
                len([c for c in containers("replica") if c.get("Health") == "healthy"]) == n
            ),
            180,
            "the killed replica restarted and healthy",
            1.0,
        )
    ok = all(not e for _, _, e in results)
    record(
        "replica SIGKILL under /predict load through the balancer (4 clients)",
        "; ".join(f"{v}: {n} requests, {len(e)} errors {sorted(set(map(str, e)))}" for v, n, e in results)
        + "; each restarted to healthy",
        ok,
    )


def step_dask() -> None:
    health_seen: dict[str, set] = {}
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            try:
                for c in containers("dask-scheduler") + containers("dask-worker"):
                    health_seen.setdefault(c["Service"], set()).add(c.get("Health") or c["State"])
            except CheckFailed:
                pass
            stop.wait(2.0)

    os.environ["DASK_ADDRESS"] = "tcp://dask-scheduler:8786"
    t0 = time.monotonic()
    compose("--profile", "dask", "up", "-d", "--wait", "--wait-timeout", "300", timeout=360, capture=False)
    t_up = time.monotonic() - t0
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    with httpx.Client(base_url=LEARNER, headers=AUTH, timeout=120) as lc:
        times = []
        for k in range(2):
            job = lc.post("/jobs", json={**DASK_JOB, "model": f"phishing-dcsvm-{k}"})
            assert job.status_code == 201, job.text
            jid = job.json()["id"]
            done = wait_for(lambda jid=jid: _finished(lc, jid), 600, f"DC-SVM job {k + 1}", 1.0)
            if done["state"] != "succeeded":
                raise CheckFailed(f"DC-SVM job {k + 1} {done['state']}: {done.get('error')}")
            times.append(
                (done["elapsed_s"], done["result"]["train_seconds"], done["result"]["test_accuracy"])
            )
    stop.set()
    watcher.join(10)
    for c in containers("dask-scheduler") + containers("dask-worker"):
        health_seen.setdefault(c["Service"], set()).add(c.get("Health") or c["State"])
    never_unhealthy = all("unhealthy" not in s for s in health_seen.values()) and set(health_seen) == {
        "dask-scheduler",
        "dask-worker",
    }
    record(
        "dask profile up (scheduler + worker, learner recreated with DASK_ADDRESS)",
        f"{t_up:.1f} s; health states seen: { {k: sorted(v) for k, v in health_seen.items()} }",
        never_unhealthy,
    )
    (e1, f1, a1), (e2, f2, a2) = times
    record(
        "DC-SVM job (phishing, 11,055 rows, C=8) on the fresh dask worker, then again",
        f"first {e1:.1f} s (fit {f1:.1f} s), second {e2:.1f} s (fit {f2:.1f} s): ratio {e1 / e2:.2f} "
        f"(limit 2); training-set accuracy {a1:.4f} / {a2:.4f}",
        e1 <= 2 * e2,
    )


def _finished(lc: httpx.Client, jid: str):
    job = lc.get(f"/jobs/{jid}").json()
    return job if job["state"] in ("succeeded", "failed", "cancelled") else None


def write_report(total: float, failure: str | None) -> None:
    lines = [
        "# The docker-compose deployment, run for real (`tests/compose/run.sh`)",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} cores "
        f"(load {os.getloadavg()[0]:.1f} at the end); images: PYTHON_IMAGE={os.environ.get('PYTHON_IMAGE')}, "
        f"REDIS_IMAGE={os.environ.get('REDIS_IMAGE')}, NGINX_IMAGE={os.environ.get('NGINX_IMAGE')}.",
        f"Checks {total:.0f} s in all (engine set-up not included; see the CI log).",
        "",
        "| check | figure | |",
        "|---|---|---|",
        *(f"| {c} | {f} | {s} |" for c, f, s in rows),
        "",
    ]
    if failure:
        lines += ["**FAILED**: " + failure.replace("\n", " ")[:2000], ""]
    REPORT.write_text("\n".join(lines))
    log(f"report written to {REPORT.relative_to(REPO)}")


def main() -> int:
    failure = None
    only = set(filter(None, os.environ.get("COMPOSE_STEPS", "").split(",")))

    def want(step: str) -> bool:
        return not only or step in only

    try:
        if want("build"):
            step_build()
        step_up()
        with httpx.Client(base_url=LEARNER, headers=AUTH, timeout=60) as lc:
            version, probe = step_learn_predict(lc)
            if want("scale"):
                step_scale(probe, version)
            if want("stream"):
                step_learner_sigkill(lc)
        if want("downup"):
            step_down_up(version, probe)
        if want("replica-kill"):
            step_replica_sigkill(probe)
        if want("dask"):
            step_dask()
    except Exception as exc:  # noqa: BLE001 - reported, then the run fails
        failure = f"{type(exc).__name__}: {exc}"
        log("FAILED: " + failure)
    write_report(time.monotonic() - T_START, failure)
    return 1 if failure else 0


if __name__ == "__main__":
    sys.exit(main())
