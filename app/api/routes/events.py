"""``GET /events``: the dashboard's server-sent events (``text/event-stream``, sse-starlette).

One ``data:`` event per second with the figures of the models and jobs (the JSON document
of :func:`svmstream.app.observability.live.build_event`), built once per tick for all
subscribers by the app's :class:`~svmstream.app.observability.live.LiveFeed`
(``app.state.live``, created by :func:`svmstream.app.main.create_app`).

With ``SVMSTREAM_API_TOKEN`` set the stream needs ``Authorization: Bearer <token>`` (the
same check as the mutating routes: it shows every model and job); the dashboard reads the
stream with ``fetch`` so that it can send the header and the token never appears in a URL
or an access log (docs/dashboard.md).  The route is left out of the OpenAPI schema: an
endless stream is no request/response operation, and a schema-driven fuzzer would hang on it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import APIRouter, Depends, Request
from sse_starlette import EventSourceResponse

from svmstream.app.api.auth import require_write

router = APIRouter(tags=["dashboard"])

PING_S = 15
"""Seconds between keep-alive comments when no event is due (sse-starlette's ping)."""


async def _events(request: Request) -> AsyncIterator[dict[str, str]]:
    async for payload in request.app.state.live.subscribe():
        yield {"event": "tick", "data": payload.decode()}


@router.get("/events", include_in_schema=False, dependencies=[Depends(require_write)])
async def events(request: Request) -> EventSourceResponse:
    """``text/event-stream`` of ``tick`` events (401 without the token when one is set)."""
    return EventSourceResponse(_events(request), ping=PING_S, headers={"Cache-Control": "no-store"})
