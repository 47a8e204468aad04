"""The compose check of a hand-off between the two learners (``docs/cluster.md``), run by
``check_deployment.py``.

A model ``ref`` takes the a9a stream uninterrupted.  A second model, named so that rendezvous
gives it to the "learner" container, takes the same stream; when 30 % is applied that
container is SIGKILLed (``docker kill``: a manual stop, the restart policy leaves it down).
"svmstream" must then gain every model the dead learner held (after its lease TTL), restore
the newest snapshot, claim what the dead consumer left pending and resume the group from the
snapshot's position: the model's count ends at exactly the stream's length and its decisions
equal the uninterrupted run's.  Then the killed container is started again: it joins as a new
member, rendezvous gives it its share back through graceful hand-offs (final snapshot,
acknowledgement, release), and every model is still exact on its new owner.
"""

from __future__ import annotations

import threading
import time

import httpx
import numpy as np
from harness import (
    AUTH,
    LEARNER,
    STREAM_MODEL,
    CheckFailed,
    applied_all,
    cluster_view,
    compose,
    containers,
    member_address,
    metric,
    predict,
    record,
    replay,
    settle,
    stream_state,
    wait_for,
)

from svmstream.app.cluster.rendezvous import owner


def _stream_model_on(view: dict, service_member: str) -> str:
    """A model name rendezvous gives to ``service_member`` among the live members."""
    live = [m["name"] for m in view["members"]]
    for k in range(1000):
        name = f"s{k}"
        if name not in view["models"] and owner(name, live) == service_member:
            return name
    raise CheckFailed("no model name falls to the learner container")


def _create(name: str) -> None:
    r = httpx.put(f"{LEARNER}/models/{name}", json=STREAM_MODEL, headers=AUTH, timeout=60)
    if r.status_code != 201:
        raise CheckFailed(f"PUT /models/{name}: {r.status_code} {r.text}")


def _the_learner_member(view: dict) -> str:
    """The member name of the "learner" container (the one that is not "svmstream")."""
    others = [m["name"] for m in view["members"] if m.get("url") != "http://svmstream:8000"]
    if len(others) != 1:
        raise CheckFailed(f"expected one member besides svmstream: {view['members']}")
    return others[0]


def _watch_gain(url: str, name: str, killed_at: float) -> tuple[float, float, int]:
    """Seconds from the kill to ``name`` listed on the survivor, to it learning there, and its
    count when first seen there (the restored snapshot's, or a little more)."""
    (first,) = wait_for(lambda: _seen(url, name), 120, f"model {name!r} gained by the survivor", 0.05)
    gained = time.monotonic() - killed_at
    wait_for(lambda: _seen(url, name, above=first), 120, f"model {name!r} learning on the survivor", 0.05)
    return gained, time.monotonic() - killed_at, first


def _seen(url: str, name: str, above: int = -1) -> tuple[int] | None:
    """``(n_seen,)`` of ``name`` on the learner at ``url`` when it holds it with more than
    ``above`` examples seen, else None."""
    r = httpx.get(f"{url}/models/{name}", headers=AUTH, timeout=10)
    seen = r.json()["n_seen"] if r.status_code == 200 else -1
    return (seen,) if seen > above else None


