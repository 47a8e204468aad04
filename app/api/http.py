"""HTTP plumbing shared by the routes: size-limited body reading and orjson responses."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Request
from fastapi.responses import Response

from svmstream.app.errors import InvalidInput, PayloadTooLarge


class OrjsonResponse(Response):
    """JSON response serialised with orjson (numpy arrays and scalars allowed)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)


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


def _too_large(limit: int, why: str) -> PayloadTooLarge:
    return PayloadTooLarge(f"body: request body exceeds MAX_BODY_BYTES={limit} ({why})", field="body")
