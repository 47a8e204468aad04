"""The service's errors: one hierarchy, one JSON body, one set of handlers.

Every error the service answers with is a :class:`ServiceError`; its HTTP response is
``{"detail": message, "field": field, "index": index}`` with the error's ``status`` (and
its ``headers``, e.g. ``WWW-Authenticate: Bearer`` on a 401).  ``detail`` starts with the
offending field and example index where there is one (``"X[3][5]: nan is not a finite
number"``).

=========================  ======  ==============================================
class                      status  meaning
=========================  ======  ==============================================
:class:`ServiceError`      422     base class (any status may be given)
:class:`InvalidInput`      422     a rejected request body, entry or parameter
                                   (400 for malformed JSON or a bad header)
:class:`PayloadTooLarge`   413     a body over the configured byte limit
:class:`UnsupportedMediaType` 415  a body that is not declared ``application/json``
:class:`Unauthorized`      401     missing or wrong bearer token
:class:`ModelNotFound`     404     no model of that name
:class:`ModelNotFitted`    409     the model has not learned from any example yet
:class:`ModelWarmingUp`    409     the model's warm-up window is still open
:class:`NumericalOverflow` 422     a batch made the model non-finite (rolled back)
:class:`ModelClosed`       409     the model was deleted or replaced meanwhile
:class:`BatchModelReadOnly` 409    ``learn`` on a batch-trained model
:class:`LearnerBusy`       429     too many batches queued for the model
                                   (with ``Retry-After``)
:class:`ServerBusy`        503     too many large bodies read at once
                                   (with ``Retry-After``)
=========================  ======  ==============================================

Errors raised by the framework itself (an unknown path: 404; a method the path does not
have: 405 with ``Allow``; a path or query parameter of the wrong type: 422) get the same
body; ``OPTIONS`` on a known path answers 204 with ``Allow``.

The subclasses also derive from the built-in exception they stand for (``ValueError``,
``LookupError``, ``RuntimeError``), so generic ``except`` clauses keep working.

:func:`install_error_handlers` registers the handlers on a FastAPI app.  Client errors
(4xx) are answered without a log line; only unexpected exceptions (500) log a traceback.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import compile_path, get_route_path

_JSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


class ServiceError(Exception):
    """An error answered with a JSON body naming the offending field.

    Parameters
    ----------
    message : str
        Human-readable reason, starting with ``field`` when there is one.
    field : str or None
        Locator of the offending value, e.g. ``"X[3][5]"``, ``"y[7]"`` or ``"body"``.
    index : int or None
        Index of the first offending example in the batch, if the error is per example.
    status : int
        HTTP status to answer with (the class's ``default_status`` when not given).
    """

    default_status = 422
    headers: dict[str, str] | None = None

    def __init__(
        self, message: str, field: str | None = None, index: int | None = None, status: int | None = None
    ):
        super().__init__(message)
        self.message = message
        self.field = field
        self.index = index
        self.status = self.default_status if status is None else status

    def to_json(self) -> dict[str, Any]:
        return {"detail": self.message, "field": self.field, "index": self.index}


class InvalidInput(ServiceError, ValueError):
    """A rejected input (422; 400 for a body that is not JSON or a bad header)."""


class PayloadTooLarge(InvalidInput):
    """A request body over the configured limit (413).  The connection is closed after the
    answer: the rest of the body is not read (``Connection: close``)."""

    default_status = 413
    headers = {"Connection": "close"}


class ClientLeft(InvalidInput):
    """The client disconnected before its request body ended (nothing can be answered; the
    route stops, and :func:`svmstream.app.api.http.read_body` logs one line at INFO)."""

    default_status = 400


class ServerBusy(ServiceError, RuntimeError):
    """Too many large request bodies are being read or parsed (HTTP 503 with ``Retry-After``;
    the connection is closed: the body is not read)."""

    default_status = 503
    headers = {"Retry-After": "1", "Connection": "close"}


class UnsupportedMediaType(InvalidInput):
    """A JSON route received a body of another content type (HTTP 415).

    Refusing ``text/plain`` and form bodies also stops cross-site form POSTs: a page on
    another origin cannot send ``application/json`` without a CORS preflight.
    """

    default_status = 415


class Unauthorized(ServiceError):
    """401 with ``WWW-Authenticate: Bearer``."""

    default_status = 401
    headers = {"WWW-Authenticate": "Bearer"}

    def __init__(self, message: str):
        super().__init__(message, field="authorization")


class ModelNotFound(ServiceError, LookupError):
    """No model of that name (HTTP 404)."""

    default_status = 404


class ModelNotFitted(ServiceError, RuntimeError):
    """The model has not learned from any example yet (HTTP 409)."""

    default_status = 409


class ModelWarmingUp(ModelNotFitted):
    """The model's warm-up window is still open: no predictions yet (HTTP 409)."""


class NumericalOverflow(InvalidInput):
    """A batch made the model's margins or coefficients non-finite; the model was rolled
    back (HTTP 422; a stream entry goes to the dead-letter stream)."""


class ModelClosed(ServiceError, RuntimeError):
    """The model was deleted or replaced while the request was in flight (HTTP 409)."""

    default_status = 409


class BatchModelReadOnly(ModelClosed):
    """``learn`` on a model trained by a batch job (HTTP 409).  A :class:`ModelClosed` so
    that a stream consumer of such a model stops instead of retrying the batch."""


class AskTheLearner(ServiceError):
    """What only the learner answers, asked of a process that is not it (HTTP 409): a pinned
    version on a prediction replica.  The answer names the learner's URL where the process
    knows it (:func:`naming_the_learner`)."""

    default_status = 409


def learner_url(app: Any) -> str | None:
    """The learner's URL as a replica knows it (published by the learner, ``docs/deployment.md``)."""
    return getattr(getattr(app.state, "replication", None), "learner_url", None)


def naming_the_learner(exc: ServiceError, app: Any) -> ServiceError:
    """``exc`` with the learner's URL in its message when it is an :class:`AskTheLearner`."""
    if not isinstance(exc, AskTheLearner):
        return exc
    url = learner_url(app)
    where = f"the learner at {url}" if url else "the learner (its URL is not published yet)"
    named = AskTheLearner(f"{exc.message}; send it to {where}", field=exc.field, index=exc.index)
    named.headers = exc.headers
    return named


class LearnerBusy(ServiceError, RuntimeError):
    """Too many batches are queued for the model (HTTP 429 with ``Retry-After``)."""

    default_status = 429
    RETRY_AFTER_S = 1
    """Seconds a client should wait: a queue of ``MAX_PENDING_BATCHES`` batches of 1,000
    rows drains in well under a second on one core (docs/service.md, measured figures)."""
    headers = {"Retry-After": str(RETRY_AFTER_S)}


def error_response(exc: ServiceError) -> Response:
    """The JSON response of ``exc`` (orjson-encoded, with the error's headers)."""
    return Response(
        orjson.dumps(exc.to_json(), option=_JSON_OPTIONS),
        status_code=exc.status,
        headers=exc.headers,
        media_type="application/json",
    )


async def _handle(request: Request, exc: ServiceError) -> Response:
    return error_response(naming_the_learner(exc, request.app))


def allowed_methods(request: Request, given: str | None = None) -> list[str]:
    """Every method the app documents on the request's path (its OpenAPI ``paths``), with
    the methods Starlette named (``given``: the ``Allow`` of the first route matched), HEAD
    with GET, and OPTIONS (which :func:`_handle_http` answers for any known path); sorted."""
    methods = {m.strip().upper() for m in (given or "").split(",") if m.strip()}
    path = get_route_path(request.scope)
    for template, item in request.app.openapi().get("paths", {}).items():
        if compile_path(template)[0].match(path):
            methods.update(m.upper() for m in item if m in _HTTP_METHODS)
    if "GET" in methods:
        methods.add("HEAD")
    if methods:
        methods.add("OPTIONS")
    return sorted(methods)


_HTTP_METHODS = frozenset({"get", "put", "post", "delete", "options", "head", "patch", "trace"})


async def _handle_http(request: Request, exc: StarletteHTTPException) -> Response:
    """Starlette's own 404/405 (no route, wrong method) in the service's body; 405 names
    every method of the path in ``Allow`` (Starlette's names only the first route's), and
    ``OPTIONS`` on a known path answers 204 with ``Allow``."""
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        allow = ", ".join(allowed_methods(request, headers.get("Allow")))
        headers["Allow"] = allow
        if request.method == "OPTIONS":
            return Response(status_code=204, headers=headers)
    field = "path" if exc.status_code == 404 else "method" if exc.status_code == 405 else None
    detail = exc.detail
    if exc.status_code == 404:
        detail = f"path: no route {request.url.path!r}; see /openapi.json"
    elif exc.status_code == 405:
        detail = (
            f"method: {request.method} is not allowed on {request.url.path!r}; allowed: {headers['Allow']}"
        )
    error = ServiceError(str(detail), field=field, status=exc.status_code)
    error.headers = headers or None
    return error_response(error)


async def _handle_validation(request: Request, exc: RequestValidationError) -> Response:
    """FastAPI's parameter validation (path, query) in the service's body, naming the field."""
    errors = exc.errors()
    err = errors[0] if errors else {}
    loc = [str(part) for part in err.get("loc", ()) if part not in ("path", "query", "header", "body")]
    field = ".".join(loc) or "request"
    return error_response(InvalidInput(f"{field}: {err.get('msg', 'invalid value')}", field=field))


async def _handle_unexpected(request: Request, exc: Exception) -> Response:
    """Any other exception: a 500 in the service's body, naming the exception's type only
    (its message may hold server paths); the server logs the traceback."""
    return error_response(
        ServiceError(f"internal error: {type(exc).__name__}; see the server log", status=500)
    )


def install_error_handlers(app: FastAPI) -> None:
    """Answer every :class:`ServiceError` raised by a route with :func:`error_response`, and
    the framework's 404/405/422 and any unexpected exception (500) with the same body."""
    app.add_exception_handler(ServiceError, _handle)
    app.add_exception_handler(StarletteHTTPException, _handle_http)
    app.add_exception_handler(RequestValidationError, _handle_validation)
    app.add_exception_handler(Exception, _handle_unexpected)
