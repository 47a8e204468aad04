"""``POST /learn``: apply a batch of labelled examples to a model."""

from __future__ import annotations

import asyncio
import time

from fastapi import APIRouter, Depends, Request, Response
from starlette.concurrency import run_in_threadpool

from svmstream.app.api.auth import require_write
from svmstream.app.api.deps import LatencyDep, RegistryDep, SettingsDep
from svmstream.app.api.http import OrjsonResponse, body_budget, read_body, read_json_body
from svmstream.app.api.schemas import JSON_BODY_ERRORS, LearnRequest, LearnResponse, errors
from svmstream.app.cluster.forward import FORWARD_HEADER, Misdirected, accept, waiter_of
from svmstream.app.errors import ModelNotFound, ServiceError
from svmstream.app.ingest.decode import decode_body, may_contain_bools
from svmstream.app.ingest.examples import parse_examples
from svmstream.app.ingest.learn_tensors import parse_learn_tensors
from svmstream.app.models.registry import Registry

router = APIRouter(tags=["learn"], dependencies=[Depends(require_write)])

INLINE_PARSE_BYTES = 512 * 1024
"""Bodies up to this size are parsed on the event loop (a few ms at most); larger ones in
a worker thread so that the loop keeps serving."""


HEADER_LENGTH = "inference-header-content-length"


def is_binary(request: Request) -> bool:
    """A body in the binary tensor form (:mod:`svmstream.app.ingest.learn_tensors`): declared
    ``application/octet-stream``, or carrying ``Inference-Header-Content-Length``."""
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return media == "application/octet-stream" or HEADER_LENGTH in request.headers


def _submit_tensors(registry: Registry, body: bytes, header: str | None, default_model: str):
    tensors = parse_learn_tensors(body, header)
    handle = registry.get(tensors.model if tensors.model is not None else default_model)
    y, new = handle.codec.encode_with_new(tensors.labels)
    n = int(tensors.X.shape[0])
    return handle.name, n, registry.submit(handle, tensors.X, y, declared=tensors.n_features, new_labels=new)


def _parse_and_submit(registry: Registry, body: bytes, default_model: str):
    obj = decode_body(body)
    name = obj.get("model") if isinstance(obj, dict) else None
    handle = registry.get(name if isinstance(name, str) else default_model)
    batch = parse_examples(
        obj, handle.codec, check_bools=may_contain_bools(body), has_schema=handle.fields is not None
    )
    if batch.rows is not None:
        return (
            handle.name,
            batch.n,
            registry.submit(handle, batch.rows, batch.y, new_labels=batch.new_labels, weights=batch.weights),
        )
    return (
        handle.name,
        batch.n,
        registry.submit(
            handle,
            batch.X,
            batch.y,
            declared=batch.n_features,
            new_labels=batch.new_labels,
            weights=batch.weights,
        ),
    )


@router.post(
    "/learn",
    response_model=LearnResponse,
    responses={
        **errors(401, 404, 409, 421, 429, 500, 503, *JSON_BODY_ERRORS),
        202: {"description": "several learners: the batch is in the model's stream (docs/cluster.md)"},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": LearnRequest.model_json_schema()},
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            },
        }
    },
)
async def learn(
    request: Request, registry: RegistryDep, settings: SettingsDep, observe: LatencyDep
) -> OrjsonResponse:
    """Validate the whole batch, then apply it with one ``partial_fit`` call.

    The response is sent once the batch is applied and published; ``buffered`` counts the
    examples still pending (warm-up window and shuffle buffer).  A rejected batch (4xx,
    also a batch that made the model non-finite: 422 "numerical overflow") changes nothing.
    """
    started = time.perf_counter()
    limit, setting = settings.max_body_bytes, "SVMSTREAM_MAX_BODY_BYTES"
    cluster = getattr(request.app.state, "cluster", None)
    elsewhere = None  # several learners: answered by the owner or through the stream (docs/cluster.md)
    async with body_budget(request, limit, setting):
        if is_binary(request):
            body = await read_body(request, limit, setting)
            header = request.headers.get(HEADER_LENGTH)
            if len(body) <= INLINE_PARSE_BYTES:  # a frombuffer and checks: cheaper than a thread hop
                name, n, future = _submit_tensors(registry, body, header, settings.default_model)
            else:
                name, n, future = await run_in_threadpool(
                    _submit_tensors, registry, body, header, settings.default_model
                )
        else:
            body = await read_json_body(request, limit, setting)
            once_id = request.headers.get(FORWARD_HEADER)
            try:
                if once_id and cluster is not None:  # forwarded to us as the model's owner
                    elsewhere = learn_forwarded(request, registry, settings, body, once_id)
                elif len(body) <= INLINE_PARSE_BYTES:  # ~2 ms for 1,000 x 22: cheaper than a thread hop
                    name, n, future = _parse_and_submit(registry, body, settings.default_model)
                else:
                    name, n, future = await run_in_threadpool(
                        _parse_and_submit, registry, body, settings.default_model
                    )
            except ModelNotFound:
                if cluster is None:
                    raise
                elsewhere = learn_elsewhere(request, settings, body)  # another learner owns it
        del body
    if elsewhere is not None:
        return await elsewhere
    view = await applied(future)
    observe("learn", name, time.perf_counter() - started)
    return OrjsonResponse({"model": name, "n_examples": n, **learn_figures(view)})


