"""Open Inference Protocol v2 (KServe, Triton): health, metadata and ``infer`` for every model.

=========================================================  ====================================
route                                                      answer
=========================================================  ====================================
``GET /v2``                                                server metadata
``GET /v2/health/live``, ``GET /v2/health/ready``          200 (no token needed: probes)
``GET /v2/models/{name}[/versions/{v}]``                   model metadata
``GET /v2/models/{name}[/versions/{v}]/ready``             200, or 400 until it can predict
``POST /v2/models/{name}[/versions/{v}]/infer``            outputs ``label``, ``decision``,
                                                           ``proba``, ``classes``
=========================================================  ====================================

A model has one input, a matrix ``[n, d]`` of FP32/FP64 (or integer) features, and the
outputs ``label`` (BYTES for string labels, INT64 for integral ones, FP64 otherwise),
``decision`` (FP64, ``[n]`` binary or ``[n, K]``), ``proba`` (FP64 ``[n, K]``, models with
calibrated probabilities) and ``classes`` (``[K]``, the columns of ``decision``/``proba``).
Triton's binary tensor data extension is served both ways.  Errors are ``{"error": ...}``:
400 bad request, 401 token, 404 unknown model or version, 413 body too large, 415 content
type or encoding, 400 model not ready (as Triton: a 5xx would say the server failed).  ``docs/protocols.md`` has the decisions and examples.
"""

from __future__ import annotations

import re
import struct
import time
from typing import Any

import numpy as np
import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from svmstream.app.api.auth import Credentials
from svmstream.app.api.deps import LatencyDep, RegistryDep, SettingsDep
from svmstream.app.api.http import OrjsonResponse, body_budget, read_limit
from svmstream.app.api.protocols import (
    Prediction,
    authorize_read,
    guarded,
    has_proba,
    label_datatype,
    predict_rows,
    read_protocol_body,
)
from svmstream.app.errors import InvalidInput, ModelClosed, ModelNotFitted, ModelNotFound, ServiceError
from svmstream.app.ingest.tensors import InferRequest, RequestedOutput, parse_infer_request
from svmstream.app.models.registry import Registry
from svmstream.app.models.task_outputs import output_of
from svmstream.app.models.versions import for_version

router = APIRouter(tags=["open inference protocol v2"])

INPUT_NAME = "input"
HEADER_LENGTH = "Inference-Header-Content-Length"
MEDIA_TYPES = frozenset({"application/json", "application/octet-stream"})


# ----------------------------------------------------------------------------- OpenAPI shapes


class OipError(BaseModel):
    error: str


class ServerMetadata(BaseModel):
    name: str
    version: str
    extensions: list[str]


class TensorMetadata(BaseModel):
    name: str
    datatype: str
    shape: list[int]


class ModelMetadata(BaseModel):
    name: str
    versions: list[str]
    platform: str
    inputs: list[TensorMetadata]
    outputs: list[TensorMetadata]


class ModelReady(BaseModel):
    name: str
    ready: bool


class OutputTensor(BaseModel):
    name: str
    datatype: str
    shape: list[int]
    data: list[Any] | None = None
    parameters: dict[str, Any] | None = None


class InferResponse(BaseModel):
    model_name: str
    model_version: str
    id: str | None = None
    outputs: list[OutputTensor]


class InferRequestSchema(BaseModel):
    """The JSON part of an inference request (``docs/protocols.md``)."""

    id: str | None = None
    parameters: dict[str, Any] | None = None
    inputs: list[dict[str, Any]] = Field(min_length=1, max_length=1)
    outputs: list[dict[str, Any]] | None = None


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": OipError} for code in codes}


# ----------------------------------------------------------------------------- errors


def oip_error(exc: ServiceError) -> Response:
    """``{"error": message}`` with the protocol's status: 404 unknown model or version, 401/413/
    415/429 as raised, 400 for every other bad input and for a model that cannot predict yet
    (Triton answers "model not ready" with 400; a 5xx would report a server failure)."""
    status = exc.status
    if isinstance(exc, (ModelNotFitted, ModelClosed)) or status not in (401, 404, 413, 415, 429, 503):
        status = 400
    return OrjsonResponse({"error": exc.message}, status_code=status, headers=exc.headers)


