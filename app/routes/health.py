"""``GET /health``: liveness and the list of models."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request

from app.http import OrjsonResponse
from app.routes.deps import registry_of

router = APIRouter(tags=["health"])


@router.get("/health")
async def health(request: Request) -> OrjsonResponse:
    """``{"status": "ok", "models": [...], "uptime_s": ...}``."""
    return OrjsonResponse(
        {"status": "ok", "models": registry_of(request).names(),
         "uptime_s": round(time.time() - request.app.state.started_at, 3)}
    )
