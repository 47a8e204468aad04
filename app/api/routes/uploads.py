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

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from svmstream.app.api.auth import require_read, require_write
from svmstream.app.api.deps import SettingsDep
from svmstream.app.api.http import OrjsonResponse
from svmstream.app.api.schemas import ErrorResponse
from svmstream.app.errors import InvalidInput, PayloadTooLarge
from svmstream.app.jobs.uploads import UploadStore

router = APIRouter(prefix="/uploads", tags=["uploads"])

WRITE_CHUNK = 1024 * 1024


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
    dependencies=[Depends(require_write)],
    responses={401: {"model": ErrorResponse}, 413: {"model": ErrorResponse}, 422: {"model": ErrorResponse}},
)
async def upload(
    request: Request, settings: SettingsDep, filename: str | None = None, format: str | None = None
) -> OrjsonResponse:
    """Store a data file; answers 201 ``{"id", "format", "compression", "bytes", ...}``.

    Query parameters: ``filename`` (raw bodies: its extension tells ``.csv``), ``format``
    (``libsvm`` or ``csv``: overrides the detection).
    """
    limit = settings.max_upload_bytes
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
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


@router.get("", dependencies=[Depends(require_read)])
async def list_uploads(request: Request) -> OrjsonResponse:
    """``{"uploads": [{"id", "format", "compression", "bytes", "created_at", "filename"}, ...]}``."""
    infos = await run_in_threadpool(uploads_of(request).list)
    return OrjsonResponse({"uploads": [i.to_json() for i in infos]})


@router.delete(
    "/{upload_id}",
    dependencies=[Depends(require_write)],
    responses={401: {"model": ErrorResponse}, 404: {"model": ErrorResponse}},
)
async def delete_upload(upload_id: str, request: Request) -> OrjsonResponse:
    """Delete an uploaded file (a running job that has opened it keeps reading it; a queued
    job that names it fails)."""
    await run_in_threadpool(uploads_of(request).delete, upload_id)
    return OrjsonResponse({"deleted": upload_id})
