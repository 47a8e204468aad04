"""HTTP plumbing shared by the routes: the JSON content-type rule, size-limited body
reading and orjson responses."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.requests import ClientDisconnect

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
    refusal names (the one that sets ``limit``).

    Raises
    ------
    PayloadTooLarge
        (413) when the body is larger than ``limit``.
    InvalidInput
        (400) on a bad Content-Length.
    """
    check_declared_length(request, limit, setting)
    chunks: list[bytes] = []
    total = 0
    try:
        async for chunk in request.stream():
            total += len(chunk)
            if total > limit:
                raise _too_large(limit, f"more than {limit} bytes received", setting)
            chunks.append(chunk)
    except ClientDisconnect:
        # one line, not the framework's traceback at ERROR: a client that leaves is not a fault
        log.info(
            "client left during the body of %s %s (%d bytes received)",
            request.method,
            request.url.path,
            total,
        )
        raise ClientLeft(
            "body: the client disconnected before the body ended", field="body", status=400
        ) from None
    return b"".join(chunks)


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
    (nothing of the body is read)."""
    size = declared_length(request)
    if size is not None and size > limit:
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
    return PayloadTooLarge(f"body: request body exceeds {setting}={limit} ({why})", field="body")


SMALL_BODY_BYTES = 64 * 1024
"""A body declared at most this long takes no slot of :func:`body_slot` (parsing it costs at
most a few MB; ordinary predictions, ``/models`` and job requests are this small)."""


def read_limit(settings: Any) -> tuple[int, str]:
    """``(limit, setting)`` of the read routes' bodies (``/predict``, ``/v2/models/*/infer``,
    ``/invocations``): ``MAX_PREDICT_BODY_BYTES``, or ``MAX_BODY_BYTES`` when that is smaller."""
    if settings.max_predict_body_bytes <= settings.max_body_bytes:
        return settings.max_predict_body_bytes, "SVMSTREAM_MAX_PREDICT_BODY_BYTES"
    return settings.max_body_bytes, "SVMSTREAM_MAX_BODY_BYTES"


class _BodySlots:
    """Bodies over :data:`SMALL_BODY_BYTES` being read or parsed (one counter per app; the
    event loop is the only thread that changes it)."""

    busy = 0


@asynccontextmanager
async def body_slot(request: Request, limit: int, setting: str, max_bodies: int) -> AsyncIterator[None]:
    """Hold one of ``max_bodies`` slots while a large body is read and parsed.

    First the declared ``Content-Length`` is checked against ``limit`` (413 naming
    ``setting``, before any byte is read); a small declared body takes no slot.  A body
    without a length (chunked) or over :data:`SMALL_BODY_BYTES` takes one for the whole
    ``async with`` block (the read and the parse), or is refused with 503 and
    ``Retry-After`` when all are taken: parsing a JSON body costs ~13 times its size, so
    the slots bound that memory at ``max_bodies`` x ``limit`` x ~13.

    Raises
    ------
    PayloadTooLarge
        (413) ``Content-Length`` over ``limit``.
    ServerBusy
        (503) ``max_bodies`` large bodies are being read or parsed already.
    """
    check_declared_length(request, limit, setting)
    size = declared_length(request)
    if size is not None and size <= SMALL_BODY_BYTES:
        yield
        return
    state = request.app.state
    slots = getattr(state, "body_slots", None)
    if slots is None:
        slots = state.body_slots = _BodySlots()
    if slots.busy >= max_bodies:
        raise ServerBusy(
            f"body: {max_bodies} large request bodies are being read already "
            "(SVMSTREAM_MAX_CONCURRENT_BODIES); retry later",
            field="body",
        )
    slots.busy += 1
    try:
        yield
    finally:
        slots.busy -= 1


class _LearnBytes:
    """Declared bytes of the ``/learn`` bodies being read or parsed (one counter per app)."""

    busy = 0


@asynccontextmanager
async def learn_body_budget(
    request: Request, limit: int, setting: str, max_bytes: int
) -> AsyncIterator[None]:
    """Hold ``Content-Length`` bytes (``limit`` for a chunked body) of a ``max_bytes`` budget
    while a ``/learn`` body over :data:`SMALL_BODY_BYTES` is read and parsed.

    A body alone is never refused by the budget (only by ``limit``); one that would take the
    bodies in progress over ``max_bytes`` is refused with 503 and ``Retry-After`` before a
    byte of it is read.

    Raises
    ------
    PayloadTooLarge
        (413) ``Content-Length`` over ``limit``.
    ServerBusy
        (503) other large ``/learn`` bodies hold the budget.
    """
    check_declared_length(request, limit, setting)
    size = declared_length(request)
    if size is not None and size <= SMALL_BODY_BYTES:
        yield
        return
    cost = limit if size is None else size
    state = request.app.state
    held = getattr(state, "learn_bytes", None)
    if held is None:
        held = state.learn_bytes = _LearnBytes()
    if held.busy and held.busy + cost > max_bytes:
        raise ServerBusy(
            f"body: {held.busy} bytes of /learn bodies are being read already; with this one's {cost} that "
            f"exceeds SVMSTREAM_MAX_CONCURRENT_LEARN_BYTES={max_bytes}; retry later",
            field="body",
        )
    held.busy += cost
    try:
        yield
    finally:
        held.busy -= cost
