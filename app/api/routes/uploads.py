"""``/uploads``: data files for batch jobs (LIBSVM or CSV, optionally .bz2/.gz).

``POST /uploads`` takes either a ``multipart/form-data`` body (the first file part, e.g.
``curl -F file=@ijcnn1.bz2``) or the raw file as the body (``curl --data-binary @f.csv
'/uploads?filename=f.csv'``).  The size limit is ``SVMSTREAM_MAX_UPLOAD_BYTES`` (413 beyond,
checked on ``Content-Length`` first and while streaming).  The body is streamed to disk,
then the format is taken from ``?format=`` or the file name or the first line; the answer
carries the ``id`` to pass as ``data``/``test`` of ``POST /jobs``.  The content is only
parsed by the job's worker (a file that fails to parse fails the job, with the reason).
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated

import fastapi
from fastapi import APIRouter, Depends, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from svmstream.app.api.auth import require_read, require_write
from svmstream.app.api.deps import SettingsDep
from svmstream.app.api.http import OrjsonResponse
from svmstream.app.api.schemas import Deleted, UploadCreated, UploadList, errors
from svmstream.app.errors import InvalidInput, PayloadTooLarge
from svmstream.app.jobs.uploads import UPLOAD_ID_PATTERN, UploadStore

router = APIRouter(prefix="/uploads", tags=["uploads"])

WRITE_CHUNK = 1024 * 1024

# the schema states the id's pattern; the store checks it (422 "upload id ... is malformed")
UploadId = Annotated[
    str,
    fastapi.Path(description="an id from POST /uploads", json_schema_extra={"pattern": UPLOAD_ID_PATTERN}),
]

# The body is the file itself (any content type but multipart) or a multipart form whose first
# file part is the file; an empty file is refused (422), so the schema asks for one byte at least.
UPLOAD_BODY = {
    "required": True,
    "content": {
        "application/octet-stream": {"schema": {"type": "string", "format": "binary", "minLength": 1}},
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "properties": {
                    "file": {"type": "string", "format": "binary", "minLength": 1},
                    "format": {"type": "string", "enum": ["libsvm", "csv"]},
                },
                "required": ["file"],
            }
        },
    },
}


def uploads_of(request: Request) -> UploadStore:
    return request.app.state.jobs.uploads


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"body: upload exceeds MAX_UPLOAD_BYTES={limit}", field="body")


async def _limited(request: Request, limit: int) -> AsyncIterator[bytes]:
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise _too_large(limit)
        yield chunk


def _copy_file(src, dst: Path) -> None:
    src.seek(0)
    with open(dst, "wb") as out:
        shutil.copyfileobj(src, out, WRITE_CHUNK)


@router.post(
    "",
    status_code=201,
    response_model=UploadCreated,
    dependencies=[Depends(require_write)],
    responses=errors(400, 401, 413, 422),
    openapi_extra={"requestBody": UPLOAD_BODY},
)
async def upload(
    request: Request,
    settings: SettingsDep,
    filename: str | None = None,
    format: Annotated[str | None, Query(pattern="^(libsvm|csv)$")] = None,
) -> OrjsonResponse:
    """Store a data file; answers 201 ``{"id", "format", "compression", "bytes", ...}``.

    Query parameters: ``filename`` (raw bodies: its extension tells ``.csv``), ``format``
    (``libsvm`` or ``csv``: overrides the detection).
    """
    limit = settings.max_upload_bytes
    declared = request.headers.get("content-length")
    if declared is not None:
        if not (declared.strip().isascii() and declared.strip().isdigit()):
            raise InvalidInput("body: invalid Content-Length header", field="body", status=400)
        if int(declared) > limit:
            raise _too_large(limit)
    store = uploads_of(request)
    upload_id = store.new_id()
    temp = store.temp_path(upload_id)
    ctype = request.headers.get("content-type", "")
    try:
        if ctype.lower().startswith("multipart/form-data"):
            parser = MultiPartParser(request.headers, _limited(request, limit), max_files=1, max_fields=20)
            try:
                form = await parser.parse()
            except MultiPartException as exc:
                raise InvalidInput(f"body: {exc.message}", field="body", status=400) from None
            files = [(key, value) for key, value in form.multi_items() if isinstance(value, UploadFile)]
            if not files:
                raise InvalidInput("file: the multipart body has no file part", field="file")
            part = files[0][1]
            try:
                await run_in_threadpool(_copy_file, part.file, temp)
            finally:
                await part.close()
            filename = filename or part.filename
            format = format or (form.get("format") if isinstance(form.get("format"), str) else None)
        else:
            with open(temp, "wb") as out:
                buffer = bytearray()
                async for chunk in _limited(request, limit):
                    buffer += chunk
                    if len(buffer) >= WRITE_CHUNK:
                        await run_in_threadpool(out.write, bytes(buffer))
                        buffer.clear()
                if buffer:
                    await run_in_threadpool(out.write, bytes(buffer))
        info = await run_in_threadpool(store.finish, upload_id, temp, format, filename)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return OrjsonResponse({**info.to_json(), "original_filename": filename}, status_code=201)


@router.get("", response_model=UploadList, responses=errors(401), dependencies=[Depends(require_read)])
async def list_uploads(request: Request) -> OrjsonResponse:
    """``{"uploads": [{"id", "format", "compression", "bytes", "created_at", "filename"}, ...]}``."""
    infos = await run_in_threadpool(uploads_of(request).list)
    return OrjsonResponse({"uploads": [i.to_json() for i in infos]})


@router.delete(
    "/{upload_id}",
    response_model=Deleted,
    dependencies=[Depends(require_write)],
    responses=errors(401, 404, 422),
)
async def delete_upload(upload_id: UploadId, request: Request) -> OrjsonResponse:
    """Delete an uploaded file (a running job that has opened it keeps reading it; a queued
    job that names it fails)."""
    await run_in_threadpool(uploads_of(request).delete, upload_id)
    return OrjsonResponse({"deleted": upload_id})
