"""What callers without the token see of jobs, models and the process (docs/deployment.md).

With ``SVMSTREAM_API_TOKEN`` set and reads open (``PROTECT_READS`` off, the default), anyone
on the network may read ``GET /jobs``, ``GET /models`` and ``/health``.  Those views said more
than a reader needs: a worker's exception quoting a line of the data file
(``could not convert string to float: b'SECRET_API_KEY=...'``), server-side data paths,
absolute snapshot paths, worker and server PIDs, the server's RSS.  For a caller who did not
present the token (when one is set), :func:`public_job`, :func:`public_model` and
:func:`public_health` keep the figures and replace those fields: an error becomes a summary
(:func:`summarise_error`: the exception type and the line or row it names, never the text), a
path its file name, a PID and the RSS null.  With the token, or on a server without one
(where every route is open anyway), the views are unchanged.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

from fastapi import Request

from svmstream.app.api.auth import check_token

_LOCATION = re.compile(r"\b(line|row) (\d+)\b")
_KIND = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_PARSING = ("convert", "parse", "not a valid", "not a numeric", "decode", "feature column", "no data rows")


def sees_everything(request: Request) -> bool:
    """True when no token is set, or the request carries the right one (``Bearer``)."""
    expected = request.app.state.settings.token()
    if expected is None:
        return True
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and check_token(expected, given.strip() or None)


def summarise_error(error: str | None) -> str | None:
    """A job error without its text: ``"ValueError: could not parse the data file at line 7"``,
    ``"RuntimeError (details need the API token)"``.  The service's own wording of a worker
    that died (``the worker process ...``) quotes no data and is kept."""
    if error is None or error.startswith("the worker process"):
        return error
    head = error.split(":", 1)[0].strip()
    kind = head if _KIND.fullmatch(head) else "error"
    where = _LOCATION.search(error)
    at = f" at {where.group(1)} {where.group(2)}" if where else ""
    if any(word in error.lower() for word in _PARSING):
        return f"{kind}: could not parse the data file{at}"
    return f"{kind}{at} (details need the API token)"


def _file_name(path: Any) -> Any:
    return PurePath(path).name if isinstance(path, str) and ("/" in path or "\\" in path) else path


def public_job(job: dict[str, Any]) -> dict[str, Any]:
    """A job record without PIDs, paths or quoted data (module docstring)."""
    return {
        **job,
        "pid": None,
        "data": _file_name(job.get("data")),
        "test": _file_name(job.get("test")),
        "error": summarise_error(job.get("error")),
    }


def public_model(info: dict[str, Any]) -> dict[str, Any]:
    """A model's info with its snapshot path reduced to the file name."""
    if "last_snapshot_path" not in info:
        return info
    return {**info, "last_snapshot_path": _file_name(info["last_snapshot_path"])}


def public_health(body: dict[str, Any]) -> dict[str, Any]:
    """``/health`` without the server's PID and RSS."""
    return {**body, "pid": None, "rss_bytes": None}
