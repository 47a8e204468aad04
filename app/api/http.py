"""HTTP plumbing shared by the routes: the JSON content-type rule, size-limited body
reading and orjson responses."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from svmstream.app.api.auth import check_token
from svmstream.app.errors import ClientLeft, InvalidInput, PayloadTooLarge, ServerBusy, UnsupportedMediaType

log = logging.getLogger("svmstream.http")

JSON_MEDIA_TYPES = ("application/json",)
"""What JSON routes accept (also any ``application/<x>+json``); parameters such as
``charset=utf-8`` are ignored (JSON is UTF-8, RFC 8259)."""


#: orjson options of every JSON answer (numpy arrays and scalars, non-string keys): the routes'
#: :class:`OrjsonResponse` and the ``/predict`` fast path (``app/api/fast_predict.py``).
ORJSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


class OrjsonResponse(JSONResponse):
    """JSON response serialised with orjson (numpy arrays and scalars allowed).

    A :class:`~fastapi.responses.JSONResponse` so that FastAPI documents the routes'
    ``response_model`` under it (for any other response class it writes ``"type": "string"``).
    """

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=ORJSON_OPTIONS)


async def read_body(request: Request, limit: int, setting: str = "SVMSTREAM_MAX_BODY_BYTES") -> bytes:
    """Read the request body, refusing more than ``limit`` bytes.

    The ``Content-Length`` header is checked first; the byte count is enforced while
    reading as well, so chunked bodies (no length) are cut off as soon as they pass
    the limit, before anything is parsed.  ``setting`` is the environment variable a
    refusal names (the one that sets ``limit``), or a phrase naming the route's own limit.
    A refused body is read to its end and discarded first (:func:`drain`), so that the
    client, still sending, can read the 413.

    Raises
    ------
    PayloadTooLarge
        (413) when the body is larger than ``limit``.
    InvalidInput
        (400) on a bad Content-Length.
    """
    await refuse_declared_length(request, limit, setting)
    chunks: list[bytes] = []
    total = 0
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            raise _client_left(request, total)
        chunk = message.get("body", b"")
        more = message.get("more_body", False)
        total += len(chunk)
        if total > limit:
            if more:
                await drain(request, total)
            raise _too_large(limit, f"more than {limit} bytes received", setting)
        if chunk:
            chunks.append(chunk)
        if not more:
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _client_left(request: Request, total: int) -> ClientLeft:
    # one line, not the framework's traceback at ERROR: a client that leaves is not a fault
    log.info(
        "client left during the body of %s %s (%d bytes received)", request.method, request.url.path, total
    )
    return ClientLeft("body: the client disconnected before the body ended", field="body", status=400)


DRAIN_SECONDS = 10.0
"""Longest time a refused body is read and discarded before the 413 is sent (:func:`drain`)."""
DRAIN_BYTES = 16 * 2**20
"""Largest refused body read and discarded (:func:`drain`; at most ``MAX_BODY_BYTES`` too): a
5,000-row, 784-feature prediction is ~10-14 MB of JSON.  Draining costs the event loop time per
MB; four 58 MB bodies drained at once held ``/health``'s p99 at 150-290 ms on a loaded 2-core
machine, so larger bodies are answered at once (their clients may see a reset instead)."""


async def drain(request: Request, received: int = 0) -> None:
    """Read and discard the rest of a refused body (at most :data:`DRAIN_BYTES` and
    ``SVMSTREAM_MAX_BODY_BYTES`` in all, for at most :data:`DRAIN_SECONDS`), as servers with a
    lingering close do.

    Why: an HTTP/1.1 client writes its whole body before it reads the answer.  A server that
    answers 413 and closes while body bytes are still arriving makes the kernel reset the
    connection, and the reset discards the answer the client had not read yet: ``urllib``,
    ``requests`` and ``httpx`` then report a broken pipe or a reset instead of the 413.  Read and
    dropped chunk by chunk, a drained body costs no memory; a body declared larger than the
    bound is not drained (its client gets the close)."""
    bound = min(request.app.state.settings.max_body_bytes, DRAIN_BYTES)
    declared = declared_length(request)
    if declared is not None and declared > bound:
        return
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            while received <= bound:
                message = await request.receive()
                if message["type"] != "http.request":
                    return
                received += len(message.get("body", b""))
                if not message.get("more_body", False):
                    return
    except TimeoutError:
        return


def declared_length(request: Request) -> int | None:
    """The request's ``Content-Length`` (None without one).  Raises InvalidInput (400)."""
    declared = request.headers.get("content-length")
    if declared is None:
        return None
    try:
        return int(declared)
    except ValueError:
        raise InvalidInput("body: invalid Content-Length header", field="body", status=400) from None


