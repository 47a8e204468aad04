"""``GET /metrics``: Prometheus text exposition (prometheus-client).

Per model (label ``model``): examples applied and applied/s, prequential accuracy over
the sliding window, support vectors, merges, merging frequency, average weight
degradation, version, queued batches, snapshot age; for streamed models stream length,
lag (entries and seconds), pending entries, dead letters, connection state; and the
learn/predict latency histograms ``svmstream_request_latency_seconds``.  The collector
and the histograms are :mod:`svmstream.app.observability.prometheus`.

Rendering costs time on the event loop's process (5,000 models: tens to hundreds of ms of
CPU): concurrent scrapes share one rendering, and with more than
``SVMSTREAM_METRICS_CACHE_MODELS`` models a rendering is reused for
``SVMSTREAM_METRICS_CACHE_S`` seconds (``docs/service.md``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from svmstream.app.api.auth import require_read
from svmstream.app.api.deps import PrometheusDep, SettingsDep
from svmstream.app.api.schemas import errors
from svmstream.app.models.memory import release_free_memory

router = APIRouter(tags=["metrics"], dependencies=[Depends(require_read)])


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text exposition",
            "content": {CONTENT_TYPE_LATEST.split(";")[0]: {"schema": {"type": "string"}}},
        },
        **errors(401),
    },
)
async def metrics(request: Request, prometheus: PrometheusDep, settings: SettingsDep) -> Response:
    """Prometheus text format 0.0.4."""
    cache = _cache_of(request)
    reuse = settings.metrics_cache_s > 0 and _model_count(request) > settings.metrics_cache_models
    now = time.monotonic()
    if reuse and cache.body is not None and now - cache.at < settings.metrics_cache_s:
        return Response(cache.body, media_type=CONTENT_TYPE_LATEST)
    body = await cache.render(prometheus)
    cache.body, cache.at = (body, now) if reuse else (None, 0.0)
    response = Response(body, media_type=CONTENT_TYPE_LATEST)

    def release() -> None:
        # once sent, give back what rendering it took (10,000 models: ~28 MB of text, built
        # from ~500,000 strings; five scrapes left the RSS ~75 MB higher without this), the
        # body's own bytes included: the response would hold them until the request ends
        response.body = b""
        release_free_memory()

    response.background = BackgroundTask(release)
    return response


class _Exposition:
    """The app's last rendering (kept while reused) and the rendering in progress, which
    concurrent scrapes share (one rendering at a time, whatever the number of scrapers)."""

    def __init__(self) -> None:
        self.body: bytes | None = None
        self.at = 0.0
        self._pending: asyncio.Future | None = None

    async def render(self, prometheus: Any) -> bytes:
        if self._pending is None:
            # the app's ServiceRegistry renders the per-model families directly (fast with 1,000 models)
            render = getattr(prometheus, "exposition", None) or (lambda: generate_latest(prometheus))
            self._pending = asyncio.ensure_future(run_in_threadpool(render))
            self._pending.add_done_callback(self._done)
        return await asyncio.shield(self._pending)

    def _done(self, _: asyncio.Future) -> None:
        self._pending = None


def _cache_of(request: Request) -> _Exposition:
    state = request.app.state
    cache = getattr(state, "metrics_exposition", None)
    if cache is None:
        cache = state.metrics_exposition = _Exposition()
    return cache


def _model_count(request: Request) -> int:
    registry = getattr(request.app.state, "registry", None)
    return 0 if registry is None else len(registry.handles())
