"""The docker-compose deployment, run for real: driven by ``tests/compose/run.sh``.

Every check goes through the published ports (the learner "svmstream" on ``LEARNER_PORT``, the
balancer on ``PREDICT_PORT``), the other learner's address on the compose network, or
``docker compose`` itself; the figures go to
``benchmarks/results/compose.md``.  Not a pytest module (the normal ``pytest -q`` never runs it):
``.ci/run`` runs it as its own step.

Steps: build; up (two learners, docs/cluster.md) and wait healthy; create a model, learn at its
owner, predict there and through the balancer; replicas follow each snapshot, and an explicit
snapshot and a rollback within seconds measured to 10 ms (``follow.py``); ``--scale
replica=3``; SIGKILL the learner container owning a model under a Redis stream: the other learner
takes it over (applied count exact, decisions equal to an uninterrupted run's), then the killed one
rejoins and takes its share back (``handoff.py``);
``down`` then ``up`` (replicas serve the learner's newest version); SIGKILL a replica under
``/predict`` load through the balancer (0 errors); the dask profile runs a DC-SVM job twice on a
fresh worker (first within 2 x the second) and no dask container is ever unhealthy.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import httpx
from follow import step_follow
from handoff import step_handoff
from harness import (
    AUTH,
    BALANCER,
    DASK_JOB,
    LEARNER,
    REPO,
    REPORT,
    T_START,
    CheckFailed,
    balancer_versions,
    compose,
    containers,
    learner_addresses,
    log,
    model,
    owner_url,
    predict,
    problem,
    record,
    rows,
    sigkill,
    wait_for,
)


# ----------------------------------------------------------------------------- steps
def step_build() -> None:
    t0 = time.monotonic()
    fresh = os.environ.get("COMPOSE_NO_CACHE") == "1"  # measure a build from nothing (as in CI)
    compose("build", *(["--no-cache"] if fresh else []), timeout=1500, capture=False)
    record(f"build (docker compose build{' --no-cache' if fresh else ''})", f"{time.monotonic() - t0:.0f} s")


def step_up(what: str = "up -d (redis, 2 learners, 2 replicas, balancer) to all healthy") -> float:
    t0 = time.monotonic()
    compose("up", "-d", "--wait", "--wait-timeout", "300", timeout=360, capture=False)
    seconds = time.monotonic() - t0
    states = {c["Service"] + "/" + c["Name"]: c.get("Health") or c["State"] for c in containers()}
    bad = {k: v for k, v in states.items() if v not in ("healthy", "running")}
    record(what, f"{seconds:.1f} s; {len(states)} containers {sorted(set(states.values()))}", not bad)
    return seconds


def step_learn_predict(front: httpx.Client) -> tuple[int, list]:
    r = front.put("/models/m", json={"warmup": 200, "shuffle_buffer": 500, "budget": 200})
    assert r.status_code == 201, r.text
    with httpx.Client(base_url=owner_url("m"), headers=AUTH, timeout=60) as lc:
        version, probe = _learn_predict(lc)
        return step_follow(lc, probe, version), probe


def _learn_predict(lc: httpx.Client) -> tuple[int, list]:
    """Learn 3 batches on the owner of ``m``, follow them to the replicas."""
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
    owner = str(lc.base_url).rstrip("/")
    mine = predict(owner, "m", probe)
    theirs = predict(BALANCER, "m", probe)
    same = mine["version"] == theirs["version"] == version and mine["decision"] == theirs["decision"]
    record(
        "create, learn 3 batches at the owner, predict there and through the balancer",
        f"version {version}; 200 decisions identical at the owner and the balancer: {same}",
        same,
    )
    # the other learner answers from the owner's published state (docs/cluster.md)
    other = next(url for _, url in learner_addresses().values() if url != owner)
    got = wait_for(lambda: _same_answer(other, probe, mine), 30, "the other learner at the owner's version")
    record(
        "/predict and GET /models/m on the learner that does not own m (its published state)",
        f"version {got['version']}, 200 decisions identical to the owner's: True; GET /models/m there: "
        f"owner {got['owner'][:12]}..., n_seen {got['n_seen']:,}",
    )
    record(
        "replicas follow each snapshot (snapshot written -> every replica serving it, via balancer)",
        ", ".join(f"{d:.2f} s" for d in delays) + f" (max {max(delays):.2f} s)",
        max(delays) < 10,
    )
    return version, probe


def _same_answer(url: str, probe, mine: dict) -> dict | None:
    """The other learner's answer and model info when they equal the owner's, else None."""
    theirs = predict(url, "m", probe)
    if theirs["version"] != mine["version"] or theirs["decision"] != mine["decision"]:
        return None
    info = httpx.get(f"{url}/models/m", headers=AUTH, timeout=10).json()
    return {**theirs, "owner": info["owner"], "n_seen": info["n_seen"]}


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


def step_down_up(lc_version: int, probe) -> None:
    # learn once more and go down at once: only the shutdown's final snapshot holds this version
    with httpx.Client(base_url=owner_url("m"), headers=AUTH, timeout=60) as lc:
        X, y = problem(1000, seed=9)
        r = lc.post("/learn", json={"model": "m", "X": X.tolist(), "y": y.tolist()})
        assert r.status_code == 200, r.text
        newest = r.json()["version"]
    t0 = time.monotonic()
    compose("down", "--timeout", "60", timeout=240, capture=False)
    t_down = time.monotonic() - t0
    t_up = step_up("up -d again after down (volumes kept) to all healthy")
    with httpx.Client(base_url=owner_url("m"), headers=AUTH, timeout=60) as lc:
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
            step_handoff()
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
