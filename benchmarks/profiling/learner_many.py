"""Profile one clustered learner holding ``--models`` models while their filled streams are
consumed (py-spy on the learner; progress from Redis only, so no probe of ours loads it).

    python -m benchmarks.profiling.learner_many [--models 1000] [--entries 300] [--seconds 30]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

import psutil
import redis

from benchmarks.bench_learners import (
    cpu_seconds,
    delivered,
    fill,
    make_template,
    start_learners,
    wait_settled,
)
from benchmarks.common import RedisServer


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=300)
    parser.add_argument("--seconds", type=int, default=30, help="py-spy record seconds (0: none)")
    parser.add_argument("--out", default="/tmp/learner_many.txt")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="prof-learners-"))
    template = make_template(root, args.models)
    rs = RedisServer(root / "redis", fsync="no").start()
    client = redis.Redis.from_url(rs.url)
    names = sorted(p.name for p in template.iterdir() if p.is_dir())
    servers = start_learners(root, template, rs.url, 1, "prof")
    procs = [psutil.Process(s.proc.pid) for s in servers]
    try:
        wait_settled(servers[0], 1, len(names))
        ids = fill(client, names, args.entries, 0, prefix="fill:")
        time.sleep(1.0)
        c0, t0 = cpu_seconds(procs), time.monotonic()
        pipe = client.pipeline(transaction=False)
        for name in names:
            pipe.rename(f"fill:svmstream:{name}:examples", f"svmstream:{name}:examples")
        pipe.execute()
        spy = (
            None
            if args.seconds <= 0
            else subprocess.Popen(
                [
                    "py-spy",
                    "record",
                    "-p",
                    str(servers[0].proc.pid),
                    "-d",
                    str(args.seconds),
                    "-f",
                    "raw",
                    "-o",
                    args.out,
                    "--nonblocking",
                    "-t",
                ],
            )
        )
        total = args.entries * len(names)
        while True:
            done = sum(delivered(client, ids).values())
            if done >= total:
                break
            time.sleep(1.0)
        t1, c1 = time.monotonic(), cpu_seconds(procs)
        print(
            f"delivered {done} in {t1 - t0:.1f} s, {c1 - c0:.1f} CPU s: "
            f"{done / (t1 - t0):,.0f}/s, {done / (c1 - c0):,.0f}/CPU s"
        )
        if spy is not None:
            spy.wait()
    finally:
        for s in servers:
            s.__exit__(None, None, None)
        rs.stop()


if __name__ == "__main__":
    main()
