"""``/models/{name}/versions`` and ``/models/{name}/rollback``: a model's history
(:mod:`svmstream.app.models.versions`, ``docs/versions.md``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from svmstream.app.api.auth import require_read, require_write
from svmstream.app.api.http import OrjsonResponse, body_budget, read_json_body, route_limit
from svmstream.app.api.routes.models import ModelName, validation_error
from svmstream.app.api.schemas import JSON_BODY_ERRORS, errors
from svmstream.app.ingest.decode import decode_body
from svmstream.app.models.versions import Versions

router = APIRouter(prefix="/models", tags=["versions"])


def versions_of(request: Request) -> Versions:
    return request.app.state.versions


VersionsDep = Annotated[Versions, Depends(versions_of)]


class VersionInfo(BaseModel):
    version: int = Field(description="batches applied (the model_version predictions answer)")
    saved_at: float = Field(description="unix time of the snapshot")
    n_seen: int | None = None
    examples: dict[str, int] | None = Field(None, description="received, learned, pending at that version")
    prequential_accuracy: float | None = Field(
        None, description="over the service's window when it was saved"
    )
    size_bytes: int
    kept_because: str = Field(description="live, recent (within keep_versions), rolled back to, rollback ...")
    fitted: bool


class VersionList(BaseModel):
    model: str
    live_version: int
    keep_versions: int
    max_history_bytes: int | None
    history_bytes: int = Field(description="bytes of the versions listed, on disk")
    versions: list[VersionInfo]


class RollbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # strict: a JSON integer only ("3", true and 2.0 are not versions)
    version: int = Field(ge=0, strict=True, description="a version listed by GET /models/{name}/versions")


ROLLBACK_BODY_BYTES = 4096
"""Byte limit of a ``/rollback`` body (``{"version": 12}`` is 15 bytes)."""


class RollbackResponse(BaseModel):
    model: str
    version: int = Field(description="the new live version (the rollback is a version too)")
    rolled_back_to: int
    from_version: int


@router.get(
    "/{name}/versions",
    response_model=VersionList,
    responses=errors(401, 404, 409),
    dependencies=[Depends(require_read)],
)
async def list_versions(name: ModelName, request: Request, versions: VersionsDep) -> OrjsonResponse:
    """Every version the model's history keeps, newest first, with why it is kept."""

    def listing() -> dict[str, Any]:
        entries = versions.listing(name)
        store = versions.store
        return {
            "model": name,
            "live_version": versions.registry.get(name).view.version,
            "keep_versions": store.keep,
            "max_history_bytes": store.max_bytes,
            "history_bytes": sum(e["size_bytes"] for e in entries),
            "versions": entries,
        }

    return OrjsonResponse(await run_in_threadpool(listing))


@router.post(
    "/{name}/rollback",
    response_model=RollbackResponse,
    responses=errors(401, 404, 409, 429, 500, *JSON_BODY_ERRORS),
    dependencies=[Depends(require_write)],
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": RollbackRequest.model_json_schema()}},
        }
    },
)
async def rollback(name: ModelName, request: Request, versions: VersionsDep) -> OrjsonResponse:
    """Make a version of the model's history the live model, as a new version, and snapshot it
    at once; learning continues from it.  The stream's position does not move back."""
    limit, setting = route_limit(
        request.app.state.settings, ROLLBACK_BODY_BYTES, "POST /models/{name}/rollback"
    )
    async with body_budget(request, limit, setting):
        obj = decode_body(await read_json_body(request, limit, setting))
    try:
        target = RollbackRequest.model_validate(obj).version
    except ValidationError as exc:
        raise validation_error(exc) from None
    return OrjsonResponse(await run_in_threadpool(versions.rollback, name, target))


class SnapshotWritten(BaseModel):
    model: str
    version: int = Field(description="the live version, now in the history")
    written: bool = Field(description="false: that version was saved already")


@router.post(
    "/{name}/snapshot",
    response_model=SnapshotWritten,
    responses=errors(401, 404, 409, 500),
    dependencies=[Depends(require_write)],
)
async def snapshot_now(name: ModelName, versions: VersionsDep) -> OrjsonResponse:
    """Save the live version now (a version to pin or roll back to later)."""

    def write() -> dict[str, Any]:
        versions.store  # noqa: B018  (NoHistory, 409, on a server without snapshots)
        handle = versions.registry.get(name)
        written = versions.registry.snapshot(handle)
        return {"model": name, "version": handle.saved_version, "written": written is not None}

    return OrjsonResponse(await run_in_threadpool(write))
