"""The FastAPI application: :func:`create_app` and its lifespan.

Start-up: restore every model from its newest valid snapshot, create the default model
if it is missing, start the periodic snapshotter and, with ``REDIS_URL`` set, one stream
consumer per streamed model (:mod:`app.stream`).  Shut-down (SIGTERM/SIGINT through
uvicorn, after in-flight requests finish): stop the stream consumers (their batches in
flight are applied), stop the snapshotter, let every learner apply its queued batches,
write a final snapshot of each changed model, then acknowledge the stream entries those
snapshots cover.

State lives in this process's memory: run uvicorn with ONE worker.

Run with ``svmstream serve`` or ``python -m uvicorn --factory app.main:create_app``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request

from svmstream.app.api.auth import Unauthorized
from svmstream.app.ingest.batches import BatchError
from svmstream.app.api.http import OrjsonResponse, error_response
from svmstream.app.models.meters import build_registry
from svmstream.app.models.registry import LearnerBusy, ModelClosed, ModelNotFitted, ModelNotFound, Registry
from svmstream.app.jobs.runner import JobRunner
from svmstream.app.api.routes import health, jobs, learn, metrics, models, predict, uploads
from svmstream.app.settings import Settings
from svmstream.app.models.snapshots import SnapshotStore, run_snapshotter

log = logging.getLogger("svmstream")


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


def warm_up() -> None:
    """Run every solver code path once on a tiny problem so that the numba kernels are
    compiled (or loaded from the on-disk cache) before the first request."""
    import numpy as np
    import scipy.sparse as sp

    from svmstream.app.models.registry import copy_estimator, make_estimator
    from svmstream.app.models.config import ModelConfig

    rng = np.random.default_rng(0)
    X = rng.normal(size=(8, 3))
    y = np.tile([0, 1], 4)
    for rows in (X, sp.csr_matrix(X)):
        est = make_estimator(ModelConfig(budget=2, gamma=1.0, C=1.0, random_state=0))
        est.partial_fit(rows, y, classes=np.arange(2))
        copy_estimator(est).decision_function(rows)
    # the lookup-table merge solvers build their (H, WD) tables once per process (~0.5 s):
    # do it now rather than in the first batch of a lookup-wd model; and BSCA's step
    for config in (ModelConfig(budget=2, merge_solver="lookup-wd"), ModelConfig(algorithm="bsca", budget=2)):
        make_estimator(config).partial_fit(X, y, classes=np.arange(2))


def _redacted(url: str) -> str:
    """The URL without its password (for logs)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password:
        netloc = f"{parts.username or ''}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


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
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        configure_logging(settings.log_level)
        if settings.warm_up:
            started = time.perf_counter()
            await asyncio.to_thread(warm_up)
            log.info("solver warm-up done in %.2f s", time.perf_counter() - started)
        store = SnapshotStore(settings.snapshot_dir, keep=settings.snapshot_keep)
        registry = Registry(settings, store)
        if settings.restore_on_start:
            await asyncio.to_thread(registry.restore)
        if settings.create_default_model and settings.default_model not in registry:
            config = registry.resolve_config({})
            registry.create(settings.default_model, config, snapshot=False)
            log.info("model %r: created with defaults %s", settings.default_model, config.to_json())
        app.state.registry = registry
        app.state.jobs = JobRunner(settings, registry)  # batch jobs (docs/jobs.md); workers start per job
        app.state.started_at = time.time()
        task = asyncio.create_task(run_snapshotter(registry, settings.snapshot_interval_s))
        streams = None
        stream_task = None
        if settings.redis_url:
            from svmstream.app.stream.consumer import StreamManager, run_stream_manager

            streams = StreamManager(registry, settings)
            app.state.streams = streams
            stream_task = asyncio.create_task(run_stream_manager(streams))
        log.info("svmstream ready: models %s, snapshots in %s, streams %s", registry.names(), settings.snapshot_dir,
                 "from " + _redacted(settings.redis_url) if streams else "off (SVMSTREAM_REDIS_URL unset)")
        try:
            yield
        finally:
            await asyncio.to_thread(app.state.jobs.stop)  # cancel running jobs (kill after the grace period)
            if stream_task is not None:
                stream_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await stream_task
                await asyncio.to_thread(streams.stop)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await asyncio.to_thread(registry.close)
            written = await asyncio.to_thread(registry.snapshot_changed)
            if streams is not None:
                acked = await asyncio.to_thread(streams.flush)
                log.info("stream entries acknowledged at shutdown: %d", acked)
            log.info("svmstream stopped; final snapshots: %s", written or "none needed")

    app = FastAPI(
        title="svmstream",
        summary="Streaming online learning of budgeted kernel SVMs",
        version="0.1.0",
        lifespan=lifespan,
        default_response_class=OrjsonResponse,
    )
    app.state.settings = settings
    app.state.started_at = time.time()
    app.state.streams = None
    app.state.prometheus, app.state.request_metrics = build_registry(lambda: getattr(app.state, "registry", None))

    @app.exception_handler(Unauthorized)
    async def _unauthorized(request: Request, exc: Unauthorized):
        response = error_response(exc)
        response.headers["WWW-Authenticate"] = "Bearer"
        return response

    @app.exception_handler(BatchError)
    async def _batch_error(request: Request, exc: BatchError):
        return error_response(exc)

    def _simple(status: int):
        async def handler(request: Request, exc: Exception):
            return OrjsonResponse({"detail": str(exc.args[0] if exc.args else exc), "field": None, "index": None},
                                  status_code=status)
        return handler

    app.add_exception_handler(ModelNotFound, _simple(404))
    app.add_exception_handler(ModelNotFitted, _simple(409))
    app.add_exception_handler(ModelClosed, _simple(409))
    app.add_exception_handler(LearnerBusy, _simple(429))

    for module in (learn, predict, models, health, metrics, jobs, uploads):
        app.include_router(module.router)
    return app