VERSION_SEGMENT = re.compile(r"0|[1-9][0-9]{0,17}")
"""A version in a path: a decimal integer without sign or leading zero, at most 18 digits
(versions count batches; a longer segment names no version: 404, without parsing it)."""


def check_version_segment(name: str, version: str | None) -> None:
    """404 for a version segment that cannot name a version (``01``, ``+1``, ``1.0``, 5,000
    digits: Python's ``int()`` refuses more than 4,300)."""
    if version is not None and not VERSION_SEGMENT.fullmatch(version):
        shown = version if len(version) <= 40 else f"{version[:20]}... ({len(version)} characters)"
        raise ModelNotFound(
            f"model {name!r} version {shown!r} is not served: versions are the numbers "
            f"GET /models/{name}/versions lists"
        )


def _check_version(name: str, current: int, version: str | None) -> None:
    if version is not None and version != str(current):
        raise ModelNotFound(
            f"model {name!r} version {version!r} is not served: versions are the numbers "
            f"GET /models/{name}/versions lists (the current one is {str(current)!r})"
        )


# ----------------------------------------------------------------------------- health, metadata


@router.get("/v2/health/live", response_model=dict[str, bool])
async def live() -> OrjsonResponse:
    """``{"live": true}``: the process answers.  Open without a token (liveness probes)."""
    return OrjsonResponse({"live": True})


@router.get("/v2/health/ready", response_model=dict[str, bool])
async def ready() -> OrjsonResponse:
    """``{"ready": true}``: the service accepts requests (models restored).  Open without a
    token (readiness probes); per-model readiness is ``GET /v2/models/{name}/ready``."""
    return OrjsonResponse({"ready": True})


@router.get("/v2", response_model=ServerMetadata, responses=_errors(401))
async def server_metadata(request: Request, credentials: Credentials) -> Response:
    """Server metadata: name, version and the protocol extensions served."""

    async def work() -> Response:
        await authorize_read(request, credentials)
        return OrjsonResponse(
            {"name": "svmstream", "version": request.app.version, "extensions": ["binary_tensor_data"]}
        )

    return await guarded(work, oip_error, request)


def output_names(view) -> set[str]:
    """The outputs a model's inference answers (a regression or novelty model: its task's)."""
    own = output_of(view.config).tensor_types
    if own:
        return {name for name, _ in own} | {"decision"}
    return {"label", "decision", "classes"} | ({"proba"} if has_proba(view) else set())


def model_metadata(registry: Registry, name: str, version: str | None = None) -> dict[str, Any]:
    """The protocol's model metadata of ``name``'s current view (``docs/protocols.md``).

    Raises :class:`~svmstream.app.errors.ModelNotFound` (unknown model or version)."""
    view = registry.get(name).view
    _check_version(name, view.version, version)
    classes = list(view.codec.public_classes)
    k = len(classes)
    ltype = label_datatype(classes)
    own = output_of(view.config).tensor_types  # a regression or novelty model's (task_outputs.py)
    outputs = [
        {"name": "label", "datatype": ltype, "shape": [-1]},
        {"name": "decision", "datatype": "FP64", "shape": [-1, k] if k > 2 else [-1]},
    ]
    if view.estimator is not None and has_proba(view):
        outputs.append({"name": "proba", "datatype": "FP64", "shape": [-1, k]})
    outputs.append({"name": "classes", "datatype": ltype, "shape": [k]})
    if own:
        outputs = [{"name": n, "datatype": t, "shape": [-1]} for n, t in (*own, ("decision", "FP64"))]
    d = view.n_features if view.n_features is not None else -1
    return {
        "name": name,
        "versions": [str(view.version)],
        "platform": f"svmstream_{view.config.algorithm}",
        "inputs": [{"name": INPUT_NAME, "datatype": "FP64", "shape": [-1, d]}],
        "outputs": outputs,
    }


async def _metadata(
    request: Request, registry: Registry, credentials: Any, name: str, version: str | None
) -> Response:
    async def work() -> Response:
        await authorize_read(request, credentials)
        check_version_segment(name, version)
        answering = await run_in_threadpool(for_version, registry, request.app.state.versions, name, version)
        return OrjsonResponse(model_metadata(answering, name, version))

    return await guarded(work, oip_error, request)


