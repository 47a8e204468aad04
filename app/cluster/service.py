"""Wiring of a clustered learner into the service's lifespan (``docs/cluster.md``)."""

from __future__ import annotations

import logging

from svmstream.app.cluster.coordinator import ClusterMetrics, Coordinator
from svmstream.app.cluster.forward import Forwarder, RouteMetrics
from svmstream.app.cluster.membership import catalogue
from svmstream.app.cluster.store import FencedSnapshotStore
from svmstream.app.models.registry import Registry
from svmstream.app.stream.redis_ops import make_client
from svmstream.app.stream.replication import SnapshotFollower

log = logging.getLogger("svmstream.cluster")


def clustered(settings) -> bool:
    """Whether this process is one of several learners."""
    return bool(settings.cluster and settings.redis_url and settings.role == "learner")


def open_clustered_registry(settings) -> Registry:
    """The registry of a clustered learner: empty (its models come by the coordinator) with a
    fenced snapshot store on the shared snapshot directory."""
    store = FencedSnapshotStore(
        settings.snapshot_dir,
        keep=settings.keep_versions,
        max_bytes=settings.max_history_bytes,
        client=make_client(settings.redis_url, timeout=10.0),
    )
    store.clean_temp_files()
    return Registry(settings, store)


def start_coordinator(app, settings, registry, streams, publisher, url) -> Coordinator:
    """Start the coordinator, route the fencing of snapshots, reads, acks and publishing through
    it, set ``app.state.forwarder`` (``/learn`` of the others' models, :mod:`.forward`), and
    create the default model if the deployment has none."""
    metrics = ClusterMetrics(app.state.prometheus)
    coordinator = Coordinator(settings, registry, streams, publisher, metrics, url=url)
    registry.store.token_of = coordinator.token_of
    if streams is not None:
        streams.leases = coordinator.lease
    if publisher is not None:
        publisher.fence = coordinator.publish_token
        publisher.names = lambda: catalogue(coordinator.client)
    coordinator.start()
    app.state.forwarder = Forwarder(settings, coordinator, RouteMetrics(app.state.prometheus))
    follow_others(settings, registry, coordinator)
    name = settings.default_model
    if settings.create_default_model and not coordinator.catalogued(name):
        registry.create(name, registry.resolve_config({}))  # adopted by the next rebalance
        log.info("cluster: model %r created with defaults", name)
    return coordinator


def follow_others(settings, registry, coordinator) -> None:
    """``/predict`` on this learner for the models other learners own: a registry of their
    published serving states (``svmstream:replication:*``), followed as a replica follows
    (``coordinator.others``; a model gained here is dropped from it, one lost is followed)."""
    coordinator.others = Registry(settings, None)

    def wanted(name: str) -> bool:
        return coordinator.lease(name) is None and name not in registry

    client = make_client(settings.redis_url, timeout=10.0)
    coordinator.follower = SnapshotFollower(
        client, coordinator.others, poll_s=settings.replica_poll_s, wanted=wanted
    ).start()
