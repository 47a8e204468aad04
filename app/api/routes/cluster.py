"""``GET /cluster``: the learners of the deployment, each model's owner and the recent
ownership moves (``docs/cluster.md``; ``{"clustered": false}`` on a server that is not one of
several learners, so that the dashboard's poll is never a 404)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from svmstream.app.api.auth import require_read
from svmstream.app.api.http import OrjsonResponse
from svmstream.app.api.schemas import errors

router = APIRouter(tags=["cluster"], dependencies=[Depends(require_read)])


@router.get("/cluster", responses=errors(401))
async def cluster(request: Request) -> OrjsonResponse:
    """``{"clustered": true, "member", "members": [{"name", "url", "models"}], "models": {name:
    {"member", "fence"}}, "moves": [...]}``; ``{"clustered": false}`` without ``SVMSTREAM_CLUSTER``."""
    coordinator = getattr(request.app.state, "cluster", None)
    if coordinator is None:
        return OrjsonResponse({"clustered": False})
    return OrjsonResponse({"clustered": True, **(await run_in_threadpool(coordinator.describe))})
