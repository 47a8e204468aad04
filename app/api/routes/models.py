"""``/models``: create, inspect, list and delete named models."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from svmstream.app.api.auth import require_read, require_write
from svmstream.app.api.deps import RegistryDep, SettingsDep
from svmstream.app.api.disclosure import public_model, sees_everything
from svmstream.app.api.http import OrjsonResponse, body_budget, decode_off_loop, read_json_body, route_limit
from svmstream.app.api.routes.learn import applied, learn_figures
from svmstream.app.api.schemas import (
    JSON_BODY_ERRORS,
    Deleted,
    FlushResponse,
    ModelCreate,
    ModelInfo,
    ModelList,
    errors,
)
from svmstream.app.errors import InvalidInput
from svmstream.app.ingest.decode import decode_body
from svmstream.app.ingest.named import declared_schema
from svmstream.app.models.challengers import ChallengerSet, Policy, challenger_config
from svmstream.app.models.config import HYPERPARAMETERS, MODEL_NAME_PATTERN
from svmstream.app.models.factory import check_config
from svmstream.app.models.limits import check_config_limits, estimate_bytes, set_bytes

router = APIRouter(prefix="/models", tags=["models"])

ModelName = Annotated[
    str,
    Path(description="1-64 characters [A-Za-z0-9_.-]", json_schema_extra={"pattern": MODEL_NAME_PATTERN}),
]
"""A model name in a path.  The schema states the pattern; the registry checks it, with its own
message (PUT: 422 "name: invalid model name ..."; GET/DELETE: 404, no such model)."""


def new_challengers(config, specs: list, settings) -> ChallengerSet | None:
    """The challenger set of a new model (``docs/challengers.md``), each challenger held to the
    champion's rules (:func:`check_challenger_spec`); 422 naming ``challengers[i].field``, or
    ``challengers`` when there are too many."""
    if len(specs) > settings.max_challengers:
        raise InvalidInput(
            f"challengers: at most {settings.max_challengers} challengers (SVMSTREAM_MAX_CHALLENGERS), "
            f"got {len(specs)}",
            field="challengers",
        )
    for i, spec in enumerate(specs):
        check_challenger_spec(i, spec, config, settings)
    try:
        return ChallengerSet.for_model(config, specs, Policy.from_settings(settings))
    except ValueError as exc:
        message = str(exc)
        field = message.split(":", 1)[0] if message.startswith("challengers[") else "challengers"
        raise InvalidInput(
            message if field != "challengers" else f"challengers: {message}", field=field
        ) from None


def check_challenger_spec(i: int, spec: dict, config, settings) -> None:
    """Challenger ``i``'s settings by the champion's rules: the strict types and bounds of the
    ``PUT`` body (:class:`ModelCreate`), the size guards (``max_budget``, ...) and the
    estimator's own checks.  Raises InvalidInput naming ``challengers[i].field``."""
    where = f"challengers[{i}]"
    if "challengers" in spec:
        raise InvalidInput(
            f"{where}.challengers: a challenger has no challengers", field=f"{where}.challengers"
        )
    try:
        ModelCreate.model_validate(spec)
        cfg = challenger_config(config, spec)
    except ValidationError as exc:
        raise validation_error(exc, where) from None
    except ValueError as exc:  # a field of the model itself
        raise _named(where, str(exc)) from None
    try:
        check_config_limits(cfg, settings)
    except InvalidInput as exc:
        raise InvalidInput(f"{where}.{exc.message}", field=f"{where}.{exc.field}") from None
    try:
        check_config(cfg)
    except ValueError as exc:
        raise _named(where, str(exc)) from None


def _named(where: str, message: str) -> InvalidInput:
    """``where.<parameter>: message`` when the message starts with a hyperparameter's name (the
    estimators' checks: ``budget must be ...``), else ``where: message``."""
    first = message.replace(":", " ").split(" ", 1)[0]
    names = {row.json_name for row in HYPERPARAMETERS} | {row.name for row in HYPERPARAMETERS}
    field = f"{where}.{first}" if first in names else where
    return InvalidInput(f"{field}: {message}", field=field)