def check_declared_length(request: Request, limit: int, setting: str = "SVMSTREAM_MAX_BODY_BYTES") -> None:
    """413 naming ``setting`` when the declared ``Content-Length`` exceeds ``limit``
    (nothing of the body is read; :func:`refuse_declared_length` drains it first)."""
    size = declared_length(request)
    if size is not None and size > limit:
        raise _too_large(limit, f"Content-Length is {size}", setting)


async def refuse_declared_length(
    request: Request, limit: int, setting: str = "SVMSTREAM_MAX_BODY_BYTES"
) -> None:
    """:func:`check_declared_length`, the refused body drained first (:func:`drain`)."""
    size = declared_length(request)
    if size is not None and size > limit:
        await drain(request)
        raise _too_large(limit, f"Content-Length is {size}", setting)


def is_json_media_type(content_type: str) -> bool:
    """True for ``application/json`` and ``application/<x>+json`` (parameters ignored)."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media in JSON_MEDIA_TYPES or (media.startswith("application/") and media.endswith("+json"))


def check_json_content_type(request: Request) -> None:
    """Refuse a body declared as anything but JSON before reading it.

    Raises
    ------
    UnsupportedMediaType
        (415) when a ``Content-Type`` is given and is not JSON (``text/plain``, forms, ...).
    """
    ctype = request.headers.get("content-type")
    if ctype is not None and not is_json_media_type(ctype):
        raise UnsupportedMediaType(
            f"content-type: expected application/json, got {ctype.split(';', 1)[0].strip()!r}",
            field="content-type",
        )


async def read_json_body(request: Request, limit: int, setting: str = "SVMSTREAM_MAX_BODY_BYTES") -> bytes:
    """The raw body of a JSON route: :func:`check_json_content_type`, then :func:`read_body`.

    A body without ``Content-Type`` is refused unless it is empty (some routes take an empty
    body; a cross-site page can send a typeless body without a CORS preflight).

    Raises
    ------
    UnsupportedMediaType
        (415) a non-JSON content type, or a non-empty body without one.
    PayloadTooLarge, InvalidInput
        From :func:`read_body`.
    """
    check_json_content_type(request)
    body = await read_body(request, limit, setting)
    if body and "content-type" not in request.headers:
        raise UnsupportedMediaType(
            "content-type: missing; send the body as application/json", field="content-type"
        )
    return body


def _too_large(limit: int, why: str, setting: str) -> PayloadTooLarge:
    if setting.startswith("SVMSTREAM_"):
        return PayloadTooLarge(f"body: request body exceeds {setting}={limit} ({why})", field="body")
    return PayloadTooLarge(f"body: request body exceeds {setting} of {limit} bytes ({why})", field="body")


SMALL_BODY_BYTES = 64 * 1024
"""A body declared at most this long takes no part of :func:`body_budget` (parsing it costs at
most a few MB; ordinary predictions, ``/models`` and job requests are this small), and is
parsed on the event loop (:func:`decode_off_loop`)."""


def has_write_token(request: Request) -> bool:
    """Whether the request may do what a token holder may: no ``SVMSTREAM_API_TOKEN`` is set
    (every caller may write), or ``Authorization: Bearer`` carries it."""
    expected = request.app.state.settings.token()
    if expected is None:
        return True
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and check_token(expected, given.strip() or None)


def read_limit(settings: Any, request: Request | None = None) -> tuple[int, str]:
    """``(limit, setting)`` of the read routes' bodies (``/predict``, ``/v2/models/*/infer``,
    ``/invocations``): ``MAX_BODY_BYTES`` for a caller who may write (:func:`has_write_token`:
    the same bytes ``/learn`` would take from it), else ``MAX_PREDICT_BODY_BYTES``, or
    ``MAX_BODY_BYTES`` when that is smaller."""
    if request is not None and has_write_token(request):
        return settings.max_body_bytes, "SVMSTREAM_MAX_BODY_BYTES"
    if settings.max_predict_body_bytes <= settings.max_body_bytes:
        return settings.max_predict_body_bytes, "SVMSTREAM_MAX_PREDICT_BODY_BYTES"
    return settings.max_body_bytes, "SVMSTREAM_MAX_BODY_BYTES"


def route_limit(settings: Any, own: int, route: str) -> tuple[int, str]:
    """``(limit, setting)`` of a route with a byte limit of its own (``own``, what its body can
    need): the smaller of it and ``MAX_BODY_BYTES``; ``route`` names it in a 413."""
    if own < settings.max_body_bytes:
        return own, f"the limit of {route}"
    return settings.max_body_bytes, "SVMSTREAM_MAX_BODY_BYTES"


async def decode_off_loop(body: bytes, decode: Callable[[bytes], Any]) -> Any:
    """``decode(body)``: on the event loop up to :data:`SMALL_BODY_BYTES`, in a worker thread
    beyond (a few ms at most on the loop; a large body would stall every other request)."""
    if len(body) <= SMALL_BODY_BYTES:
        return decode(body)
    return await run_in_threadpool(decode, body)


class _BodyBudget:
    """What large bodies hold (one per app; the event loop is the only thread that changes it):
    the bodies of the read routes being read or parsed (``slots``) and the declared bytes of
    every large body (``bytes``)."""

    def __init__(self) -> None:
        self.slots = 0
        self.bytes = 0


@asynccontextmanager
async def body_budget(
    request: Request, limit: int, setting: str, *, slot: bool = False
) -> AsyncIterator[None]:
    """Hold a large body's share of the server-wide bounds while it is read and parsed.

    First the declared ``Content-Length`` is checked against ``limit`` (413 naming ``setting``,
    the body drained: :func:`drain`); a small declared body (:data:`SMALL_BODY_BYTES`) holds
    nothing.  A larger one (or a chunked one, counted at ``limit``) holds its bytes of
    ``SVMSTREAM_MAX_CONCURRENT_BODY_BYTES``, all routes together, and with ``slot`` (the read
    routes) one of ``SVMSTREAM_MAX_CONCURRENT_BODIES``; beyond either, 503 with ``Retry-After``
    before a byte of it is read.  A body alone is never refused by the byte budget (only by
    ``limit``): parsing a JSON body costs ~13 times its size, so together the bounds keep that
    memory near 13 x the budget.

    Raises
    ------
    PayloadTooLarge
        (413) ``Content-Length`` over ``limit``.
    ServerBusy
        (503) the slots or the byte budget are taken.
    """
    await refuse_declared_length(request, limit, setting)
    size = declared_length(request)
    if size is not None and size <= SMALL_BODY_BYTES:
        yield
        return
    settings = request.app.state.settings
    state = request.app.state
    held = getattr(state, "body_budget", None)
    if held is None:
        held = state.body_budget = _BodyBudget()
    cost = limit if size is None else size
    if slot and held.slots >= settings.max_concurrent_bodies:
        await drain(request)
        raise ServerBusy(
            f"body: {settings.max_concurrent_bodies} large request bodies are being read already "
            "(SVMSTREAM_MAX_CONCURRENT_BODIES); retry later",
            field="body",
        )
    if held.bytes and held.bytes + cost > settings.max_concurrent_body_bytes:
        await drain(request)
        raise ServerBusy(
            f"body: {held.bytes} bytes of request bodies are being read already; with this one's {cost} "
            f"that exceeds SVMSTREAM_MAX_CONCURRENT_BODY_BYTES={settings.max_concurrent_body_bytes}; "
            "retry later",
            field="body",
        )
    held.bytes += cost
    held.slots += slot
    try:
        yield
    finally:
        held.bytes -= cost
        held.slots -= slot
