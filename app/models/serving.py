"""The serving encoding of a snapshot: what a prediction replica needs, without the rows kept
for learning (``docs/deployment.md``, "Prediction replicas").

A learner's snapshot holds, besides the model predictions read (support vectors,
coefficients, scaling, calibration, classes, counters), rows kept only for learning: the
rehearsal memory (``reh_X``, ``reh_y``, ``reh_alpha``: up to 20,000 rows by default), the run
guard's reservoirs (``pp_res_X``) and the shuffle buffer (``pp_buf_X``, ``pp_buf_y``; the
``pp_sbuf_*``/``pp_sres_*`` arrays of sparse rows).  An ijcnn1 model at B = 500 saves 4.05 MB,
3.9 MB of it such rows; its serving encoding is 0.2 MB.

:func:`serving_blob` encodes a snapshot's ``(arrays, meta)`` (:meth:`SnapshotStore.write`'s,
from memory) in the snapshot format (:func:`svmstream.solvers.persistence.encode_state`) with
those arrays left out and their shapes and dtypes listed in ``meta["service"]["omitted"]``.
:func:`decode_serving` decodes it and puts zero-filled arrays of those shapes in their place,
so the estimator rebuilds exactly as from the file (same counters, same figures, the same
decision values: predictions never read those rows) — but it must not learn from them, and a
prediction replica never learns (``ModelHandle.follower_of``) nor writes snapshots.
"""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from svmstream.app.errors import ServiceError
from svmstream.app.models.snapshots import RestoredModel, restored_from_state
from svmstream.solvers.persistence import (
    _HEADER,
    MAGIC,
    READABLE,
    CorruptStateError,
    array_from,
    array_index,
    decode_state,
    encode_state,
)

#: Bytes read at a time while a file's checksum is verified (:func:`read_serving`).
CHUNK = 1 << 20

#: Arrays no prediction reads, by name (after any ``ovr{k}__`` or ``challengers.{i}.`` prefix).
OMITTED = re.compile(
    r"(?:^|__|\.)(?:reh_X|reh_y|reh_w|reh_alpha|pp_buf_X|pp_buf_y|pp_buf_w|pp_res_X|"
    r"pp_sbuf_data|pp_sbuf_indices|pp_sres_data|pp_sres_indices)\Z"
)


def zeros(shape: tuple[int, ...], dtype) -> np.ndarray:
    """A read-only array of zeros of ``shape`` that takes no memory (a broadcast of one zero):
    the stages rebuilding from it leave their zero-filled arrays unwritten, so the rows a
    serving state omits cost a replica or a pinned version nothing resident."""
    return np.broadcast_to(np.zeros((), dtype=dtype), shape)


