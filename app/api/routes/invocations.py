"""MLflow's scoring protocol: ``POST /invocations`` (and ``GET /ping``) over the service's models.

A client written for ``mlflow models serve`` (``mlflow.pyfunc.scoring_server``) works
unchanged: the payload forms ``dataframe_split``, ``dataframe_records``, ``instances`` and
``inputs`` (:mod:`svmstream.app.ingest.scoring_payloads`) → ``{"predictions": [...]}``, the
predicted labels.  ``params.model`` picks the model (default: ``SVMSTREAM_DEFAULT_MODEL``);
``params.output`` = ``decision`` or ``proba`` answers decision values or calibrated
probabilities instead, plus ``classes`` (their columns); ``params.version`` answers from that
version of the model's history (``docs/versions.md``).  Predictions take the path of
``POST /predict`` (:func:`svmstream.app.api.protocols.predict_rows`).

Errors are MLflow's ``{"error_code": ..., "message": ...}``: 400 ``BAD_REQUEST``, 401
``UNAUTHENTICATED``, 404 ``RESOURCE_DOES_NOT_EXIST``, 409 ``RESOURCE_CONFLICT`` (the model
cannot predict yet), 413 ``REQUEST_LIMIT_EXCEEDED``, 415 ``BAD_REQUEST`` (not JSON: MLflow's
CSV and Parquet inputs are not served).  ``docs/protocols.md`` has the decisions and examples.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from svmstream.app.api.auth import Credentials
from svmstream.app.api.deps import LatencyDep, RegistryDep, SettingsDep
from svmstream.app.api.http import OrjsonResponse, body_budget, read_limit
from svmstream.app.api.protocols import authorize_read, guarded, predict_rows, read_protocol_body
from svmstream.app.errors import InvalidInput, ServiceError
from svmstream.app.ingest.decode import decode_json, may_contain_bools
from svmstream.app.ingest.scoring_payloads import INPUT_FORMATS, parse_scoring_payload
from svmstream.app.models.registry import Registry
from svmstream.app.models.versions import for_version

router = APIRouter(tags=["mlflow scoring"])

MEDIA_TYPES = frozenset({"application/json"})

#: HTTP status -> MLflow error code (the codes of ``mlflow.exceptions.ERROR_CODE_TO_HTTP_STATUS``).
ERROR_CODES = {
    400: "BAD_REQUEST",
    401: "UNAUTHENTICATED",
    404: "RESOURCE_DOES_NOT_EXIST",
    409: "RESOURCE_CONFLICT",
    413: "REQUEST_LIMIT_EXCEEDED",
    415: "BAD_REQUEST",
    429: "RESOURCE_EXHAUSTED",
    503: "TEMPORARILY_UNAVAILABLE",
}


class MlflowError(BaseModel):
    error_code: str
    message: str


class Predictions(BaseModel):
    predictions: list[Any]
    classes: list[Any] | None = None


def mlflow_error(exc: ServiceError) -> Response:
    """``{"error_code", "message"}``; the service's 422 (a rejected input) becomes 400."""
    status = 400 if exc.status == 422 else exc.status
    code = ERROR_CODES.get(status, "BAD_REQUEST")
    return OrjsonResponse(
        {"error_code": code, "message": exc.message}, status_code=status, headers=exc.headers
    )


def _invoke(registry: Registry, body: bytes, default_model: str, versions=None) -> tuple[str, dict[str, Any]]:
    try:
        obj = decode_json(body, "body", status=400)
    except RecursionError:
        raise InvalidInput("body: JSON nested too deeply", field="body", status=400) from None
    request = parse_scoring_payload(
        obj,
        check_bools=may_contain_bools(body),
        named=lambda m: registry.get(m or default_model).fields is not None,
    )
    name = request.model or default_model
    if request.version is not None:  # params.version: that version of the history answers
        registry = for_version(registry, versions, name, str(request.version))
    pred = predict_rows(registry, name, request.X, f"{request.input_format}[0]", request.output == "proba")
    if request.output == "label" or (pred.outputs is not None and request.output != "decision"):
        return name, {"predictions": pred.labels}  # a regressor's values, a novelty model's outlier flags
    values = pred.proba if request.output == "proba" else pred.decision
    return name, {"predictions": values, "classes": pred.classes}


_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "description": f"exactly one of {list(INPUT_FORMATS)}, optional params "
                    "{model, output: label|decision|proba}",
                    # exactly one payload form (MLflow's rule); each typed, so null is not one
                    "oneOf": [{"required": [f]} for f in INPUT_FORMATS],
                    "additionalProperties": False,
                    "properties": {
                        "dataframe_split": {"type": "object", "required": ["data"]},
                        "dataframe_records": {"type": "array", "minItems": 1, "items": {"type": "object"}},
                        "instances": {"type": "array", "minItems": 1},
                        "inputs": {"type": ["array", "object"]},
                        "params": {
                            "type": "object",
                            "properties": {
                                "model": {"type": "string"},
                                "output": {"enum": ["label", "decision", "proba"]},
                                "version": {"type": "integer", "minimum": 0},
                            },
                        },
                    },
                }
            }
        },
    }
}


@router.post(
    "/invocations",
    response_model=Predictions,
    responses={code: {"model": MlflowError} for code in (400, 401, 404, 409, 413, 415, 503)},
    openapi_extra=_DOC,
)
async def invocations(
    request: Request,
    registry: RegistryDep,
    settings: SettingsDep,
    observe: LatencyDep,
    credentials: Credentials,
) -> Response:
    """MLflow scoring: ``{"predictions": [...]}`` for the rows of the payload."""

    async def work() -> Response:
        await authorize_read(request, credentials)
        started = time.perf_counter()
        limit, setting = read_limit(settings, request)
        async with body_budget(request, limit, setting, slot=True):
            body = await read_protocol_body(request, limit, MEDIA_TYPES, setting)
            name, result = await run_in_threadpool(
                _invoke, registry, body, settings.default_model, request.app.state.versions
            )
        observe("invocations", name, time.perf_counter() - started)
        return OrjsonResponse(result)

    return await guarded(work, mlflow_error, request)


@router.get("/ping", response_model=dict[str, str])
async def ping() -> OrjsonResponse:
    """MLflow's health check (``ScoringServerClient.wait_server_ready``): 200, no token needed."""
    return OrjsonResponse({"status": "ok"})
