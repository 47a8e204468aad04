"""The FastAPI application: :func:`create_app` (wiring only) and its lifespan.

Start-up: start the solver warm-up in the background
(:class:`~svmstream.app.models.warmup.WarmUp`: ``/health`` answers at once; a request
needing a kernel still being compiled waits for it, logged), restore every model from its newest valid snapshot, create the default model if it is missing,
start the periodic snapshotter and, with ``REDIS_URL`` set, one stream consumer per
streamed model (:mod:`svmstream.app.stream`).  Shut-down (SIGTERM/SIGINT through uvicorn,
after in-flight requests finish): cancel the running batch jobs, stop the stream
consumers (their batches in flight are applied), stop the snapshotter, let every learner
apply its queued batches, write a final snapshot of each changed model, acknowledge
the stream entries those snapshots cover, then stop the snapshot publisher once it has
published those snapshots to Redis for the replicas (a restart then republishes any restored
model whose published version is older: :mod:`svmstream.app.stream.replication`).

State lives in this process's memory: run uvicorn with ONE worker.

Run with ``svmstream serve`` or ``python -m uvicorn --factory svmstream.app.main:create_app``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import socket
import time
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from svmstream.app.api.fast_predict import PredictFastPath
from svmstream.app.api.head import HeadAsGet
from svmstream.app.api.http import OrjsonResponse
from svmstream.app.api.openapi import install_openapi
from svmstream.app.api.replica import ReplicaReadOnly
from svmstream.app.api.routes import (
    challengers,
    cluster,
    dashboard,
    events,
    feedback,
    health,
    invocations,
    jobs,
    learn,
    metrics,
    models,
    predict,
    uploads,
    v2,
    versions,
)
from svmstream.app.cluster.service import clustered, open_clustered_registry, start_coordinator
from svmstream.app.errors import install_error_handlers
from svmstream.app.jobs.runner import JobRunner
from svmstream.app.models.feedback import open_feedback
from svmstream.app.models.kind import model_kind
from svmstream.app.models.memory import release_free_memory
from svmstream.app.models.registry import Registry
from svmstream.app.models.snapshots import SnapshotStore, run_snapshotter
from svmstream.app.models.versions import Versions
from svmstream.app.models.warmup import start_warm_up, warm_up
from svmstream.app.observability.feedback_metrics import FeedbackCollector
from svmstream.app.observability.live import LiveFeed
from svmstream.app.observability.prometheus import RequestCounter, build_registry
from svmstream.app.settings import Settings
from svmstream.app.stream.manager import StreamManager, run_stream_manager
from svmstream.app.stream.redis_ops import make_client
from svmstream.app.stream.replication import SnapshotFollower, SnapshotPublisher

__all__ = ["configure_logging", "create_app", "warm_up"]

log = logging.getLogger("svmstream")

#: Seconds between two looks for idle models to park (:meth:`Registry.park_idle`).
PARK_CHECK_S = 1.0
#: Seconds the shutdown waits for the final snapshots to be published to Redis.
REPLICATION_STOP_S = 30.0


def configure_logging(level: str = "info") -> None:
    """Give the ``svmstream`` loggers a stderr handler (uvicorn only configures its own)."""
    logger = logging.getLogger("svmstream")
    logger.setLevel(level.upper())
    if not any(getattr(h, "_svmstream", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler._svmstream = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.propagate = False


def _redacted(url: str) -> str:
    """The URL without its password (for logs)."""
    parts = urlsplit(url)
    if parts.password:
        netloc = f"{parts.username or ''}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


async def _open_registry(settings: Settings) -> Registry:
    """The registry with its snapshot store, restored models and the default model (a
    replica: an empty registry without snapshots; its models come from the learner), and the
    solver warm-up started in the background (``/health`` does not wait for it) once the
    models are restored: a restore decodes nothing (lazy, ``docs/service.md``) and needs no
    kernel, and the warm-up would only compete with it for the GIL (10,000 models: restart to
    ``/health`` 12.3 s with the warm-up running alongside, 9.0 s without, load 5)."""
    if clustered(settings):  # its models come from the coordinator (docs/cluster.md)
        registry = open_clustered_registry(settings)
        if settings.warm_up:
            start_warm_up([registry.resolve_config({})])
        return registry
    if settings.role == "replica":
        registry = Registry(settings, None)
        if settings.warm_up:
            start_warm_up([registry.resolve_config({})])
        return registry
    registry = Registry(
        settings,
        SnapshotStore(
            settings.snapshot_dir, keep=settings.keep_versions, max_bytes=settings.max_history_bytes
        ),
    )
    if settings.restore_on_start:
        await asyncio.to_thread(registry.restore)
    if settings.warm_up:  # the kernel groups the default and the restored models use (warmup.py)
        configs = {id(h.config): h.config for h in registry.handles()}  # shared objects (Registry.create)
        start_warm_up([registry.resolve_config({}), *configs.values()])
    if settings.create_default_model and settings.default_model not in registry:
        config = registry.resolve_config({})
        registry.create(settings.default_model, config, snapshot=False)
        kind = model_kind(config, {})
        log.info("model %r: %s, created with defaults %s", settings.default_model, kind, config.to_json())
    return registry


def _start_replication(app: FastAPI, settings: Settings, registry: Registry):
    """With Redis: the learner publishes each snapshot for replicas; a replica follows them
    (:mod:`svmstream.app.stream.replication`).  Returns the publisher/follower, or None."""
    app.state.replication = None
    if not settings.redis_url:
        return None
    client = make_client(settings.redis_url, timeout=30.0)
    if settings.role == "replica":
        follower = SnapshotFollower(client, registry, poll_s=settings.replica_poll_s).start()
        app.state.replication = follower
        log.info("replica: following the learner's snapshots at %s", _redacted(settings.redis_url))
        return follower
    url = settings.advertise_url or f"http://{settings.host}:{settings.port}"
    publisher = SnapshotPublisher(client, registry, advertise_url=url).start()
    registry.snapshot_state_listeners.append(publisher.on_snapshot)
    app.state.replication = publisher
    return publisher


async def _cancel(task: asyncio.Task) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


@asynccontextmanager
async def lifespan(app: FastAPI):
    """Start and stop the service's objects (see the module docstring for the order)."""
    settings: Settings = app.state.settings
    configure_logging(settings.log_level)
    if settings.role == "replica" and not settings.redis_url:
        raise RuntimeError(
            "SVMSTREAM_ROLE=replica needs SVMSTREAM_REDIS_URL: replicas follow the learner through Redis"
        )
    registry = await _open_registry(settings)
    app.state.registry = registry
    app.state.versions = Versions(registry, settings.max_pinned_versions)
    registry.feedback = open_feedback(settings, registry)  # remembered predictions (docs/feedback.md)
    replication = _start_replication(app, settings, registry)
    app.state.jobs = JobRunner(settings, registry)  # batch jobs (docs/jobs.md); workers start per job
    app.state.started_at = time.time()
    learner = settings.role == "learner"
    snapshotter = asyncio.create_task(
        run_snapshotter(
            # then the allocator's free pages back (app/models/memory.py: the feedback
            # store's bound is the process's memory only so)
            lambda: registry.snapshot_changed() + [registry.feedback.save(), release_free_memory()],
            settings.snapshot_interval_s if learner else 3600.0,
        )
    )
    # idle models beyond max_loaded_models go back to their snapshot (docs/deployment.md)
    parker = (
        asyncio.create_task(run_snapshotter(registry.park_idle, PARK_CHECK_S, "parking idle models"))
        if learner
        else None
    )
    streams = StreamManager(registry, settings) if settings.redis_url and learner else None
    app.state.cluster = coordinator = None
    if clustered(settings):  # several learners: this one owns some of the models
        host = socket.gethostname() if settings.host in ("0.0.0.0", "::", "") else settings.host
        url = settings.advertise_url or f"http://{host}:{settings.port}"
        coordinator = start_coordinator(app, settings, registry, streams, replication, url)
        app.state.cluster = coordinator
    stream_task = asyncio.create_task(run_stream_manager(streams)) if streams is not None else None
    app.state.streams = streams
    # Everything alive now (modules, the compiled solvers, restored models) lives as long as the
    # server: move it out of the collector's reach, so that a full collection scans only what
    # requests and batches allocate.  Measured: without it, one full collection in the middle of
    # a 50k-entry stream stalled the service for ~140 ms (GET /models took 143 ms); with the
    # collector disabled, or frozen here, there is no such gap (benchmarks/README.md).
    gc.freeze()
    log.info(
        "svmstream ready: models %s, snapshots in %s, streams %s",
        registry.names(),
        settings.snapshot_dir,
        "from " + _redacted(settings.redis_url) if streams else "off (SVMSTREAM_REDIS_URL unset)",
    )
    try:
        yield
    finally:
        await asyncio.to_thread(app.state.jobs.stop)  # cancel running jobs (kill after the grace period)
        if coordinator is not None:  # no more gains or hand-offs; its leases stay renewed
            await asyncio.to_thread(coordinator.stop_rebalancing)
        if stream_task is not None:
            await _cancel(stream_task)
            await asyncio.to_thread(streams.stop)
        await _cancel(snapshotter)
        if parker is not None:
            await _cancel(parker)
        await asyncio.to_thread(registry.close)
        written = await asyncio.to_thread(registry.snapshot_changed)
        await asyncio.to_thread(registry.feedback.save)
        registry.feedback.close()
        if streams is not None:
            acked = await asyncio.to_thread(streams.flush)
            log.info("stream entries acknowledged at shutdown: %d", acked)
        if replication is not None:  # after the final snapshots, so that they are published
            await asyncio.to_thread(replication.stop, REPLICATION_STOP_S)
        if coordinator is not None:  # the others gain its models at once
            await asyncio.to_thread(coordinator.leave)
            await app.state.forwarder.aclose()
        log.info("svmstream stopped; final snapshots: %s", written or "none needed")


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the service.

    Parameters
    ----------
    settings : Settings, optional
        Defaults to ``Settings()`` read from the ``SVMSTREAM_*`` environment.

    Returns
    -------
    fastapi.FastAPI
        With ``app.state.settings``; ``app.state.registry`` exists while the lifespan runs.
    """
    app = FastAPIOffline(  # /docs and /redoc with their JS/CSS served by the app (offline)
        title="svmstream",
        summary="Streaming online learning of budgeted kernel SVMs",
        version="0.1.0",
        lifespan=lifespan,
        default_response_class=OrjsonResponse,
    )
    app.state.settings = settings or Settings()
    app.state.started_at = time.time()
    app.state.streams = None
    app.state.prometheus, app.state.request_metrics = build_registry(
        lambda: getattr(app.state, "registry", None)
    )
    app.state.prometheus.register(
        FeedbackCollector(lambda: getattr(getattr(app.state, "registry", None), "feedback", None))
    )
    app.state.live = LiveFeed(  # the dashboard's /events (docs/dashboard.md)
        lambda: app.state.registry.handles() if hasattr(app.state, "registry") else [],
        lambda: (
            (app.state.jobs.to_json(job) for job in app.state.jobs.list())
            if hasattr(app.state, "jobs")
            else ()
        ),
        lambda: app.state.request_metrics.latency,
        served=lambda name: app.state.registry.feedback.dashboard_figures(name),
    )
    install_error_handlers(app)
    if app.state.settings.role == "replica":  # a replica only predicts (docs/deployment.md)
        follower = lambda: getattr(app.state, "replication", None)  # noqa: E731
        app.add_middleware(ReplicaReadOnly, learner_url=lambda: getattr(follower(), "learner_url", None))
    for module in (
        learn,
        feedback,
        predict,
        models,
        versions,
        challengers,
        health,
        metrics,
        jobs,
        uploads,
        events,
        dashboard,
        cluster,
    ):
        app.include_router(module.router)
    # the standard protocols: Open Inference Protocol v2 and MLflow scoring (docs/protocols.md)
    for module in (v2, invocations):
        app.include_router(module.router)
    install_openapi(app)  # the real error bodies and security requirements (app/api/openapi.py)
    # ordinary small POST /predict requests skip FastAPI (0.7 -> ~0.15 ms of CPU each;
    # app/api/fast_predict.py); inside the counter, so they are counted like the others
    app.add_middleware(PredictFastPath, state=app.state, route=predict.router.routes[0])
    app.add_middleware(HeadAsGet)  # HEAD on every GET route (app/api/head.py)
    # outermost: every request is counted by route template and status, refusals included
    app.add_middleware(RequestCounter, counter=app.state.request_metrics.requests)
    return app
