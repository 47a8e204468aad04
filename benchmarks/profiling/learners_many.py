"""One clustered learner holding many models (issue 41): where its CPU goes, idle and learning.

    python -m benchmarks.profiling.learners_many [--models 1000] [--entries 300] [--template DIR]
        [--idle 20] [--profile OUT] [--env K=V ...]

The snapshot directory of ``--models`` untrained models is made once by
``benchmarks.bench_learners.make_template`` (kept in ``--template`` for the next run), copied,
and served by one clustered learner (the benchmark's settings, lease TTL 3 s unless ``--env``
says otherwise) on a fresh redis-server.  Once every model is gained: ``--idle`` seconds idle
(the learner's CPU seconds per wall second), then every stream is filled with ``--entries``
examples and renamed in at once, and the window runs until every example is applied (examples
per wall and CPU second).  ``--profile OUT`` runs ``py-spy record --idle`` on the learner during
that window (raw collapsed stacks in OUT; ``benchmarks/profiling/cpu_shares.py`` and
``gil_shares.py`` tally them).  The learner's heartbeat timing (``GET /cluster``'s
``heartbeat``) and the load average are printed with the figures, as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
import redis

from benchmarks.bench_learners import applied, cpu_seconds, fill, make_template, start_learners, wait_settled
from benchmarks.common import RedisServer


def run(args) -> dict:
    root = Path(tempfile.mkdtemp(prefix="learners-many-"))
    template = Path(args.template) if args.template else root / "template"
    if not (template / "m0000").exists():
        shutil.rmtree(template, ignore_errors=True)
        made = make_template(root, args.models)
        shutil.move(str(made), str(template))
    snap = root / "snap"
    shutil.copytree(template, snap)
    rs = RedisServer(root / "redis", fsync="no").start()
    client = redis.Redis.from_url(rs.url)
    names = sorted(p.name for p in template.iterdir() if p.is_dir())
    extra = dict(kv.split("=", 1) for kv in args.env)
    lease_s = extra.pop("SVMSTREAM_CLUSTER_LEASE_S", "3")
    servers = start_learners(root, snap, rs.url, 1, "many", lease_s=lease_s, extra=extra)
    server = servers[0]
    proc = psutil.Process(server.proc.pid)
    out: dict = {"models": len(names), "entries": args.entries, "env": args.env}
    try:
        t = time.monotonic()
        wait_settled(server, 1, len(names))
        out["settle_s"] = time.monotonic() - t
        c0, t0 = cpu_seconds([proc]), time.monotonic()
        time.sleep(args.idle)
        out["idle_cpu_per_s"] = (cpu_seconds([proc]) - c0) / (time.monotonic() - t0)
        fill(client, names, args.entries, 0, prefix="fill:")
        time.sleep(1.0)
        spy = None
        if args.profile:
            spy = subprocess.Popen(
                [
                    str(Path(sys.executable).with_name("py-spy")),
                    "record",
                    "--idle",
                    "-r",
                    "50",
                    "-f",
                    "raw",
                    "-o",
                    args.profile,
                    "-p",
                    str(proc.pid),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(1.0)
        load0 = os.getloadavg()[0]
        c0, t0 = cpu_seconds([proc]), time.monotonic()
        pipe = client.pipeline(transaction=False)
        for name in names:
            pipe.rename(f"fill:svmstream:{name}:examples", f"svmstream:{name}:examples")
        pipe.execute()
        total = args.entries * len(names)
        while applied(servers) < total:
            time.sleep(0.5)
        wall, cpu = time.monotonic() - t0, cpu_seconds([proc]) - c0
        if spy is not None:
            spy.send_signal(2)
            spy.wait(60)
        out.update(
            examples_per_s=total / wall,
            examples_per_cpu_s=total / cpu,
            wall_s=wall,
            cpu_s=cpu,
            load_avg=[load0, os.getloadavg()[0]],
            heartbeat=httpx.get(server.url + "/cluster", timeout=60).json().get("heartbeat"),
        )
    finally:
        for s in servers:
            s.__exit__(None, None, None)
        rs.stop()
        shutil.rmtree(root, ignore_errors=True)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=300)
    parser.add_argument("--template", default=None, help="directory to keep the untrained models in")
    parser.add_argument("--idle", type=float, default=20.0)
    parser.add_argument("--profile", default=None)
    parser.add_argument("--env", action="append", default=[], help="K=V for the learner")
    print(json.dumps(run(parser.parse_args(argv))), flush=True)


if __name__ == "__main__":
    main()
