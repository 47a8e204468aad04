"""Exactly-once with challengers (``docs/challengers.md``): a model with four or five user
challengers (``max_challengers`` = 6) and drift challengers learns from its Redis stream while the real service is SIGKILLed three times;
the champion's and every challenger's decisions, the paired counts and the whole history
(promotions, drift challengers, retirements: which challenger, where, with what evidence)
equal an uninterrupted run's.  The second kill comes after a promotion that no snapshot holds
yet (that server writes none), so the restart replays it from an older snapshot.

CI size: generated data (two moons with a label flip half-way, 6,400 entries).
``SVMSTREAM_TEST_CHALLENGER_ROWS=50000`` streams that many ijcnn1 rows instead (``ijcnn1.bz2``
then ``ijcnn1.t.bz2`` in file order, from ``SVMSTREAM_DATA``): the issue's size.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from svmstream.app.models.snapshots import SnapshotStore
from tests.conftest import REPO, assert_examples_account, two_moons_like, wait_for
from tests.test_stream import good_entries, produce, unique

DATA = Path(os.environ.get("SVMSTREAM_DATA", REPO.parent / "shared" / "data"))
ROWS = os.environ.get("SVMSTREAM_TEST_CHALLENGER_ROWS")

#: the champion starts badly (a gamma far off), so a user challenger is promoted on the way;
#: on_drift="challenger" adds drift challengers (promoted or retired) to replay
GENERATED = {
    "budget": 40, "gamma": 1000.0, "C": 10.0, "shuffle_buffer": 0, "warmup": 200, "classes": [-1, 1],
    "random_state": 2, "on_drift": "challenger",
    "challengers": [{"gamma": 1.0}, {"gamma": 0.2}, {"gamma": 30.0}, {"gamma": 0.01}],
}  # fmt: skip
IJCNN1 = {
    "budget": 100, "gamma": 0.02, "C": 1.0, "shuffle_buffer": 0, "classes": [-1, 1], "random_state": 3,
    "on_drift": "challenger",
    "challengers": [{"gamma": 2.0, "C": 32.0}, {"gamma": 0.5}, {"gamma": 8.0, "C": 4.0}, {"gamma": 0.001}, {"C": 0.001}],
}  # fmt: skip


def _data() -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """(X, y, probe, config) of the run: generated, or ``ROWS`` ijcnn1 rows."""
    if ROWS is None:
        n = 6400
        X, y = two_moons_like(n, d=6, seed=21)
        y = y.copy()
        y[n // 2 :] = -y[n // 2 :]
        return X, y, two_moons_like(150, d=6, seed=96)[0], GENERATED
    files = [DATA / "ijcnn1.bz2", DATA / "ijcnn1.t.bz2"]
    if not all(f.exists() for f in files):
        pytest.skip(f"ijcnn1.bz2 and ijcnn1.t.bz2 not in SVMSTREAM_DATA ({DATA})")
    from sklearn.datasets import load_svmlight_files

    Xa, ya, Xb, yb = load_svmlight_files([str(f) for f in files], n_features=22)
    X = np.vstack([Xa.toarray(), Xb.toarray()])
    y = np.concatenate([ya, yb]).astype(int)
    n = int(ROWS)
    assert 0 < n <= X.shape[0] - 300, f"SVMSTREAM_TEST_CHALLENGER_ROWS: 1..{X.shape[0] - 300}"
    return X[:n], y[:n], X[-300:], IJCNN1


def _env(redis_url: str, name: str, snapshots: bool = True) -> dict[str, str]:
    env = {
        "SVMSTREAM_REDIS_URL": redis_url, "SVMSTREAM_STREAM_MODELS": name,
        "SVMSTREAM_CREATE_DEFAULT_MODEL": "false", "SVMSTREAM_STREAM_COUNT": "100",
        "SVMSTREAM_STREAM_BLOCK_MS": "100", "SVMSTREAM_WARM_UP": "false", "SVMSTREAM_STREAM_LEASE_S": "0.6",
        "SVMSTREAM_STREAM_SNAPSHOT_EVERY": "700", "SVMSTREAM_SNAPSHOT_INTERVAL_S": "0.25",
        "SVMSTREAM_MAX_CHALLENGERS": "6",
    }  # fmt: skip
    if not snapshots:  # the cadence changes no decision; this server writes no snapshot at all
        env.update(SVMSTREAM_STREAM_SNAPSHOT_EVERY="1000000000", SVMSTREAM_SNAPSHOT_INTERVAL_S="100000")
    return env


def _info(server, name: str) -> dict:
    """``GET /models/{name}``, read while the learner works: the promotion figures are those of
    the published version (never a promotion before the examples that led to it)."""
    r = httpx.get(f"{server.url}/models/{name}", timeout=30)
    if r.status_code != 200:  # a server just restarted may not answer for the model yet: read again
        return {"n_seen": -1, "status": r.status_code, "body": r.text}
    info = r.json()
    assert "promotion" in info, info
    assert info["promotion"]["position"] == info["n_seen"], (info["promotion"], info["n_seen"])
    return info


def _saved_promotions(snap: Path, name: str) -> tuple[int, int]:
    """(promotions, position) of the newest snapshot on disk."""
    found = SnapshotStore(snap).load_newest_header(name)
    saved = found.challengers or {}
    return int(saved.get("promotions", 0)), int(saved.get("position", 0))


def _outcome(c: httpx.Client, name: str, probe: np.ndarray) -> dict:
    """Everything a restart must not change: the history (less its clock times), the
    challengers' figures, then the champion's and each challenger's decisions (promoted by
    hand in turn, after the stream)."""
    info = c.get(f"/models/{name}").json()
    history = [{k: v for k, v in e.items() if k != "time"} for e in info["promotion"]["history"]]
    figures = [
        {k: ch[k] for k in ("settings", "origin", "started_at", "examples_seen", "paired_examples", "wins",
                            "losses", "log_e_value")}
        for ch in info["challengers"]
    ]  # fmt: skip
    decisions = []
    for i in range(len(info["challengers"]) + 1):
        if i:
            r = c.post(f"/models/{name}/promote", json={"challenger": 0})
            assert r.status_code == 200, r.text
        r = c.post("/predict", json={"model": name, "X": probe.tolist()})
        assert r.status_code == 200, r.text
        decisions.append(np.asarray(r.json()["decision"]))
    return {
        "history": history, "figures": figures, "decisions": decisions,
        "promotions": info["promotion"]["promotions"], "position": info["promotion"]["position"],
        "n_seen": info["n_seen"], "discarded": info.get("n_discarded", 0),
    }  # fmt: skip


def _consumed(c: httpx.Client, name: str, n: int, probe) -> dict:
    """:func:`_outcome` once the ``n`` entries of the stream are learned or held."""
    wait_for(
        lambda: c.get(f"/models/{name}").json()["n_seen"] >= n, timeout=60 + n / 50, what="stream consumed"
    )
    assert_examples_account(c, name, sent=n)
    return _outcome(c, name, probe)


def test_exactly_once_with_challengers_through_the_stream_with_sigkills(redis_server, start_server, tmp_path):
    X, y, probe, config = _data()
    n = X.shape[0]
    redis = redis_server.client()
    clock = time.perf_counter()

    ref_name, name = unique("ref"), unique("killed")
    snap = tmp_path / "snap"
    # the first server runs the uninterrupted reference to its end, then the killed model's start
    server = start_server(snap, env=_env(redis_server.url, f"{ref_name},{name}"))
    with server.client() as c:
        for model in (ref_name, name):
            assert c.put(f"/models/{model}", json=config).status_code == 201
        produce(redis, f"svmstream:{ref_name}:examples", good_entries(X, y))
        ref = _consumed(c, ref_name, n, probe)
    promoted_at = [e["at"] for e in ref["history"] if e["event"] == "promoted"]
    assert len(promoted_at) >= 2, ref["history"]  # a user challenger, then a drift challenger
    target = promoted_at[-1]  # the promotion the second kill comes after
    entries = good_entries(X, y)
    # 1: somewhere before the last promotion (the stream stops short of it until this kill)
    produce(redis, f"svmstream:{name}:examples", entries[: target - 128])
    kills = []
    threshold = int(np.random.default_rng(7).uniform(0.3, 0.7) * target)
    wait_for(lambda: _info(server, name)["n_seen"] >= threshold, timeout=60 + n / 50, interval=0.005,
             what="first kill point")  # fmt: skip
    server.kill()
    kills.append(_saved_promotions(snap, name))
    # 2: a server that writes no snapshot, killed right after a promotion it made
    saved, position = kills[-1]
    assert position < target
    produce(redis, f"svmstream:{name}:examples", entries[target - 128 :])
    server = start_server(snap, env=_env(redis_server.url, name, snapshots=False))
    seen = wait_for(
        lambda: (info := _info(server, name)).get("promotion", {}).get("promotions", -1) > saved and info,
        timeout=60 + n / 50, interval=0.005, what="a promotion after the newest snapshot",
    )  # fmt: skip
    server.kill()
    kills.append(_saved_promotions(snap, name))
    assert kills[-1] == (saved, position), "the promotion must not be in any snapshot before the kill"
    # 3: later, at a random point of the rest
    server = start_server(snap, env=_env(redis_server.url, name))
    later = int(np.random.default_rng(8).uniform(seen["n_seen"], n - 200))
    wait_for(lambda: _info(server, name)["n_seen"] >= later, timeout=60 + n / 50, interval=0.005,
             what="third kill point")  # fmt: skip
    server.kill()
    kills.append(_saved_promotions(snap, name))
    server = start_server(snap, env=_env(redis_server.url, name))
    with server.client() as c:
        got = _consumed(c, name, n, probe)
    server.terminate()
    assert redis.xpending(f"svmstream:{name}:examples", f"svmstream:{name}")["pending"] == 0

    delta = max(float(np.max(np.abs(a - b))) for a, b in zip(got["decisions"], ref["decisions"], strict=True))
    print(
        f"\n{n} entries, 3 SIGKILLs (newest snapshot at each: promotions/position {kills}; the second "
        f"after promotion {seen['promotion']['promotions']} at n_seen {seen['n_seen']}): promotions "
        f"{got['promotions']} at {[e['at'] for e in got['history'] if e['event'] == 'promoted']} "
        f"(uninterrupted: {ref['promotions']} at {promoted_at}), {len(got['decisions'])} models compared, "
        f"max |decision delta| = {delta:g}, discarded {got['discarded']}, "
        f"{time.perf_counter() - clock:.0f} s"
    )
    assert got["history"] == ref["history"]
    assert got["figures"] == ref["figures"]
    assert (got["promotions"], got["position"], got["n_seen"]) == (ref["promotions"], n, n)
    assert got["discarded"] == ref["discarded"] == 0
    assert len(got["decisions"]) == len(ref["decisions"]) >= 3
    assert delta == 0.0