@router.get("/v2/models/{name}", response_model=ModelMetadata, responses=_errors(401, 404))
async def get_model_metadata(
    name: str, request: Request, registry: RegistryDep, credentials: Credentials
) -> Response:
    """Model metadata: versions (the current one), platform, the input and the outputs."""
    return await _metadata(request, registry, credentials, name, None)


@router.get("/v2/models/{name}/versions/{version}", response_model=ModelMetadata, responses=_errors(401, 404))
async def get_model_version_metadata(
    name: str, version: str, request: Request, registry: RegistryDep, credentials: Credentials
) -> Response:
    """Model metadata of a version in the model's history (``docs/versions.md``; 404 for any other)."""
    return await _metadata(request, registry, credentials, name, version)


async def _ready(
    request: Request, registry: Registry, credentials: Any, name: str, version: str | None
) -> Response:
    async def work() -> Response:
        await authorize_read(request, credentials)
        check_version_segment(name, version)
        answering = await run_in_threadpool(for_version, registry, request.app.state.versions, name, version)
        view = answering.get(name).view
        _check_version(name, view.version, version)
        if view.estimator is None:
            raise ModelNotFitted(f"model {name!r} is not ready: it has not learned from any example yet")
        if view.stats.get("warming_up"):
            raise ModelNotFitted(
                f"model {name!r} is not ready: its warm-up window is open (POST /models/{name}/flush closes it)"
            )
        return OrjsonResponse({"name": name, "ready": True})

    return await guarded(work, oip_error, request)


@router.get("/v2/models/{name}/ready", response_model=ModelReady, responses=_errors(400, 401, 404))
async def model_ready(
    name: str, request: Request, registry: RegistryDep, credentials: Credentials
) -> Response:
    """``{"name", "ready": true}`` when the model can predict; 400 with the reason before its
    first batch and while its warm-up window is open."""
    return await _ready(request, registry, credentials, name, None)


@router.get(
    "/v2/models/{name}/versions/{version}/ready", response_model=ModelReady, responses=_errors(400, 401, 404)
)
async def model_version_ready(
    name: str, version: str, request: Request, registry: RegistryDep, credentials: Credentials
) -> Response:
    """As ``GET /v2/models/{name}/ready``, for a version in the model's history (404 for any other)."""
    return await _ready(request, registry, credentials, name, version)


# ----------------------------------------------------------------------------- infer


def _output_tensors(pred: Prediction) -> dict[str, tuple[str, list[int], Any]]:
    """``name -> (datatype, shape, values)`` of every output the prediction has (values: a
    C-contiguous ndarray, or a list of str for BYTES)."""
    if pred.outputs is not None:  # a regression or novelty model (task_outputs.py)
        own = {name: (dtype, list(values.shape), values) for name, (dtype, values) in pred.outputs.items()}
        return {**own, "decision": ("FP64", list(pred.decision.shape), pred.decision)}
    ltype = label_datatype(pred.classes)
    n = len(pred.labels)

    def typed(values: list[Any]) -> Any:
        return (
            values
            if ltype == "BYTES"
            else np.asarray(values, dtype=np.int64 if ltype == "INT64" else np.float64)
        )

    tensors = {
        "label": (ltype, [n], typed(pred.labels)),
        "decision": ("FP64", list(pred.decision.shape), pred.decision),
    }
    if pred.proba is not None:
        tensors["proba"] = ("FP64", list(pred.proba.shape), pred.proba)
    tensors["classes"] = (ltype, [len(pred.classes)], typed(pred.classes))
    return tensors


def _binary(datatype: str, values: Any) -> bytes:
    """Triton's binary form: little-endian values; BYTES as 4-byte length + UTF-8 per element."""
    if datatype == "BOOL":
        return np.ascontiguousarray(values, dtype="?").tobytes()
    if datatype == "BYTES":
        parts = []
        for v in values:
            raw = str(v).encode("utf-8")
            parts.append(struct.pack("<I", len(raw)) + raw)
        return b"".join(parts)
    return np.ascontiguousarray(values, dtype="<i8" if datatype == "INT64" else "<f8").tobytes()


