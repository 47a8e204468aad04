"""``GET /cluster``: the learners of the deployment, each model's owner and the recent
ownership moves (``docs/cluster.md``; 404 on a learner that is not clustered)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from svmstream.app.api.auth import require_read
from svmstream.app.api.http import OrjsonResponse
from svmstream.app.api.schemas import errors
from svmstream.app.errors import ServiceError

router = APIRouter(tags=["cluster"], dependencies=[Depends(require_read)])


@router.get("/cluster", responses=errors(401, 404))
async def cluster(request: Request) -> OrjsonResponse:
    """``{"member", "members": [{"name", "url", "models"}], "models": {name: {"member",
    "fence"}}, "moves": [...]}``."""
    coordinator = getattr(request.app.state, "cluster", None)
    if coordinator is None:
        raise ServiceError("this learner is not part of a cluster (SVMSTREAM_CLUSTER)", status=404)
    return OrjsonResponse(await run_in_threadpool(coordinator.describe))
