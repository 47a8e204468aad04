"""The fast path of ``POST /predict``: small prediction requests answered in pure ASGI.

Why: a single-row ``/predict`` spent ~0.7 ms of server CPU per request, almost all of it in
the framework around a ~40 us prediction (FastAPI's dependency resolution and middleware
stack, the thread-pool hand-off, scikit-learn's input validation); at 8 connections on 2
cores that made p99 17 ms alone and 27 ms while a client learned (figures in
``docs/service.md``, "Prediction paths").

:class:`PredictFastPath` sits just inside the request counter (``app/main.py``).  It takes
a request only when everything about it is ordinary, and then does what the route does --
:func:`~svmstream.app.api.routes.predict.parse_predict` and
:func:`~svmstream.app.api.routes.predict.answer_predict` on the event loop, the latency
histogram, the same orjson body and headers -- without FastAPI:

* ``POST`` to exactly ``/predict`` (no ``root_path``), a JSON ``Content-Type``, a
  ``Content-Length`` of at most :data:`FAST_BODY_BYTES` (and ``MAX_BODY_BYTES``);
* the token, when reads need one, given and right (``Authorization: Bearer``);
* the solver warm-up finished (a prediction may not wait for a compile on the loop), and the
  model decoded (a lazily restored model decodes its snapshot on its first prediction: 1.5 s
  of a 60 MB one blocked the event loop; the route does that in its thread pool);
* no ``version`` in the body (a pinned version may be decoded from its file);
* the batch is small for the model: rows x support vectors x features at most
  :data:`INLINE_WORK` (~0.3 ms of kernel work; B = 500, d = 22: up to 90 rows).

Anything else -- and any request the fast path cannot answer with 200 (a bad body, an
unknown or unfitted model, a wrong token) -- goes to the full FastAPI stack unchanged, with
the body already read replayed to it, so every refusal, error body and status is the
route's own.  A prediction changes nothing, so computing it twice on such a request is
harmless.  The OpenAPI document is the route's: the fast path adds no route.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson

from svmstream.app.api.auth import check_token
from svmstream.app.api.http import ORJSON_OPTIONS, is_json_media_type
from svmstream.app.api.routes.predict import answer_predict, parse_predict
from svmstream.app.models.warmup import warm_up_status

FAST_BODY_BYTES = 16 * 1024
"""Largest body the fast path takes (parsed on the event loop: ~30 us for 16 KiB)."""

INLINE_WORK = 1_000_000
"""Largest rows x support vectors x features computed on the event loop (~0.3 ms here);
larger batches take the route, which predicts in a worker thread."""


class PredictFastPath:
    """ASGI middleware answering ordinary small ``POST /predict`` requests itself.

    Parameters
    ----------
    app : the ASGI application (everything else goes there)
    state : the FastAPI app's ``state`` (``settings``, ``registry``, ``request_metrics``)
    route : the ``/predict`` route object, put in ``scope["route"]`` as routing would (the
        request counter labels requests by its template)
    """

    def __init__(self, app, state: Any, route: Any):
        self.app = app
        self.state = state
        self.route = route

    async def __call__(self, scope, receive, send) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] != "/predict"
            or scope["method"] != "POST"
            or scope.get("root_path")
        ):
            return await self.app(scope, receive, send)
        registry = getattr(self.state, "registry", None)
        settings = self.state.settings
        if registry is None or not self._acceptable(scope, settings) or warm_up_status() != "ready":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        messages, body = await _read(receive)
        # a pinned version: the route's thread pool parses and answers it (it may decode the
        # version's file).  Parsing it here first cost the event loop ~10 % of its time under 8
        # pinning clients; answering held versions here too made /health p99 278-300 ms
        # against 92-117 ms through the route (benchmarks/abuse_surfaces.py, load 10)
        if body is not None and b'"version"' not in body:
            try:
                name, obj, batch = parse_predict(registry, body, settings.default_model)
                answer = None
                if "version" not in obj and _inline_work(registry, name, batch) <= INLINE_WORK:
                    answer = answer_predict(
                        registry, name, obj, batch, authenticated=_has_token(scope, settings)
                    )
            except Exception:  # the route answers it with its own status and message
                answer = None
            if answer is not None:
                self.state.request_metrics.observe("predict", name, time.perf_counter() - started)
                scope["route"] = self.route
                # built here, not through OrjsonResponse: its construction and __call__ cost
                # ~7 us a request, +4 % of this path's CPU (wrk -c8, 3 interleaved rounds)
                content = orjson.dumps(answer, option=ORJSON_OPTIONS)
                await send(
                    {
                        "type": "http.response.start",
                        "status": 200,
                        "headers": [
                            (b"content-length", str(len(content)).encode("latin-1")),
                            (b"content-type", b"application/json"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": content})
                return None
        return await self.app(scope, _replay(messages, receive), send)

    @staticmethod
    def _acceptable(scope, settings) -> bool:
        """A JSON body with a small Content-Length, and the token if reads need it."""
        length = ctype = None
        for key, value in scope["headers"]:
            if key == b"content-length":
                length = value
            elif key == b"content-type":
                ctype = value
            elif key == b"transfer-encoding":
                return False
        if length is None or ctype is None or not is_json_media_type(ctype.decode("latin-1")):
            return False
        try:
            size = int(length)
        except ValueError:
            return False
        if not 0 < size <= min(FAST_BODY_BYTES, settings.max_body_bytes, settings.max_predict_body_bytes):
            return False
        return not settings.protect_reads or _has_token(scope, settings)


def _has_token(scope, settings) -> bool:
    """The request's token class: no token configured, or the request's ``Authorization:
    Bearer`` carries it (tokenless ``remember`` writes into a separate quota)."""
    expected = settings.token()
    if expected is None:
        return True
    auth = next((v for k, v in scope["headers"] if k == b"authorization"), None)
    if auth is None:
        return False
    scheme, _, given = auth.decode("latin-1").partition(" ")  # as fastapi's HTTPBearer
    return scheme.lower() == "bearer" and check_token(expected, given.strip() or None)


def _inline_work(registry, name: str, batch) -> int:
    """Rows x support vectors x features of predicting ``batch`` with model ``name``."""
    handle = registry.get(name)
    if not handle.loaded:  # a lazily restored model decodes its snapshot on first use: not here
        return INLINE_WORK + 1
    view = handle.view
    n_sv = int(view.stats.get("n_support_vectors") or 0)
    return batch.n * max(1, n_sv) * max(1, int(view.n_features or batch.X.shape[1]))


async def _read(receive: Callable) -> tuple[list[dict], bytes | None]:
    """The request's messages and its body (None if the client left before it ended)."""
    messages = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, None
        if not message.get("more_body", False):
            break
    if len(messages) == 1:
        return messages, messages[0].get("body", b"")
    return messages, b"".join(m.get("body", b"") for m in messages)


def _replay(messages: list[dict], receive: Callable) -> Callable:
    """A ``receive`` giving ``messages`` first, then the connection's own."""
    pending = list(messages)

    async def replayed():
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
