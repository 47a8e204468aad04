"""Bearer-token authentication of the HTTP routes.

With ``SVMSTREAM_API_TOKEN`` set, every mutating route depends on :func:`require_write`
(``Authorization: Bearer <token>`` or 401); read routes (``/predict``, ``/health``,
``/metrics``, ``GET /models``) depend on :func:`require_read`, which asks for the token
only when ``SVMSTREAM_PROTECT_READS`` is also set.  Tokens are compared with
:func:`hmac.compare_digest` (constant time).  The dependencies run before the body is
read, so a refused request changes nothing.

Reuse in a new router::

    router = APIRouter(dependencies=[Depends(require_write)])
"""

from __future__ import annotations

import hmac

from fastapi import Request

from svmstream.app.ingest.batches import BatchError


class Unauthorized(BatchError):
    """401 with ``WWW-Authenticate: Bearer``."""

    def __init__(self, message: str):
        super().__init__(message, field="authorization", status=401)


def bearer_token(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    header = request.headers.get("authorization")
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def check_token(expected: str, given: str | None) -> bool:
    """Constant-time comparison (:func:`hmac.compare_digest` on UTF-8 bytes)."""
    if given is None:
        return False
    return hmac.compare_digest(expected.encode("utf-8"), given.encode("utf-8"))


def _require(request: Request) -> None:
    expected = request.app.state.settings.token()
    if expected is None:
        return
    given = bearer_token(request)
    if given is None:
        raise Unauthorized("authorization: this route needs an 'Authorization: Bearer <token>' header")
    if not check_token(expected, given):
        raise Unauthorized("authorization: invalid token")


async def require_write(request: Request) -> None:
    """Dependency of mutating routes: the token is required whenever one is configured.

    Raises
    ------
    Unauthorized
        (HTTP 401) when the header is missing, malformed or carries another token.
    """
    _require(request)


async def require_read(request: Request) -> None:
    """Dependency of read routes: the token is required only with ``PROTECT_READS``."""
    if request.app.state.settings.protect_reads:
        _require(request)
