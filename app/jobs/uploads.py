"""Uploaded data files of the batch jobs, and what a job's ``data``/``test`` value names.

* :class:`UploadStore`: the files received by ``POST /uploads``, stored as
  ``<jobs_dir>/uploads/<id>.<format><.bz2|.gz>`` (id ``up-`` + 20 hex digits; the format
  from ``?format=``, the file name or the first line, see
  :func:`svmstream.app.jobs.datasets.sniff`).
* :func:`resolve_data_ref`: an upload id, or a path confined to the server's data directory
  (``SVMSTREAM_DATA_DIR``; unset = server paths refused).
* :class:`JobError`: a refused job or upload request, answered with its HTTP status.
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from svmstream.app.errors import ServiceError
from svmstream.app.jobs.datasets import FORMATS, detect_format, sniff

UPLOAD_ID_PATTERN = r"^up-[0-9a-f]{20}$"
"""The id rule as the OpenAPI schema states it (JSON Schema: ``$`` is the end of the input)."""
UPLOAD_ID_RE = re.compile(r"up-[0-9a-f]{20}\Z")  # matched whole (fullmatch): a final newline is no id
COMPRESSIONS = {"bz2": ".bz2", "gzip": ".gz", None: ""}
"""Compression -> file name suffix of a stored upload."""


class JobError(ServiceError, ValueError):
    """A refused job or upload request; ``status`` is the HTTP status (rendered by the
    service's error handler).  A ``ValueError`` as well, as the input errors are."""


@dataclass
class UploadInfo:
    """A stored upload: ``<uploads dir>/<id>.<format><.bz2|.gz>``."""

    id: str
    path: Path
    format: str
    compression: str | None
    bytes: int
    created_at: float

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "format": self.format,
            "compression": self.compression,
            "bytes": self.bytes,
            "created_at": self.created_at,
            "filename": self.path.name,
        }


class UploadStore:
    """Uploaded data files under ``root`` (created on demand).

    Parameters
    ----------
    root : Path
        Directory of the uploads (``<jobs_dir>/uploads``).
    """

    def __init__(self, root: Path):
        self.root = Path(root)

    def new_id(self) -> str:
        return "up-" + secrets.token_hex(10)

    def temp_path(self, upload_id: str) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        return self.root / f".{upload_id}.part"

    def finish(
        self, upload_id: str, temp: Path, fmt: str | None = None, filename: str | None = None
    ) -> UploadInfo:
        """Check a received temp file and give it its final name.

        ``fmt`` (``libsvm``/``csv``) overrides the detection from ``filename``'s extension
        and the first line of the content.

        Raises
        ------
        JobError
            422 for an empty file, an unknown format or content that is not a LIBSVM/CSV
            text (the temp file is removed).
        """
        try:
            size = temp.stat().st_size
            if size == 0:
                raise JobError("file: the upload is empty", field="file")
            with open(temp, "rb") as fh:
                head = fh.read(256 * 1024)
            compression, sniffed = sniff(head)
            if fmt is not None and fmt not in FORMATS:
                raise JobError(f"format: must be one of {', '.join(FORMATS)}, got {fmt!r}", field="format")
            by_name = None
            if filename:
                lower = filename.lower()
                for suffix in (".bz2", ".gz"):
                    if lower.endswith(suffix):
                        lower = lower[: -len(suffix)]
                by_name = "csv" if lower.endswith(".csv") else None
            chosen = fmt or by_name or sniffed
            if sniffed is None:
                what = f"{compression}-compressed data" if compression else "data"
                raise JobError(
                    f"file: the {what} is not a LIBSVM or CSV text file (its first line is neither "
                    "'label index:value ...' nor comma-separated)",
                    field="file",
                )
            final = self.root / f"{upload_id}.{chosen}{COMPRESSIONS[compression]}"
            os.replace(temp, final)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        return UploadInfo(upload_id, final, chosen, compression, size, final.stat().st_mtime)

    def get(self, upload_id: str) -> UploadInfo:
        """Raises :class:`JobError` (404) for an unknown id, 422 for a malformed one."""
        if not UPLOAD_ID_RE.fullmatch(upload_id or ""):
            raise JobError(f"upload id {upload_id!r} is malformed", field="upload", status=422)
        if self.root.is_dir():
            for entry in self.root.iterdir():
                if entry.name.startswith(upload_id + ".") and entry.is_file():
                    fmt, _, comp = entry.name[len(upload_id) + 1 :].partition(".")
                    compression = {"bz2": "bz2", "gz": "gzip"}.get(comp)
                    st = entry.stat()
                    return UploadInfo(upload_id, entry, fmt, compression, st.st_size, st.st_mtime)
        raise JobError(f"upload {upload_id!r} not found", field="upload", status=404)

    def list(self) -> list[UploadInfo]:
        if not self.root.is_dir():
            return []
        out = []
        for entry in sorted(self.root.iterdir()):
            upload_id = entry.name.split(".", 1)[0]
            if UPLOAD_ID_RE.fullmatch(upload_id) and entry.is_file():
                out.append(self.get(upload_id))
        return out

    def delete(self, upload_id: str) -> None:
        """Raises :class:`JobError` (404) for an unknown id."""
        self.get(upload_id).path.unlink(missing_ok=True)


def resolve_data_ref(ref: str, what: str, data_dir: Path | None, uploads: UploadStore) -> tuple[Path, str]:
    """Turn a job's ``data``/``test`` value into ``(path, format)``.

    ``ref`` is an upload id (``up-`` + 20 hex digits) or a path inside ``data_dir``
    (relative to it, or absolute).

    Raises
    ------
    JobError
        403 when server paths are disabled (``data_dir`` unset), when the path contains
        ``..`` or resolves (symbolic links followed) outside ``data_dir``; 404 when the
        file or upload does not exist; 422 for an empty or NUL-containing value.
    """
    if not ref or "\x00" in ref:
        raise JobError(f"{what}: must be an upload id or a path in the data directory", field=what)
    if UPLOAD_ID_RE.fullmatch(ref):
        info = uploads.get(ref)
        return info.path, info.format
    if data_dir is None:
        raise JobError(
            f"{what}: server-side paths are disabled on this server (SVMSTREAM_DATA_DIR is not set); "
            "upload the file with POST /uploads and pass its id",
            field=what,
            status=403,
        )
    path = Path(ref)
    if ".." in path.parts:
        raise JobError(f"{what}: '..' is not allowed in a path (path traversal)", field=what, status=403)
    root = Path(data_dir).resolve()
    full = (path if path.is_absolute() else root / path).resolve()
    if not full.is_relative_to(root):
        raise JobError(f"{what}: {ref!r} is outside the server's data directory", field=what, status=403)
    if not full.is_file():
        raise JobError(f"{what}: no file {ref!r} in the server's data directory", field=what, status=404)
    return full, detect_format(full)