MODEL_BODY_BYTES = 4 * 2**20
"""Byte limit of a ``PUT /models/{name}`` body: every setting, up to 16 challengers and a
``classes`` list of e.g. 100,000 labels of 30 characters (a longer list: let the model learn
its classes, ``max_classes``)."""


def _model_fields(registry, body: bytes):
    """``(config, challenger specs, declared schema state or None)`` of a ``PUT`` body; raises
    InvalidInput naming the field (``fields.<name>.kind`` for a declared schema)."""
    obj = decode_body(body) if body.strip() else {}
    try:
        fields = ModelCreate.model_validate(obj).model_dump(by_alias=True, exclude_none=True)
        specs = fields.pop("challengers", None) or []
        schema = declared_schema(fields.pop("fields", None))
        return registry.resolve_config(fields), specs, schema
    except ValidationError as exc:
        raise validation_error(exc) from None


def check_challenger_bytes(config, challengers: ChallengerSet | None, settings) -> None:
    """422 naming ``challengers`` when the champion's and its challengers' estimated bytes
    together exceed ``max_model_bytes`` at the declared dimension (1 when not declared: the
    least the model will need)."""
    extra = challengers.counted_configs(config) if challengers is not None else []
    if not extra:
        return
    d = config.n_features or 1
    total = set_bytes([config, *extra], d)
    if total > settings.max_model_bytes:
        raise InvalidInput(
            f"challengers: the champion and {len(extra)} challengers "
            f"need an estimated {total / 1e6:,.1f} MB at {d} features ({estimate_bytes(config, d) / 1e6:,.1f} MB "
            f"for the champion), over max_model_bytes = {settings.max_model_bytes / 2**20:g} MiB",
            field="challengers",
        )


def validation_error(exc: ValidationError, where: str = "") -> InvalidInput:
    """The first pydantic error as an :class:`~svmstream.app.errors.InvalidInput` naming its field
    (``where.field`` inside ``where``, e.g. ``challengers[0].gamma``)."""
    err = exc.errors()[0]
    loc = err.get("loc", ())
    # the field, then list positions; not the member tags of a union (gamma: number or "scale")
    parts = [str(loc[0])] if loc else []
    parts += [f"[{p}]" for p in loc[1:] if isinstance(p, int)]
    field = "".join(parts[:1]) + "".join(parts[1:])
    field = f"{where}.{field}" if where and field else (where or field or "body")
    return InvalidInput(f"{field}: {_first_message(exc)}", field=field)


def _first_message(exc: ValidationError) -> str:
    """The message of the first error; for a union (gamma: a number or "scale") the message of
    the member that fits the value's kind (the bound, not "Input should be 'scale'")."""
    errs = exc.errors()
    first = errs[0]
    for err in errs:
        if err.get("loc", ())[:1] == first.get("loc", ())[:1] and err.get("type") != "literal_error":
            return str(err.get("msg", "invalid value"))
    return str(first.get("msg", "invalid value"))


@router.get("", response_model=ModelList, responses=errors(401), dependencies=[Depends(require_read)])
async def list_models(request: Request, registry: RegistryDep) -> OrjsonResponse:
    """``{"models": [ModelInfo, ...]}``; with several learners (``docs/cluster.md``) also
    ``"deployment"``: every model of the deployment with its owner, and the live members."""
    infos = [h.info() for h in registry.handles()]
    if not sees_everything(request):
        infos = [public_model(info) for info in infos]
    cluster = getattr(request.app.state, "cluster", None)
    if cluster is None:
        return OrjsonResponse({"models": infos})
    deployment = await run_in_threadpool(cluster.deployment)
    for info in infos:
        info["owner"] = cluster.member
    return OrjsonResponse({"models": infos, "deployment": deployment})


