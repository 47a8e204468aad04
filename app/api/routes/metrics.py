"""``GET /metrics``: Prometheus text exposition (prometheus-client).

Per model (label ``model``): examples applied and applied/s, prequential accuracy over
the sliding window, support vectors, merges, merging frequency, average weight
degradation, version, queued batches, snapshot age; for streamed models stream length,
lag (entries and seconds), pending entries, dead letters, connection state; and the
learn/predict latency histograms ``svmstream_request_latency_seconds``.  The collector
and the histograms are :mod:`svmstream.app.observability.prometheus`.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from svmstream.app.api.auth import require_read
from svmstream.app.api.deps import PrometheusDep
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
async def metrics(prometheus: PrometheusDep) -> Response:
    """Prometheus text format 0.0.4."""
    # the app's ServiceRegistry renders the per-model families directly (fast with 1,000 models)
    render = getattr(prometheus, "exposition", None) or (lambda: generate_latest(prometheus))
    response = Response(await run_in_threadpool(render), media_type=CONTENT_TYPE_LATEST)

    def release() -> None:
        # once sent, give back what rendering it took (10,000 models: ~28 MB of text, built
        # from ~500,000 strings; five scrapes left the RSS ~75 MB higher without this), the
        # body's own bytes included: the response would hold them until the request ends
        response.body = b""
        release_free_memory()

    response.background = BackgroundTask(release)
    return response