def encode_response(
    pred: Prediction, request: InferRequest, requested: tuple[RequestedOutput, ...]
) -> tuple[bytes, bytes]:
    """``(JSON part, binary part)`` of the inference response, outputs in ``requested`` order."""
    tensors = _output_tensors(pred)
    outputs = []
    binary_parts = []
    for out in requested:
        datatype, shape, values = tensors[out.name]
        entry: dict[str, Any] = {"name": out.name, "datatype": datatype, "shape": shape}
        if out.binary if out.binary is not None else request.binary_output:
            raw = _binary(datatype, values)
            entry["parameters"] = {"binary_data_size": len(raw)}
            binary_parts.append(raw)
        else:
            entry["data"] = values.reshape(-1) if isinstance(values, np.ndarray) else values
        outputs.append(entry)
    body: dict[str, Any] = {"model_name": pred.model, "model_version": str(pred.version)}
    if request.id is not None:
        body["id"] = request.id
    body["outputs"] = outputs
    return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY), b"".join(binary_parts)


def _infer(registry: Registry, name: str, version: str | None, body: bytes, header: str | None) -> Response:
    handle = registry.get(name)  # an unknown model is a 404 whatever the body
    request = parse_infer_request(body, header)
    outputs = output_names(handle.view)
    if request.outputs is not None:
        for k, out in enumerate(request.outputs):
            if out.name not in outputs:
                raise InvalidInput(
                    f"outputs[{k}].name: {out.name!r} is not an output of model {name!r}; "
                    f"its outputs are {sorted(outputs)}",
                    field=f"outputs[{k}].name",
                    status=400,
                )
        want_proba: bool | None = any(out.name == "proba" for out in request.outputs)
        requested = request.outputs
    else:
        want_proba = None
    pred = predict_rows(registry, name, request.X, "inputs[0].shape", want_proba)
    _check_version(name, pred.version, version)
    if request.outputs is None:
        names = ["label", "decision", *(["proba"] if pred.proba is not None else []), "classes"]
        names = names if pred.outputs is None else [*pred.outputs, "decision"]
        requested = tuple(RequestedOutput(n) for n in names)
    head, binary = encode_response(pred, request, requested)
    if not binary:
        return Response(head, media_type="application/json")
    return Response(
        head + binary, media_type="application/octet-stream", headers={HEADER_LENGTH: str(len(head))}
    )


_INFER_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": InferRequestSchema.model_json_schema()},
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        },
    }
}
_INFER_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}},
    **_errors(400, 401, 404, 413, 415, 503),
}


async def _infer_route(
    request: Request,
    registry: Registry,
    settings: Any,
    observe: Any,
    credentials: Any,
    name: str,
    version: str | None,
) -> Response:
    async def work() -> Response:
        await authorize_read(request, credentials)
        check_version_segment(name, version)
        started = time.perf_counter()
        limit, setting = read_limit(settings, request)
        async with body_budget(request, limit, setting, slot=True):
            body = await read_protocol_body(request, limit, MEDIA_TYPES, setting)
            response = await run_in_threadpool(
                _infer,
                for_version(registry, request.app.state.versions, name, version),
                name,
                version,
                body,
                request.headers.get(HEADER_LENGTH),
            )
        observe("v2_infer", name, time.perf_counter() - started)
        return response

    return await guarded(work, oip_error, request)


@router.post(
    "/v2/models/{name}/infer",
    response_model=InferResponse,
    responses=_INFER_RESPONSES,
    openapi_extra=_INFER_DOC,
)
async def infer(
    name: str,
    request: Request,
    registry: RegistryDep,
    settings: SettingsDep,
    observe: LatencyDep,
    credentials: Credentials,
) -> Response:
    """Predict a ``[n, d]`` input tensor with the model's current published view (the path
    of ``POST /predict``).  Outputs as requested (default: all), JSON or binary."""
    return await _infer_route(request, registry, settings, observe, credentials, name, None)


@router.post(
    "/v2/models/{name}/versions/{version}/infer",
    response_model=InferResponse,
    responses=_INFER_RESPONSES,
    openapi_extra=_INFER_DOC,
)
async def infer_version(
    name: str,
    version: str,
    request: Request,
    registry: RegistryDep,
    settings: SettingsDep,
    observe: LatencyDep,
    credentials: Credentials,
) -> Response:
    """As ``POST /v2/models/{name}/infer``, answered by that version of the model's history
    (``docs/versions.md``; 404 for a version it does not keep)."""
    return await _infer_route(request, registry, settings, observe, credentials, name, version)
