"""Prediction replicas following a learner.

One learner and two replica processes (``svmstream serve --role replica``) on a real
``redis-server``; ijcnn1 is streamed into the learner (``svmstream replay --redis``, file
order, 3 passes, the model created with no settings but B = 500), the learner snapshots every 0.5 s.

A. For every snapshot the learner writes (its version and time, from ``GET /models``): the
   delay until each replica answers ``/predict`` with that version (polled every 10 ms), and
   whether the replica's decisions on 500 test rows equal, exactly, those of the learner's
   snapshot file of that version restored in this process.
B. SIGKILL one replica while a load generator (2 threads) hits both: errors of the survivor
   (must be 0) and requests it answered.

Usage: ``python -m benchmarks.bench_replicas``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from benchmarks import datasets
from benchmarks.common import REPO, RedisServer, Server, child_pythonpath, machine, write_results

MODEL = "ijcnn1"


def _wait_version(client, version, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = client.post("/predict", json={"model": MODEL, "X": [[0.0] * 22]})
        if r.status_code == 200 and r.json()["version"] >= version:
            return time.time(), r.json()["version"]
        time.sleep(0.01)
    return None, None


def main(argv=None) -> None:
    import httpx

    from svmstream.app.models.snapshots import SnapshotStore

    _, _, Xt, _ = datasets.load("ijcnn1")
    probe = Xt[:500].toarray()
    payload: dict = {"machine": machine()}
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-replicas-") as tmpdir:
        tmp = Path(tmpdir)
        rs = RedisServer(tmp / "redis", fsync="everysec").start()
        env = {"SVMSTREAM_REDIS_URL": rs.url, "SVMSTREAM_LOG_LEVEL": "warning"}
        learner = Server(
            tmp / "learner",
            env={**env, "SVMSTREAM_SNAPSHOT_INTERVAL_S": "0.5"},
            clean_env=True,
            log=tmp / "l.log",
        )
        replicas = [
            Server(tmp / f"r{k}", "--role", "replica", env=env, clean_env=True, log=tmp / f"r{k}.log")
            for k in range(2)
        ]
        with learner, replicas[0], replicas[1]:
            lc = httpx.Client(base_url=learner.url, timeout=60)
            rcs = [httpx.Client(base_url=r.url, timeout=60) for r in replicas]
            # Server.__enter__ waited for every process's warm-up (/health: solvers ready): the
            # one-time JIT compilation is excluded from the delays
            assert lc.put(f"/models/{MODEL}", json={"budget": 500}).status_code == 201
            producer = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "svmstream.app.cli.main",
                    "replay",
                    str(datasets.path("ijcnn1")),
                    "--redis",
                    rs.url,
                    "--model",
                    MODEL,
                    "--file-order",
                    "--no-progress",
                    "--batch",
                    "500",
                    "--passes",
                    "3",
                ],
                cwd=REPO,
                env={**os.environ, "PYTHONPATH": child_pythonpath()},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            store = SnapshotStore(tmp / "learner", keep=3)
            seen = set()
            deadline = time.monotonic() + 300
            last_new = time.monotonic()
            while time.monotonic() < deadline and len(seen) < 40:
                info = lc.get(f"/models/{MODEL}").json()
                path = info.get("last_snapshot_path")
                if not path or path in seen or not Path(path).exists():
                    if producer.poll() is not None and time.monotonic() - last_new > 5.0:
                        break  # the stream is learned and no snapshot came for 5 s
                    time.sleep(0.02)
                    continue
                seen.add(path)
                last_new = time.monotonic()
                try:
                    restored = store.read(Path(path))
                except Exception:  # pruned meanwhile (keep=3)
                    continue
                if restored.estimator is None or restored.estimator.warming_up_:
                    continue
                expected = restored.estimator.decision_function(probe)
                row = {"part": "A", "version": restored.version, "snapshot_at": restored.saved_at}
                for k, rc in enumerate(rcs):
                    at, version = _wait_version(rc, restored.version)
                    row[f"replica{k}_delay_s"] = None if at is None else at - restored.saved_at
                    if version == restored.version:
                        got = rc.post("/predict", json={"model": MODEL, "X": probe.tolist()}).json()
                        row[f"replica{k}_exact"] = bool(np.array_equal(np.asarray(got["decision"]), expected))
                    else:
                        row[f"replica{k}_exact"] = f"moved on to version {version}"
                rows.append(row)
                print(row, flush=True)
            producer.wait(600)

            # B: SIGKILL one replica under load
            results = {0: [], 1: []}
            stop = threading.Event()

            def hit(k):
                with httpx.Client(base_url=replicas[k].url, timeout=10) as c:
                    while not stop.is_set():
                        try:
                            results[k].append(
                                c.post("/predict", json={"model": MODEL, "X": probe[:5].tolist()}).status_code
                            )
                        except httpx.HTTPError as exc:
                            results[k].append(type(exc).__name__)

            threads = [threading.Thread(target=hit, args=(k,)) for k in (0, 1)]
            for t in threads:
                t.start()
            time.sleep(2.0)
            replicas[1].proc.send_signal(signal.SIGKILL)
            time.sleep(3.0)
            stop.set()
            for t in threads:
                t.join()
            replicas[1].proc.wait(10)
            replicas[1].proc = subprocess.Popen(["true"])  # already dead: let __exit__ pass
            survivor_errors = sum(1 for r in results[0] if r != 200)
            rows.append(
                {
                    "part": "B",
                    "survivor_requests": len(results[0]),
                    "survivor_errors": survivor_errors,
                    "killed_replica_requests_before_kill": sum(1 for r in results[1] if r == 200),
                }
            )
            print(rows[-1], flush=True)
        rs.stop()
    a_rows = [r for r in rows if r["part"] == "A"]
    delays = [
        r[f"replica{k}_delay_s"] for r in a_rows for k in (0, 1) if r.get(f"replica{k}_delay_s") is not None
    ]
    payload.update(
        rows=rows,
        snapshots_checked=len(a_rows),
        delay_s_median=float(np.median(delays)) if delays else None,
        delay_s_max=float(np.max(delays)) if delays else None,
        compared=sum(1 for r in a_rows for k in (0, 1) if isinstance(r.get(f"replica{k}_exact"), bool)),
        all_exact=all(
            r[f"replica{k}_exact"]
            for r in a_rows
            for k in (0, 1)
            if isinstance(r.get(f"replica{k}_exact"), bool)
        ),
        load_avg_at_end=os.getloadavg()[0],
    )
    write_results(
        "replicas",
        payload,
        rows,
        "Prediction replicas following a learner through Redis",
        notes=f"ijcnn1 streamed into the learner (3 passes in file order, B = 500, no other setting), snapshots every 0.5 s. "
        f"Delay = time from the learner's snapshot (saved_at) until the replica answers with that version "
        f"(polled every 10 ms): median {payload['delay_s_median']}, max {payload['delay_s_max']} s over "
        f"{len(a_rows)} snapshots × 2 replicas (after every process's warm-up); decisions equal to the snapshot's, "
        f"exactly, in all {payload['compared']} comparisons where the replica still served that version: "
        f"{payload['all_exact']}.",
    )


if __name__ == "__main__":
    main()