@router.get(
    "/{name}",
    response_model=ModelInfo,
    responses=errors(401, 404, 422),
    dependencies=[Depends(require_read)],
)
async def get_model(name: ModelName, request: Request, registry: RegistryDep) -> OrjsonResponse:
    """Configuration and statistics: n_support_vectors, t (steps), n_merges, n_seen,
    version (batches applied), last snapshot time.  With several learners (``docs/cluster.md``)
    ``"owner"``: the learner owning it; a model another learner owns is answered from its
    published state (``"published": true``: no stream figures, those are on its owner)."""
    cluster = getattr(request.app.state, "cluster", None)
    if cluster is not None and name not in registry and cluster.others is not None and name in cluster.others:
        info = {**cluster.others.get(name).info(), "published": True}
        info["owner"] = await run_in_threadpool(cluster.owner_of, name)
        return OrjsonResponse(info if sees_everything(request) else public_model(info))
    info = registry.get(name).info()
    if cluster is not None:
        info["owner"] = cluster.member
    if getattr(registry, "feedback", None) is not None:  # served accuracy beside the prequential one
        info["metrics"] = {**info["metrics"], **registry.feedback.figures(name)}
    return OrjsonResponse(info if sees_everything(request) else public_model(info))


@router.put(
    "/{name}",
    response_model=ModelInfo,
    status_code=201,
    responses={
        200: {"model": ModelInfo, "description": "replaced an existing model"},
        **errors(401, 500, *JSON_BODY_ERRORS),  # 500: the first snapshot could not be written
    },
    dependencies=[Depends(require_write)],
    openapi_extra={
        "requestBody": {
            "content": {"application/json": {"schema": ModelCreate.model_json_schema(by_alias=True)}}
        }
    },
)
async def put_model(
    name: ModelName, request: Request, registry: RegistryDep, settings: SettingsDep
) -> OrjsonResponse:
    """Create model ``name`` (201) or replace it with a fresh one (200).

    Fields not given come from the server's ``SVMSTREAM_DEFAULT_*`` settings.  The new
    model is snapshotted at once.
    """
    limit, setting = route_limit(settings, MODEL_BODY_BYTES, "PUT /models/{name}")
    async with body_budget(request, limit, setting):
        body = await read_json_body(request, limit, setting)
        config, specs, schema = await decode_off_loop(body, lambda raw: _model_fields(registry, raw))
        del body
    challengers = new_challengers(config, specs, settings)
    try:
        registry.check_config(config)
    except InvalidInput:
        raise
    except ValueError as exc:
        raise InvalidInput(f"config: {exc}", field="config") from None
    check_challenger_bytes(config, challengers, settings)
    try:
        handle, replaced = await run_in_threadpool(
            registry.create, name, config, challengers=challengers, fields=schema
        )
    except InvalidInput:  # the capacity bounds name their own field
        raise
    except ValueError as exc:
        raise InvalidInput(f"name: {exc}", field="name") from None
    return OrjsonResponse(handle.info(), status_code=200 if replaced else 201)


@router.post(
    "/{name}/flush",
    response_model=FlushResponse,
    responses=errors(401, 404, 409, 422, 429, 500),
    dependencies=[Depends(require_write)],
)
async def flush_model(name: ModelName, registry: RegistryDep) -> OrjsonResponse:
    """Learn every pending example now: close an open warm-up window with what it holds and
    empty the shuffle buffer (the end of a stream or of a replayed file).  409 for a model
    trained by a batch job."""
    before = registry.get(name).view.stats.get("pending", 0)
    view = await applied(registry.flush(name))
    return OrjsonResponse(
        {"model": name, "flushed": before - view.stats.get("pending", 0), **learn_figures(view)}
    )


@router.delete(
    "/{name}",
    response_model=Deleted,
    responses=errors(401, 404, 422),
    dependencies=[Depends(require_write)],
)
async def delete_model(name: ModelName, registry: RegistryDep) -> OrjsonResponse:
    """Delete the model and its snapshot files."""
    await run_in_threadpool(registry.delete, name)
    return OrjsonResponse({"deleted": name})
