"""Profile the learner that gains a killed learner's models (py-spy ``--gil`` on the survivor).

    python -m benchmarks.profiling.learner_gain [--models 1000] [--seconds 40]

Two clustered learners (the default lease TTL) hold ``--models`` models with a few entries each;
learner-2 is SIGKILLed and learner-1 is recorded while it takes the models over; the seconds
until every model of the killed learner had an entry delivered again are printed, with the
timeline of models learning again and of the gains (read from the moves stream); learner-1's log
is kept as ``<out>.log``.  ``--idle`` records every thread's stack instead of the lock holder's;
``--feed`` feeds the killed learner's models every 0.2 s meanwhile, as ``bench_learners`` does.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import redis

from benchmarks.bench_learners import delivered, fill, make_template, owners, start_learner, wait_settled
from benchmarks.common import RedisServer
from svmstream.app.cluster.membership import MOVES_KEY


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--seconds", type=int, default=40, help="py-spy record seconds (0: none)")
    parser.add_argument("--out", default="/tmp/learner_gain.txt")
    parser.add_argument("--idle", action="store_true", help="every thread's stack, idle ones too (not --gil)")
    parser.add_argument(
        "--feed",
        action="store_true",
        help="feed the killed learner's models every 0.2 s, as bench_learners does",
    )
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="prof-gain-"))
    template = make_template(root, args.models)
    snap = root / "snap"
    shutil.copytree(template, snap)
    rs = RedisServer(root / "redis", fsync="no").start()
    client = redis.Redis.from_url(rs.url)
    names = sorted(p.name for p in template.iterdir() if p.is_dir())
    servers = {m: start_learner(root, snap, rs.url, m) for m in ("learner-1", "learner-2")}
    try:
        ids = fill(client, names, 20, 99)
        while min(delivered(client, ids).values()) < 20:
            time.sleep(0.2)
        wait_settled(servers["learner-1"], 2, len(names))
        theirs = [m for m, o in owners(servers["learner-1"]).items() if o == "learner-2"]
        os.kill(servers["learner-2"].proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        killed_at = time.time()
        spy = None
        if args.seconds > 0:
            spy = subprocess.Popen(
                [
                    "py-spy",
                    "record",
                    "-p",
                    str(servers["learner-1"].proc.pid),
                    "-d",
                    str(args.seconds),
                    "-f",
                    "raw",
                    "-o",
                    args.out,
                    *(["--idle"] if args.idle else ["--gil"]),
                    "--nonblocking",
                    "-r",
                    "50",
                ]
            )
        stop_feed = threading.Event()
        if args.feed:
            threading.Thread(target=feed, args=(rs.url, theirs, stop_feed), daemon=True).start()
        more = fill(client, theirs, 1, 7)
        want = {m: len(ids[m]) + 1 for m in theirs}
        ids.update({m: sorted(ids[m] + more[m]) for m in theirs})
        timeline = []
        while True:
            got = delivered(client, {m: ids[m] for m in theirs})
            back = sum(got[m] >= want[m] for m in theirs)
            if not timeline or back != timeline[-1][1]:
                timeline.append((round(time.monotonic() - killed, 2), back))
            if back == len(theirs):
                break
            time.sleep(0.2)
        stop_feed.set()
        print("seconds after the kill, models learning again:", timeline)
        gains = sorted(
            float(f[b"at"]) - killed_at
            for _, f in client.xrange(MOVES_KEY)
            if f[b"kind"] == b"gained" and float(f[b"at"]) > killed_at
        )
        marks = [gains[i] for i in range(0, len(gains), 50)] + gains[-1:]
        print(f"{len(gains)} gains; every 50th at", [round(g, 2) for g in marks])
        print(f"{len(theirs)} models learning again {time.monotonic() - killed:.2f} s after the kill")
        if spy is not None:
            spy.wait()
    finally:
        for s in servers.values():
            if s.proc.poll() is None:
                s.__exit__(None, None, None)
        rs.stop()
        shutil.copy(root / "kill-learner-1.log", args.out + ".log")
        shutil.rmtree(root, ignore_errors=True)


def feed(url: str, names: list[str], stop: threading.Event) -> None:
    """One more entry for each of ``names`` every 0.2 s until ``stop`` (bench_learners' load)."""
    client = redis.Redis.from_url(url)
    while not stop.wait(0.2):
        fill(client, names, 1, 5)


if __name__ == "__main__":
    main()
