"""``GET /health``: liveness and the list of models."""

from __future__ import annotations

import os
import time

from fastapi import APIRouter, Depends, Request

from svmstream.app.api.auth import require_read
from svmstream.app.api.deps import RegistryDep
from svmstream.app.api.disclosure import public_health, sees_everything
from svmstream.app.api.http import OrjsonResponse
from svmstream.app.api.schemas import HealthResponse, errors
from svmstream.app.models.warmup import warm_up_status

router = APIRouter(tags=["health"], dependencies=[Depends(require_read)])


def rss_bytes() -> int | None:
    """Resident set size of this process (Linux ``/proc/self/statm``), else None."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


@router.get("/health", response_model=HealthResponse, responses=errors(401))
async def health(request: Request, registry: RegistryDep) -> OrjsonResponse:
    """``{"status": "ok", "models": [...], "uptime_s": ..., "pid": ..., "rss_bytes": ...,
    "solvers": "compiling"|"ready"}`` — answered at once, also while the kernels compile.
    ``pid`` and ``rss_bytes`` are null for a caller without the token when one is set."""
    body = {
        "status": "ok",
        "models": registry.names(),
        "uptime_s": round(time.time() - request.app.state.started_at, 3),
        "pid": os.getpid(),
        "rss_bytes": rss_bytes(),
        "solvers": warm_up_status(),
    }
    return OrjsonResponse(body if sees_everything(request) else public_health(body))
