"""The dashboard page: ``GET /`` and ``GET /dashboard`` (one static HTML page), and the
static files under ``/static`` (its script and style, the vendored uPlot chart library).

Everything the page loads comes from this app (no CDN): it works offline.  The page itself
is public (it holds no data); its data come from ``GET /events``
(:mod:`svmstream.app.api.routes.events`), which asks for the token when one is configured.
See docs/dashboard.md.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).resolve().parents[2] / "static"
"""``app/static`` (installed: ``svmstream/app/static``, package data)."""
PAGE = STATIC_DIR / "dashboard" / "index.html"

router = APIRouter(tags=["dashboard"])
# a Mount inside a router: FastAPI keeps it when the router is included
router.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")


@router.get("/", include_in_schema=False)
@router.get("/dashboard", include_in_schema=False)
async def dashboard() -> FileResponse:
    """The dashboard page (text/html)."""
    # no-cache: a new version of the page is picked up at once (it is revalidated by ETag)
    return FileResponse(PAGE, media_type="text/html", headers={"Cache-Control": "no-cache"})