def step_handoff() -> None:
    """See the module docstring."""
    view = settle()
    victim_member = _the_learner_member(view)
    victim, victim_url = member_address(victim_member)
    name = _stream_model_on(view, victim_member)
    for model_name in ("ref", name):
        _create(model_name)
    view = settle(models=["ref", name])
    ref_url = member_address(view["models"]["ref"]["member"])[1]
    t0 = time.monotonic()
    n = int(replay("ref")["examples"])
    with httpx.Client(base_url=ref_url, headers=AUTH, timeout=60) as rc:
        ref = wait_for(
            lambda: applied_all(rc, "ref", n), 300, "the uninterrupted run to apply the stream", 0.5
        )
    t_ref = time.monotonic() - t0
    probe = (np.random.default_rng(3).random((200, 123)) < 0.11).astype(float).tolist()
    ref_pred = predict(ref_url, "ref", probe, timeout=60)

    victims = [m for m, held in view["models"].items() if held and held["member"] == victim_member]
    kill_at: dict = {}

    def kill_mid_stream():
        with httpx.Client(base_url=victim_url, headers=AUTH, timeout=30) as vc:
            wait_for(
                lambda: stream_state(vc, name)["n_seen"] >= n * 0.3, 300, "the stream 30 % applied", 0.05
            )
            kill_at["n_seen"] = stream_state(vc, name)["n_seen"]
        t = time.monotonic()  # the kill lands somewhere in the `docker compose kill` call
        compose("kill", "-s", "SIGKILL", "learner")
        kill_at["call_s"] = time.monotonic() - t
        kill_at["t"] = t

    killer = threading.Thread(target=kill_mid_stream, daemon=True)
    killer.start()
    t0 = time.monotonic()
    replay(name)
    killer.join(320)
    if "t" not in kill_at:
        raise CheckFailed("the learner container was never killed mid-stream")
    gained, learning, restored = _watch_gain(LEARNER, name, kill_at["t"])
    alone = settle(members=1)
    moved = sorted(m for m in victims if alone["models"][m]["member"] != victim_member)
    with httpx.Client(base_url=LEARNER, headers=AUTH, timeout=60) as sc:
        got = wait_for(lambda: applied_all(sc, name, n), 300, "the survivor to apply the stream", 0.5)
        mine = predict(LEARNER, name, probe, timeout=60)
        applied_here = metric(sc, "svmstream_examples_applied", name)
    exact = kill_at["n_seen"] < n and got["n_seen"] == n == ref["n_seen"] == applied_here
    same = mine["decision"] == ref_pred["decision"]
    record(
        "SIGKILL the learner container owning a model under a Redis stream (a9a): hand-off to svmstream",
        f"killed at {kill_at['n_seen']:,} of {n:,} applied; its {len(victims)} models {victims} all on "
        f"svmstream: {moved == sorted(victims)}; gained {gained:.1f} s after the kill call (which "
        f"took {kill_at['call_s']:.1f} s; restored at "
        f"{restored:,}), learning {learning:.1f} s after it; applied {got['n_seen']:,} of {n:,} "
        f"(uninterrupted: {ref['n_seen']:,}; svmstream_examples_applied there {applied_here}); "
        f"200 decisions equal the uninterrupted run's: {same}; uninterrupted {t_ref:.1f} s, killed run "
        f"{time.monotonic() - t0:.1f} s",
        exact and same and moved == sorted(victims),
    )
    _rejoin(name, n, probe, ref_pred)


def _rejoin(name: str, n: int, probe, ref_pred) -> None:
    """Start the killed container again: it joins, takes its share back, every model exact."""
    t0 = time.monotonic()
    compose("start", "learner", timeout=120)
    view = settle(members=2)
    seconds = time.monotonic() - t0
    holder = view["models"][name]["member"]
    _, url = member_address(holder)
    with httpx.Client(base_url=url, headers=AUTH, timeout=60) as oc:
        got = wait_for(
            lambda: applied_all(oc, name, n), 120, f"model {name!r} on its owner after the rejoin", 0.5
        )
    again = predict(url, name, probe, timeout=60)["decision"] == ref_pred["decision"]
    handed = [m for m in cluster_view()["moves"] if m.get("kind") == "handed_off"]
    back = [c for c in containers("learner") if c.get("State") == "running"]
    record(
        "the killed learner started again: joins, takes its share back by graceful hand-offs",
        f"{len(back)} learner container running; settled over 2 members {seconds:.1f} s after `start`; "
        f"{len(handed)} graceful hand-offs in the recent moves; model {name!r} on "
        f"{'the rejoined learner' if url != LEARNER else 'svmstream'}: {got['n_seen']:,} of {n:,}, "
        f"decisions equal: {again}",
        got["n_seen"] == n and again and len(back) == 1,
    )
