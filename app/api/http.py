"""HTTP plumbing shared by the routes: the JSON content-type rule, size-limited body
reading and orjson responses."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Request
from fastapi.responses import JSONResponse

from svmstream.app.errors import InvalidInput, PayloadTooLarge, UnsupportedMediaType

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


async def read_body(request: Request, limit: int) -> bytes:
    """Read the request body, refusing more than ``limit`` bytes.

    The ``Content-Length`` header is checked first; the byte count is enforced while
    reading as well, so chunked bodies (no length) are cut off as soon as they pass
    the limit, before anything is parsed.

    Raises
    ------
    PayloadTooLarge
        (413) when the body is larger than ``limit``.
    InvalidInput
        (400) on a bad Content-Length.
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise InvalidInput("body: invalid Content-Length header", field="body", status=400) from None
        if size > limit:
            raise _too_large(limit, f"Content-Length is {size}")
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise _too_large(limit, f"more than {limit} bytes received")
        chunks.append(chunk)
    return b"".join(chunks)


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


async def read_json_body(request: Request, limit: int) -> bytes:
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
    body = await read_body(request, limit)
    if body and "content-type" not in request.headers:
        raise UnsupportedMediaType(
            "content-type: missing; send the body as application/json", field="content-type"
        )
    return body


def _too_large(limit: int, why: str) -> PayloadTooLarge:
    return PayloadTooLarge(f"body: request body exceeds MAX_BODY_BYTES={limit} ({why})", field="body")
