"""The service's OpenAPI document, made to say what the service really answers.

FastAPI documents a 422 as its own ``HTTPValidationError`` (``{"detail": [...]}``); the
service answers every error with :class:`~svmstream.app.api.schemas.ErrorResponse`
(``{detail, field, index}``, :mod:`svmstream.app.errors`), so :func:`install_openapi`
rewrites every 422 to that body and drops the unused components.  The ``HTTPBearer``
security scheme stays declared on every route that checks the token; where the server's
settings make the token optional (no ``SVMSTREAM_API_TOKEN``, or a read route without
``SVMSTREAM_PROTECT_READS``) the operation also lists the empty requirement ``{}``, the
OpenAPI way of saying "or no credentials", so that generated clients and fuzzers do not
expect a 401 the server will not send.  Every operation also names the answers of the
connection bounds (408, 431, 503: :data:`CONNECTION_ANSWERS`) and, with a body, 413.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

try:  # FastAPI >= 0.16x keeps included routers as such; this walks their routes
    from fastapi.routing import iter_route_contexts
except ImportError:  # pragma: no cover - older FastAPI: app.routes are the routes themselves
    iter_route_contexts = None

from svmstream.app.api.auth import bearer_scheme, require_read
from svmstream.app.models.challengers import MODEL_FIELDS

_ERROR_REF = {"$ref": "#/components/schemas/ErrorResponse"}
_FASTAPI_422 = ("HTTPValidationError", "ValidationError")


def _reads(app: FastAPI) -> set[tuple[str, str]]:
    """(path, method) of the read operations: guarded by :func:`require_read`, or reading the
    bearer token themselves (the protocol routes, ``app/api/protocols.py``: every one of them
    only reads, and asks for the token exactly when :func:`require_read` would)."""
    out = set()
    if iter_route_contexts is None:
        routes = [(r, r.path_format) for r in app.routes if isinstance(r, APIRoute)]
    else:
        routes = [(c.original_route, c.path_format) for c in iter_route_contexts(app.routes)]
    for route, path in routes:
        if isinstance(route, APIRoute) and path is not None:
            calls = {dep.call for dep in route.dependant.dependencies}
            if require_read in calls or bearer_scheme in calls:
                out.update((path, m.lower()) for m in route.methods or ())
    return out


def build_openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document with the service's 422 body and truthful security requirements."""
    schema = get_openapi(
        title=app.title,
        version=app.version,
        summary=app.summary,
        description=app.description,
        routes=app.routes,
    )
    settings = app.state.settings
    token_set = settings.token() is not None
    reads = _reads(app)
    for path, item in schema.get("paths", {}).items():
        for method, op in item.items():
            if not isinstance(op, dict):
                continue
            for status, response in op.get("responses", {}).items():
                if status == "422":
                    response["description"] = response.get("description") or "Unprocessable Content"
                    response["content"] = {"application/json": {"schema": dict(_ERROR_REF)}}
            _connection_answers(op)
            security = op.get("security")
            if security and (not token_set or ((path, method) in reads and not settings.protect_reads)):
                op["security"] = [*security, {}]
    _server_bounds(schema, settings)
    components = schema.get("components", {}).get("schemas", {})
    for name in _FASTAPI_422:
        components.pop(name, None)
    return schema


def _server_bounds(schema: dict[str, Any], settings: Any) -> None:
    """The bounds the server's settings enforce, in the ``PUT /models/{name}`` body's schema:
    ``challengers`` at most ``max_challengers`` items, ``budget`` at most ``max_budget``,
    ``n_features`` at most ``max_features`` (the server answers 422 beyond each)."""
    op = schema.get("paths", {}).get("/models/{name}", {}).get("put", {})
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
    props = body.get("properties", {})
    bounds = {
        "challengers": ("maxItems", settings.max_challengers),
        "budget": ("maximum", settings.max_budget),
        "n_features": ("maximum", settings.max_features),
    }
    for field, (key, value) in bounds.items():
        for branch in [props.get(field, {}), *props.get(field, {}).get("anyOf", [])]:
            if branch.get("type") in ("array", "integer"):
                branch[key] = value
    # a challenger: the settings it changes, each as in the champion's body (docs/challengers.md)
    own = {k: v for k, v in props.items() if k != "challengers" and k not in MODEL_FIELDS}
    for branch in props.get("challengers", {}).get("anyOf", []):
        if branch.get("type") == "array":
            branch["items"] = {"type": "object", "properties": own, "additionalProperties": False}


CONNECTION_ANSWERS = {
    "408": "the request head (request line and headers) was not complete SVMSTREAM_HEADER_TIMEOUT_S "
    "seconds after the connection opened or the request began; empty body, the connection is closed",
    "431": "the request head is over SVMSTREAM_MAX_HEADER_BYTES; empty body, the connection is closed",
    "503": "SVMSTREAM_LIMIT_CONCURRENCY connections are open (uvicorn's plain-text answer), or the "
    "route's own reason below",
}
"""Answers any operation may get from the connection bounds (``docs/service.md``, "Bounds"),
before a route runs: added to every operation of the document."""

BODY_ANSWERS = {
    "413": "the body is over the route's byte limit (named in 'detail'); the connection is closed",
}
"""Added to every operation that takes a request body."""


def _connection_answers(op: dict[str, Any]) -> None:
    responses = op.setdefault("responses", {})
    answers = {**CONNECTION_ANSWERS, **(BODY_ANSWERS if "requestBody" in op else {})}
    for status, meaning in answers.items():
        if status in responses:
            if status == "503" and "SVMSTREAM_LIMIT_CONCURRENCY" not in responses[status].get(
                "description", ""
            ):
                responses[status]["description"] += "; or SVMSTREAM_LIMIT_CONCURRENCY connections are open"
            continue
        responses[status] = {"description": meaning}


def install_openapi(app: FastAPI) -> None:
    """Serve :func:`build_openapi` at ``/openapi.json`` (built once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build_openapi(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