async def learn_elsewhere(request: Request, settings, body: bytes) -> Response:
    """A model another learner owns (``docs/cluster.md``): appended to its stream (202) or
    forwarded to its owner (its answer), as ``SVMSTREAM_CLUSTER_LEARN_ROUTE`` says."""
    forwarder = request.app.state.forwarder
    obj = decode_body(body)
    if settings.cluster_learn_route == "append":
        return OrjsonResponse(await run_in_threadpool(forwarder.append, obj), status_code=202)
    status, answer, headers = await forwarder.forward(obj, body, request.headers, run_in_threadpool)
    if isinstance(answer, bytes):
        return Response(answer, status_code=status, media_type="application/json", headers=headers)
    return OrjsonResponse(answer, status_code=status, headers=headers)


async def learn_forwarded(request: Request, registry: Registry, settings, body: bytes, once_id: str):
    """The owner's side of a forwarded ``/learn``: validated, appended to the model's stream
    once per forward id, answered ``200`` once this learner's consumer applied it (``202``
    when the wait ends first: the entries are in the stream); ``421`` when not the owner."""
    received = request.app.state.forwarder.metrics.received
    args = (request.app.state.cluster, registry, request.app.state.streams, body, settings.default_model)
    try:
        got = await run_in_threadpool(accept, *args, once_id)
    except Misdirected:
        received.labels("misdirected").inc()
        raise
    except ServiceError:
        received.labels("refused").inc()
        raise
    dead = await applied_here(got, settings.cluster_forward_timeout_s)
    if dead is None:
        received.labels("queued").inc()
        return OrjsonResponse({**got.answer, "queued": True}, status_code=202)
    received.labels("applied").inc()
    return OrjsonResponse({**got.answer, **learn_figures(got.handle.view), "dead_lettered": dead})


async def applied_here(got, timeout: float) -> int | None:
    """Wait up to ``timeout`` s for this learner's consumer to apply a forwarded batch (a model
    just gained gets its consumer within a tick); the count of its entries dead-lettered, None
    when the wait ended first or the model moved."""
    deadline = time.monotonic() + timeout
    waiter = waiter_of(got)
    while waiter is None and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
        waiter = waiter_of(got)
    if waiter is None:
        return None
    try:
        return await asyncio.wait_for(asyncio.wrap_future(waiter), max(0.0, deadline - time.monotonic()))
    except TimeoutError:
        return None


async def applied(future):
    """The view a learner future resolves to; a solver failure (the learner rolled the model
    back and logged it) raises a 500, a rejected batch (numerical overflow) its 422."""
    try:
        return await asyncio.wrap_future(future)
    except ServiceError:
        raise
    except Exception as exc:
        raise ServiceError(
            f"learning failed: {type(exc).__name__}: {exc}; the model was left unchanged", status=500
        ) from None


def learn_figures(view) -> dict:
    """What ``/learn`` and ``/models/{name}/flush`` report after applying: ``version``,
    ``n_seen``, ``n_support_vectors``, ``t`` and ``buffered`` (examples pending)."""
    stats = view.stats
    return {
        "version": view.version,
        "n_seen": stats["n_seen"],
        "n_support_vectors": stats["n_support_vectors"],
        "t": stats["t"],
        "buffered": stats.get("pending", 0),
    }
