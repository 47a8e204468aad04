"""Versions through the real service: rollback after bad data on a Redis stream, replicas, history on disk.

A learner and one prediction replica on a real ``redis-server``; model ``ijcnn1`` (B = 500, no
other settings) learns from the Redis stream (entries ``xd``, file order):

A. 30,000 clean ijcnn1 rows, flush, ``POST /models/ijcnn1/snapshot`` (the *clean* version); then
   5,000 rows with flipped labels, flush, snapshot (the *bad* version); test accuracy of each
   (ijcnn1.t, 20,000 rows, pinned predictions); ``POST /models/ijcnn1/rollback`` to the clean
   version: the live decisions against that snapshot's (pinned, and the file decoded here),
   the delay from the rollback's answer until the replica serves the rolled-back version (the
   replica polled every 10 ms from the answer on), then 2,000 more clean rows learned from the
   stream on top of it, and a second rollback (to the bad version) that undoes the first; then
   :data:`ROLLBACK_ROUNDS` more rollbacks, alternately to each version, each timed the same way
   (median and maximum), and the bytes published for the replica against the snapshot file's.
B. 1,000 snapshots of a small model (``keep_versions`` 20, ``max_history_bytes`` 2 MB) with two
   rollbacks marking versions: files and bytes on disk after every 100 snapshots.

Run: ``python -m benchmarks.bench_versions``.  Writes ``benchmarks/results/versions.{json,md}``.
Under load: ``python -m benchmarks.bench_versions --parts A --burners 2 --name versions_burners``
(two CPU-bound busy loops run alongside part A).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import redis

from benchmarks import datasets
from benchmarks.common import RedisServer, Server, machine, write_results
from svmstream.app.cli.producer import stream_entries, xadd_batch
from svmstream.app.models.snapshots import SnapshotStore

MODEL = "ijcnn1"
#: Further rollbacks after the two of the scenario, each timed until the replica serves it.
ROLLBACK_ROUNDS = 8
KEY = f"svmstream:{MODEL}:examples"


def _produce(rc, X, y, start, stop, batch=1000) -> str:
    last = None
    for lo in range(start, stop, batch):
        ids = xadd_batch(rc, KEY, stream_entries(X, y, "xd", lo, min(stop, lo + batch)))
        last = ids[-1].decode()
    return last


def _wait_applied(client, last_id: str, timeout=600.0) -> None:
    target = tuple(int(p) for p in last_id.split("-"))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stream = client.get(f"/models/{MODEL}").json().get("metrics", {}).get("stream") or {}
        applied = stream.get("last_applied_id")
        if applied and tuple(int(p) for p in applied.split("-")) >= target:
            return
        time.sleep(0.1)
    raise TimeoutError("the learner did not apply the stream")


def _decisions(client, X, version=None):
    body = {"model": MODEL, "x": X.tolist()}
    if version is not None:
        body["version"] = version
    r = client.post("/predict", json=body)
    if r.status_code != 200:
        raise RuntimeError(f"/predict -> {r.status_code}: {r.text[:300]}")
    answer = r.json()
    return np.asarray(answer["decision"]), answer["model_version"]


def _replica_delay(replica, version: int, since: float, timeout: float = 60.0) -> float:
    """Seconds from ``since`` (``time.time()``) until ``replica`` answers a prediction from
    ``version`` of the model (polled every 10 ms)."""
    while time.time() - since < timeout:
        got = replica.post("/predict", json={"model": MODEL, "x": [[0.0] * 22]})
        if got.status_code == 200 and got.json()["model_version"] >= version:
            return time.time() - since
        time.sleep(0.01)
    raise TimeoutError(f"the replica did not serve version {version} within {timeout} s")


def _rollback(learner, replica, version: int) -> tuple[dict, float, float]:
    """Roll the learner back to ``version``: ``(answer, seconds the request took, seconds from
    the answer until the replica serves the new live version)``; the replica is polled at once."""
    asked_at = time.time()
    r = learner.post(f"/models/{MODEL}/rollback", json={"version": version})
    answered_at = time.time()
    if r.status_code != 200:
        raise RuntimeError(f"rollback -> {r.status_code}: {r.text[:300]}")
    return r.json(), answered_at - asked_at, _replica_delay(replica, r.json()["version"], answered_at)


def _accuracy(client, Xt, yt, version) -> float:
    decision = np.concatenate(
        [_decisions(client, Xt[i : i + 2000], version)[0] for i in range(0, len(Xt), 2000)]
    )
    return float(np.mean(np.where(decision > 0, 1.0, -1.0) == yt))


def part_a(tmp: Path, rows: list[dict]) -> dict:
    import httpx

    X, y, Xt, yt = datasets.load("ijcnn1")
    Xt, yt = Xt[:20_000].toarray(), yt[:20_000]
    probe = Xt[:500]
    rs = RedisServer(tmp / "redis", fsync="everysec").start()
    env = {"SVMSTREAM_REDIS_URL": rs.url, "SVMSTREAM_SNAPSHOT_INTERVAL_S": "100000"}
    learner = Server(tmp / "learner", env=env, clean_env=True, log=tmp / "learner.log")
    replica = Server(tmp / "replica", "--role", "replica", env=env, clean_env=True, log=tmp / "replica.log")
    out: dict = {}
    with learner, replica:
        lc, rcl = (
            httpx.Client(base_url=learner.url, timeout=120),
            httpx.Client(base_url=replica.url, timeout=120),
        )
        rc = redis.Redis.from_url(rs.url)
        assert lc.put(f"/models/{MODEL}", json={"budget": 500, "n_features": 22}).status_code == 201
        _wait_applied(lc, _produce(rc, X, y, 0, 30_000))
        lc.post(f"/models/{MODEL}/flush")
        clean = lc.post(f"/models/{MODEL}/snapshot").json()["version"]
        flipped = -y.copy()
        _wait_applied(lc, _produce(rc, X, flipped, 30_000, 35_000))
        lc.post(f"/models/{MODEL}/flush")
        bad = lc.post(f"/models/{MODEL}/snapshot").json()["version"]
        out["clean_version"], out["bad_version"] = clean, bad
        out["clean_accuracy"] = _accuracy(lc, Xt, yt, clean)
        out["bad_accuracy"] = _accuracy(lc, Xt, yt, bad)
        pinned, _ = _decisions(lc, probe, clean)
        stored = SnapshotStore(tmp / "learner")
        file_path = next(p for _, p in stored.files(MODEL) if stored.read(p).version == clean)
        from_file = stored.read(file_path)
        _replica_delay(rcl, bad, time.time())  # the replica serves the bad version first
        r, asked_s, delay = _rollback(lc, rcl, clean)
        out["rollback_request_s"], out["replica_delay_s"] = asked_s, delay
        out["load_avg_at_rollback"] = os.getloadavg()[0]
        live, live_version = _decisions(lc, probe)
        out["rollback"] = r
        out["rollback_max_abs_diff_vs_pinned"] = float(np.max(np.abs(live - pinned)))
        file_decisions = from_file.estimator.decision_function(probe)
        out["rollback_max_abs_diff_vs_snapshot_file"] = float(np.max(np.abs(live - file_decisions)))
        replica_d, _ = _decisions(rcl, probe)
        out["replica_max_abs_diff"] = float(np.max(np.abs(replica_d - live)))
        out["accuracy_after_rollback"] = _accuracy(lc, Xt, yt, None)
        _wait_applied(lc, _produce(rc, X, y, 35_000, 37_000))  # learning continues from it
        lc.post(f"/models/{MODEL}/flush")
        info = lc.get(f"/models/{MODEL}").json()
        out["version_after_more_learning"] = info["version"]
        out["examples_after_more_learning"] = info["examples"]
        undo = lc.post(f"/models/{MODEL}/rollback", json={"version": bad}).json()
        undone, _ = _decisions(lc, probe)
        bad_pinned, _ = _decisions(lc, probe, bad)
        out["second_rollback"] = undo
        out["second_rollback_max_abs_diff_vs_bad"] = float(np.max(np.abs(undone - bad_pinned)))
        out["stream_applied"] = lc.get(f"/models/{MODEL}").json()["metrics"]["stream"]
        _replica_delay(rcl, undo["version"], time.time())
        delays, loads = [], []
        for k in range(ROLLBACK_ROUNDS):  # more rollbacks, alternately to each version
            _, _, delay = _rollback(lc, rcl, (clean, bad)[k % 2])
            delays.append(delay)
            loads.append(os.getloadavg()[0])
            time.sleep(0.5)
        out["replica_delays_s"] = delays
        out["replica_delay_median_s"] = float(np.median(delays))
        out["replica_delay_max_s"] = max(delays)
        out["load_avg_during_rounds"] = [min(loads), max(loads)]
        published = rc.hmget(f"svmstream:replication:{MODEL}", ["serving", "blob"])
        out["replica_published_bytes"] = len(published[0] or published[1] or b"")
        out["snapshot_file_bytes"] = max(
            p.stat().st_size for p in (tmp / "learner" / MODEL).glob("*.svmstate")
        )
    rs.stop()
    rows.append({"part": "A", **{k: v for k, v in out.items() if not isinstance(v, dict)}})
    return out


def part_b(tmp: Path, rows: list[dict]) -> dict:
    import httpx

    rng = np.random.default_rng(0)
    server = Server(
        tmp / "history",
        "--keep-versions",
        "20",
        "--max-history-bytes",
        str(2_000_000),
        "--snapshot-interval",
        "100000",
        clean_env=True,
        log=tmp / "history.log",
    )
    figures = []
    with server:
        c = httpx.Client(base_url=server.url, timeout=60)
        c.put(
            "/models/h",
            json={
                "algorithm": "bsgd",
                "budget": 50,
                "gamma": 1.0,
                "C": 10,
                "n_features": 8,
                "rehearsal": 0,
                "shuffle_buffer": 0,
            },
        )
        marked = []
        for k in range(1000):
            Xb = rng.normal(size=(20, 8))
            c.post("/learn", json={"model": "h", "x": Xb.tolist(), "y": np.sign(Xb[:, 0]).tolist()})
            version = c.post("/models/h/snapshot").json()["version"]
            if k in (100, 600):
                marked.append(version)
                c.post("/models/h/rollback", json={"version": version})
            if (k + 1) % 100 == 0:
                files = list((tmp / "history" / "h").glob("h-*.svmstate"))
                figures.append(
                    {
                        "part": "B",
                        "snapshots": k + 1,
                        "files": len(files),
                        "bytes": sum(f.stat().st_size for f in files),
                        "marked_versions_listed": sum(
                            v["version"] in marked for v in c.get("/models/h/versions").json()["versions"]
                        ),
                    }
                )
                print(figures[-1], flush=True)
    rows.extend(figures)
    return {"keep_versions": 20, "max_history_bytes": 2_000_000, "marked": marked, "after": figures}


def main(argv=None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="AB", help="A: rollback with a replica; B: history on disk")
    parser.add_argument(
        "--burners", type=int, default=0, help="CPU-bound busy-loop processes running alongside part A"
    )
    parser.add_argument("--name", default="versions", help="results file name (benchmarks/results/NAME.*)")
    args = parser.parse_args(argv)
    payload: dict = {"machine": machine(), "burners": args.burners}
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-versions-") as d:
        tmp = Path(d)
        if "A" in args.parts:
            burners = [
                subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.burners)
            ]
            try:
                payload["A"] = part_a(tmp, rows)
            finally:
                for p in burners:
                    p.kill()
                    p.wait()
            print(payload["A"], flush=True)
        if "B" in args.parts:
            payload["B"] = part_b(tmp, rows)
    write_results(
        args.name,
        payload,
        rows,
        "Versions: rollback after flipped labels on a Redis stream, replicas, history on disk",
        notes="Part A: ijcnn1 through a real Redis stream into a learner with one replica. "
        "Part B: 1,000 snapshots of a small model with keep_versions 20 and max_history_bytes 2 MB.",
    )


if __name__ == "__main__":
    main()