def serving_state(
    arrays: dict[str, np.ndarray], meta: dict[str, Any]
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``(arrays, meta)`` of a snapshot (``meta["service"]`` set) without the arrays matching
    :data:`OMITTED`; ``meta["service"]["omitted"]``: name -> ``[shape, dtype string]`` of each
    array left out (empty arrays are kept).  Neither input is modified."""
    kept: dict[str, np.ndarray] = {}
    omitted: dict[str, list] = {}
    for name, value in arrays.items():
        value = np.asarray(value)
        if value.size and OMITTED.search(name):
            omitted[name] = [list(value.shape), value.dtype.str]
        else:
            kept[name] = value
    out = dict(meta)
    out["service"] = {**meta["service"], "omitted": omitted}
    return kept, out


def serving_blob(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> bytes:
    """The serving encoding (bytes) of a snapshot's ``(arrays, meta)`` (:func:`serving_state`)."""
    return encode_state(*serving_state(arrays, meta))


def decode_serving(blob: bytes) -> RestoredModel:
    """Decode the bytes of :func:`serving_blob` (or of a whole snapshot file) into the model
    a replica installs, the omitted arrays zero-filled.

    Raises
    ------
    CorruptStateError
        If the bytes are truncated, fail their checksum, list an unusable omitted array, or do
        not rebuild a model.
    """
    arrays, meta = decode_state(blob)
    omitted = meta.get("service", {}).get("omitted") or {}
    try:
        for name, (shape, dtype) in omitted.items():
            if name in arrays or not OMITTED.search(name):
                raise ValueError(f"array {name!r} cannot be omitted")
            arrays[name] = zeros(tuple(int(n) for n in shape), np.dtype(dtype))
    except (TypeError, ValueError) as exc:
        raise CorruptStateError(f"bad omitted arrays: {exc}") from exc
    return restored_from_state(arrays, meta, None)


def _file_header(fh) -> tuple[dict[str, Any], int, int]:
    """``(header, payload offset, payload length)`` of an open state file (magic, version and
    lengths checked).  Raises CorruptStateError."""
    head = fh.read(len(MAGIC) + _HEADER.size)
    if len(head) < len(MAGIC) + _HEADER.size or not head.startswith(MAGIC):
        raise CorruptStateError("not an svmstream state file (bad magic or too short)")
    version, header_len = _HEADER.unpack_from(head, len(MAGIC))
    if version not in READABLE:
        raise CorruptStateError(f"unsupported state format version {version}")
    raw = fh.read(header_len)
    if len(raw) < header_len:
        raise CorruptStateError("truncated header")
    try:
        header = json.loads(raw)
    except ValueError as exc:
        raise CorruptStateError(f"unreadable header: {exc}") from exc
    if not isinstance(header, dict) or not isinstance(header.get("meta"), dict):
        raise CorruptStateError("header without meta")
    header["format_version"] = version
    return header, len(head) + header_len, int(header.get("payload_bytes") or 0)


def _verify_payload(fh, start: int, length: int) -> str:
    """The payload's SHA-256 (its length checked), reading :data:`CHUNK` bytes at a time (the file
    is never held whole).  Raises CorruptStateError."""
    fh.seek(0, 2)
    if fh.tell() - start != length:
        raise CorruptStateError(f"truncated payload: {fh.tell() - start} of {length} bytes")
    fh.seek(start)
    digest, buffer = hashlib.sha256(), bytearray(CHUNK)
    view = memoryview(buffer)
    while True:
        n = fh.readinto(buffer)
        if not n:
            break
        digest.update(view[:n])
    return digest.hexdigest()


def read_serving(path: Path, reserve: Callable[[int], None] | None = None) -> tuple[RestoredModel, int]:
    """The serving state of a snapshot *file* and its decoded bytes (the arrays kept): the
    file's checksum is verified in chunks and only the arrays predictions read are decoded
    (those of :data:`OMITTED` are zero-filled, as :func:`decode_serving` does), so a pinned
    version costs its support vectors, coefficients, scaler and calibrator, never its shuffle
    buffer or rehearsal memory, even while it is read.  ``reserve(bytes)``, when given, is
    called with the bytes the arrays to decode take (from the payload's directory) before they
    are read: it may refuse (raise) or make room.

    Raises
    ------
    CorruptStateError
        If the file is unreadable, truncated, fails its checksum or does not rebuild a model.
    """
    try:
        with open(path, "rb") as fh:
            header, start, length = _file_header(fh)
            if _verify_payload(fh, start, length) != header.get("payload_sha256"):
                raise CorruptStateError("payload checksum mismatch")
            fh.seek(start)
            if header["format_version"] == 1:
                arrays, kept = _serving_arrays(fh, reserve)
            else:
                arrays, kept = _serving_arrays_indexed(fh, start, array_index(header, length), reserve)
    except OSError as exc:
        raise CorruptStateError(f"unreadable: {exc}") from exc
    return restored_from_state(arrays, header["meta"], Path(path)), kept


def _serving_arrays_indexed(fh, start: int, index: list, reserve) -> tuple[dict[str, np.ndarray], int]:
    """``(arrays, bytes)`` of the format-2 payload at ``start`` in ``fh`` (its ``index``,
    :func:`~svmstream.solvers.persistence.array_index`): those of :data:`OMITTED` as
    :func:`zeros`, the others read into buffers of their own; ``bytes``: the arrays read
    (``reserve`` is called with it first)."""
    kept = sum(nbytes for name, _, _, _, _, nbytes in index if not OMITTED.search(name))
    if reserve is not None:
        reserve(kept)
    out = {}
    for name, dtype, shape, order, offset, nbytes in index:
        if OMITTED.search(name):
            out[name] = zeros(shape, dtype)
            continue
        buffer = bytearray(nbytes)
        fh.seek(start + offset)
        if fh.readinto(buffer) != nbytes:
            raise CorruptStateError(f"truncated array {name!r}")
        out[name] = array_from(buffer, dtype, shape, order)
    return out, int(kept)


def _serving_arrays(fh, reserve: Callable[[int], None] | None) -> tuple[dict[str, np.ndarray], int]:
    """``(arrays, bytes)`` of a format-1 (``.npz``) payload at ``fh``'s position: those of
    :data:`OMITTED` as :func:`zeros` of their shape and dtype (read from their ``.npy`` headers
    only); ``bytes``: the members decoded (``reserve`` is called with it first)."""
    try:
        with zipfile.ZipFile(fh) as zf:
            infos = zf.infolist()
            kept = sum(i.file_size for i in infos if not OMITTED.search(i.filename.removesuffix(".npy")))
            if reserve is not None:
                reserve(kept)
            out = {}
            for member in zf.namelist():
                name = member[:-4] if member.endswith(".npy") else member
                with zf.open(member) as f:
                    if OMITTED.search(name):
                        version = np.lib.format.read_magic(f)
                        read_header = (
                            np.lib.format.read_array_header_1_0
                            if version == (1, 0)
                            else np.lib.format.read_array_header_2_0
                        )
                        shape, _, dtype = read_header(f)
                        out[name] = zeros(shape, dtype)
                    else:
                        out[name] = np.lib.format.read_array(f, allow_pickle=False)
            return out, int(kept)
    except (CorruptStateError, ServiceError):
        raise
    except Exception as exc:  # zipfile / format errors
        raise CorruptStateError(f"unreadable payload: {exc}") from exc
