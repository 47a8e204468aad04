"""Replica follow (issue 40, ``docs/deployment.md``): seconds from a learner's snapshot, and from
a rollback, to every replica serving that version, measured through the balancer.

Per round, on the owner of model ``m``: one ``/learn`` batch, then ``POST /models/m/snapshot``
(the clock starts when it has answered: the version is on disk and queued for publishing), then
``POST /models/m/rollback`` to the version saved before (the clock starts when it has answered).
The balancer is polled every 10 ms with a kept-alive client; a poll counts when ``n`` successive
predictions (round robin over the replicas) all carry the version.  The poll's own duration is
the resolution of the figure.
"""

from __future__ import annotations

import statistics
import time

import httpx
from harness import BALANCER, compose, problem, record

POLL_S = 0.01


def _versions(bc: httpx.Client, probe, n: int) -> set[int]:
    out = set()
    for _ in range(n):
        r = bc.post("/predict", json={"model": "m", "X": probe})
        r.raise_for_status()
        out.add(r.json()["version"])
    return out


def _seconds_to(bc: httpx.Client, probe, version: int, t0: float, n: int, timeout: float = 30) -> float:
    while time.monotonic() - t0 < timeout:
        if _versions(bc, probe, n) == {version}:
            return time.monotonic() - t0
        time.sleep(POLL_S)
    raise AssertionError(f"the replicas did not serve version {version} within {timeout:.0f} s")


def step_follow(lc: httpx.Client, probe, version: int, rounds: int = 3, n: int = 4) -> int:
    """``rounds`` snapshot and rollback follows on ``m`` (saved at ``version``); the live
    version after them (for the later steps)."""
    X, y = problem(1000 * rounds, seed=7)
    after_snapshot, after_rollback, same = [], [], True
    saved = version
    with httpx.Client(base_url=BALANCER, timeout=10) as bc:
        for k in range(rounds):
            part = slice(1000 * k, 1000 * (k + 1))
            r = lc.post("/learn", json={"model": "m", "X": X[part].tolist(), "y": y[part].tolist()})
            assert r.status_code == 200, r.text
            r = lc.post("/models/m/snapshot")
            assert r.status_code == 200, r.text
            t0, live = time.monotonic(), r.json()["version"]
            after_snapshot.append(_seconds_to(bc, probe, live, t0, n))
            r = lc.post("/models/m/rollback", json={"version": saved})
            assert r.status_code == 200, r.text
            t0, saved = time.monotonic(), r.json()["version"]
            after_rollback.append(_seconds_to(bc, probe, saved, t0, n))
            mine = lc.post("/predict", json={"model": "m", "X": probe}).json()
            theirs = bc.post("/predict", json={"model": "m", "X": probe}).json()
            same = (
                same
                and mine["version"] == theirs["version"] == saved
                and mine["decision"] == theirs["decision"]
            )
    serving = compose(
        "exec", "-T", "redis", "redis-cli", "HSTRLEN", "svmstream:replication:m", "serving"
    ).strip()
    files = {v["version"]: v["size_bytes"] for v in lc.get("/models/m/versions").json()["versions"]}
    record(
        "the published serving state of m (what replicas decode) against its snapshot file",
        f"{int(serving):,} bytes published; the snapshot file of version {saved}: {files.get(saved, 0):,} bytes",
    )
    for what, delays in (("a snapshot", after_snapshot), ("a rollback", after_rollback)):
        record(
            f"replicas follow {what} (answered -> every replica serving it via the balancer, polled every 10 ms)",
            ", ".join(f"{d:.3f} s" for d in delays)
            + f" (median {statistics.median(delays):.3f} s, max {max(delays):.3f} s; goal 0.5 s)"
            + (
                "; decisions after each rollback equal the owner's: " + str(same)
                if what == "a rollback"
                else ""
            ),
            max(delays) < 10 and same,
        )
    return saved
