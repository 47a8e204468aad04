"""Bearer-token authentication of the HTTP routes.

With ``SVMSTREAM_API_TOKEN`` set, every mutating route depends on :func:`require_write`
(``Authorization: Bearer <token>`` or 401 with ``WWW-Authenticate: Bearer``); read routes
(``/predict``, ``/health``, ``/metrics``, ``GET /models``) depend on :func:`require_read`,
which asks for the token only when ``SVMSTREAM_PROTECT_READS`` is also set.  Tokens are
compared with :func:`hmac.compare_digest` (constant time).  The dependencies run before
the body is read, so a refused request changes nothing.

The header is read by FastAPI's :class:`~fastapi.security.HTTPBearer` (with
``auto_error=False``: the 401 and its message are ours), so the OpenAPI schema declares the
``HTTPBearer`` security scheme on every route that depends on these.

Reuse in a new router::

    router = APIRouter(dependencies=[Depends(require_write)])
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from svmstream.app.errors import Unauthorized

bearer_scheme = HTTPBearer(auto_error=False, description="the server's SVMSTREAM_API_TOKEN")

Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)]


def check_token(expected: str, given: str | None) -> bool:
    """Constant-time comparison (:func:`hmac.compare_digest` on UTF-8 bytes)."""
    if given is None:
        return False
    return hmac.compare_digest(expected.encode("utf-8"), given.encode("utf-8"))


def _require(request: Request, credentials: HTTPAuthorizationCredentials | None) -> None:
    expected = request.app.state.settings.token()
    if expected is None:
        return
    given = credentials.credentials.strip() if credentials is not None else ""
    if not given:
        raise Unauthorized("authorization: this route needs an 'Authorization: Bearer <token>' header")
    if not check_token(expected, given):
        raise Unauthorized("authorization: invalid token")


async def require_write(request: Request, credentials: Credentials) -> None:
    """Dependency of mutating routes: the token is required whenever one is configured.

    Raises
    ------
    Unauthorized
        (HTTP 401) when the header is missing, malformed or carries another token.
    """
    _require(request, credentials)


async def require_read(request: Request, credentials: Credentials) -> None:
    """Dependency of read routes: the token is required only with ``PROTECT_READS``.  Records
    the request's token class in ``request.state.authenticated`` (:func:`authenticated`)."""
    if request.app.state.settings.protect_reads:
        _require(request, credentials)
    expected = request.app.state.settings.token()
    given = credentials.credentials.strip() if credentials is not None else None
    request.state.authenticated = expected is None or check_token(expected, given)


def authenticated(request: Request) -> bool:
    """The request's token class: True when the server has no token or the request carries
    it (what a tokenless request may store is bounded apart: ``docs/feedback.md``)."""
    return bool(getattr(request.state, "authenticated", True))
