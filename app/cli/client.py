"""What the CLI commands share to talk to a running service: its default URL, the API
token and its header, the HTTP client, and the check of a response."""

from __future__ import annotations

import os
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8000"
"""The service of ``svmstream serve`` with the default host and port."""


def api_token(explicit: str | None = None) -> str | None:
    """``explicit``, else ``SVMSTREAM_API_TOKEN`` from the environment, else None."""
    return explicit or os.environ.get("SVMSTREAM_API_TOKEN") or None


def auth_headers(token: str | None) -> dict[str, str]:
    """``{"authorization": "Bearer <token>"}``, or no header without a token."""
    return {"authorization": f"Bearer {token}"} if token else {}


def http_client(url: str, token: str | None):
    """An :class:`httpx.Client` on ``url`` sending ``token``, with the CLI's timeouts
    (10 s to connect, 600 s per request: a large batch or upload may take long)."""
    import httpx  # lazy: this module is imported by `svmstream healthcheck`, which must start fast

    return httpx.Client(base_url=url, timeout=httpx.Timeout(600.0, connect=10.0), headers=auth_headers(token))


def check_response(response, error: type[Exception]) -> Any:
    """The JSON body of a successful response.

    Raises
    ------
    error
        For a status >= 400: ``"<METHOD> <path> -> <status>: <detail>"`` with the
        service's ``detail`` (or the start of a non-JSON body).
    """
    if response.status_code >= 400:
        try:
            detail = response.json().get("detail")
        except Exception:  # noqa: BLE001 - not JSON
            detail = response.text[:500]
        raise error(
            f"{response.request.method} {response.request.url.path} -> {response.status_code}: {detail}"
        )
    return response.json()
