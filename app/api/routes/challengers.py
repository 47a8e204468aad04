"""``/models/{name}/promote`` and ``/models/{name}/challengers/{index}``: manual control of a
model's challengers (``docs/challengers.md``).  Both run on the model's learner (in order with
its batches) and write a snapshot at once, so that the change survives a restart."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from svmstream.app.api.auth import require_write
from svmstream.app.api.deps import RegistryDep, SettingsDep
from svmstream.app.api.http import OrjsonResponse, body_budget, read_json_body, route_limit
from svmstream.app.api.routes.learn import applied
from svmstream.app.api.routes.models import ModelName, validation_error
from svmstream.app.api.schemas import JSON_BODY_ERRORS, errors
from svmstream.app.ingest.decode import decode_body

router = APIRouter(prefix="/models", tags=["models"])

INDEX_PATTERN = r"^(0|[1-9][0-9]{0,5})$"


class PromoteRequest(BaseModel):
    """Body of ``POST /models/{name}/promote``."""

    model_config = ConfigDict(extra="forbid")
    challenger: int = Field(
        ge=0, strict=True, description="the index of the challenger (GET /models/{name}: challengers)"
    )


PROMOTE_BODY_BYTES = 4096
"""Byte limit of a ``/promote`` body (``{"challenger": 3}`` is 17 bytes)."""

ChallengerIndex = Annotated[
    str,
    Path(
        pattern=INDEX_PATTERN,
        description="the index of the challenger: a decimal integer without sign, point or leading zero",
    ),
]
"""A challenger's index in a path: digits only (``1.0``, ``+1`` and ``01`` are 422 naming
``index``, not index 1), at most 6 of them (a longer one names no challenger: 422 too)."""


class ChallengersResponse(BaseModel):
    """The model's challengers and promotion record after the change."""

    model: str
    version: int
    config: dict[str, Any]
    challengers: list[dict[str, Any]]
    promotion: dict[str, Any] | None


async def _answer(registry, handle, future) -> OrjsonResponse:
    view = await applied(future)
    await run_in_threadpool(registry.snapshot, handle, force=True)
    return OrjsonResponse({"model": handle.name, "version": view.version, "config": handle.config.to_json(),
                           **handle.challengers_info()})  # fmt: skip


@router.post(
    "/{name}/promote",
    response_model=ChallengersResponse,
    responses=errors(401, 404, 409, 429, 500, *JSON_BODY_ERRORS),
    dependencies=[Depends(require_write)],
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": PromoteRequest.model_json_schema()}},
        }
    },
)
async def promote_challenger(
    name: ModelName, request: Request, registry: RegistryDep, settings: SettingsDep
) -> OrjsonResponse:
    """Make challenger ``challenger`` the champion now, whatever its evidence (recorded in the
    history as a manual promotion, counted in ``svmstream_promotions_total``); 404 naming
    ``challenger`` when the model has no such challenger."""
    handle = registry.get(name)
    limit, setting = route_limit(settings, PROMOTE_BODY_BYTES, "POST /models/{name}/promote")
    async with body_budget(request, limit, setting):
        body = await read_json_body(request, limit, setting)
    try:
        index = PromoteRequest.model_validate(decode_body(body) if body.strip() else {}).challenger
    except ValidationError as exc:
        raise validation_error(exc) from None
    return await _answer(registry, handle, handle.submit_promote(index))


@router.delete(
    "/{name}/challengers/{index}",
    response_model=ChallengersResponse,
    responses=errors(401, 404, 409, 422, 429, 500),
    dependencies=[Depends(require_write)],
)
async def delete_challenger(name: ModelName, index: ChallengerIndex, registry: RegistryDep) -> OrjsonResponse:
    """Remove challenger ``index`` (its evidence goes to the history); later ones move up; 404
    naming ``challenger`` when the model has no such challenger."""
    handle = registry.get(name)
    return await _answer(registry, handle, handle.submit_remove_challenger(int(index)))
