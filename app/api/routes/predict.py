"""``POST /predict``: labels and decision values from a model's current published view."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from svmstream.app.api.auth import authenticated, require_read
from svmstream.app.api.deps import LatencyDep, RegistryDep, SettingsDep
from svmstream.app.api.http import OrjsonResponse, body_budget, read_json_body, read_limit
from svmstream.app.api.routes.feedback import remember_rows, wants_remember
from svmstream.app.api.schemas import JSON_BODY_ERRORS, PredictRequest, PredictResponse, errors
from svmstream.app.errors import InvalidInput, ModelNotFound
from svmstream.app.ingest.decode import decode_body, may_contain_bools
from svmstream.app.ingest.examples import Batch, parse_examples
from svmstream.app.models.registry import Registry
from svmstream.app.models.task_outputs import output_of
from svmstream.app.models.versions import Versions

router = APIRouter(tags=["predict"], dependencies=[Depends(require_read)])


def parse_predict(registry: Registry, body: bytes, default_model: str) -> tuple[str, dict, Batch]:
    """``(model name, decoded body, batch)`` of a ``/predict`` body.

    Raises InvalidInput (400/422), ModelNotFound (404)."""
    obj = decode_body(body)
    name = obj.get("model") if isinstance(obj, dict) else None
    name = name if isinstance(name, str) else default_model
    handle = registry.get(name)
    has_schema = handle.fields is not None
    return name, obj, parse_examples(obj, None, check_bools=may_contain_bools(body), has_schema=has_schema)


def answer_predict(
    registry: Registry,
    name: str,
    obj: dict,
    batch: Batch,
    versions: Versions | None = None,
    authenticated: bool = True,
) -> dict:
    """The ``/predict`` answer (a dict for orjson) for a parsed batch; ``"version": v`` in the
    body answers from that version of the model's history (``versions``).

    Raises ModelNotFound, VersionNotFound (404), ModelNotFitted, ModelWarmingUp (409),
    InvalidInput.  ``authenticated``: the request's token class (tokenless ``remember`` writes
    into a separate quota)."""
    version = pinned_version(obj)
    X = batch.X if batch.rows is None else batch.rows
    if version is not None and versions is not None:
        view, X, decision = versions.predict(name, version, X, batch.n_features)
    else:
        view, X, decision = registry.predict(name, X, declared=batch.n_features, with_rows=True)
    task = output_of(view.config)
    out = {
        "model": name,
        "version": view.version,
        "model_version": view.version,
        # labels/decision/proba; values/lower/upper; scores/outlier (app/models/task_outputs.py)
        **task.answer(view, X, decision, obj),
    }
    if wants_remember(obj, view):
        served = (out["classes"], out["proba"]) if "proba" in out else None
        out["ids"] = remember_rows(registry, view, X, decision, task.served(out), served, authenticated)
    return out


def pinned_version(obj: dict) -> int | None:
    """The body's ``version`` (an integer >= 0) or None.  Raises InvalidInput naming it."""
    version = obj.get("version") if isinstance(obj, dict) else None
    if version is None:
        return None
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise InvalidInput(
            "version: must be a version number (an integer >= 0) of the model", field="version"
        )
    return version


def _predict(
    registry: Registry,
    body: bytes,
    default_model: str,
    versions: Versions | None = None,
    authenticated: bool = True,
    others: Registry | None = None,
) -> dict:
    """``others``: a clustered learner's registry of the models other learners own, followed
    from their published state (``docs/cluster.md``), asked when this one has no such model."""
    try:
        parsed = parse_predict(registry, body, default_model)
    except ModelNotFound:
        if others is None:
            raise
        return answer_predict(others, *parse_predict(others, body, default_model), None, authenticated)
    return answer_predict(registry, *parsed, versions, authenticated)


@router.post(
    "/predict",
    response_model=PredictResponse,
    responses=errors(401, 404, 409, 503, *JSON_BODY_ERRORS),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": PredictRequest.model_json_schema()}},
        }
    },
)
async def predict(
    request: Request, registry: RegistryDep, settings: SettingsDep, observe: LatencyDep
) -> OrjsonResponse:
    """Predict with the model's current published view (never waits for the learner).

    ``labels[i]`` is ``classes[1]`` when ``decision[i] > 0`` else ``classes[0]`` (binary),
    the class of the largest score (multi-class).  With ``"proba": true`` the answer adds
    ``classes`` and ``proba`` (calibrated probabilities, rows sum to 1, ``argmax`` = label).
    """
    started = time.perf_counter()
    limit, setting = read_limit(settings, request)
    async with body_budget(request, limit, setting, slot=True):
        body = await read_json_body(request, limit, setting)
        versions = getattr(request.app.state, "versions", None)
        cluster = getattr(request.app.state, "cluster", None)
        others = cluster.others if cluster is not None else None
        result = await run_in_threadpool(
            _predict, registry, body, settings.default_model, versions, authenticated(request), others
        )
    observe("predict", result["model"], time.perf_counter() - started)
    return OrjsonResponse(result)
