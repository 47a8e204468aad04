"""Versioned, pickle-free persistence of estimator state.

A saved state is one file::

    b"SVMSTATE" | format version (uint32 LE) | JSON length (uint64 LE) | JSON header | payload

The JSON header holds the estimator's metadata (``meta``), the payload length and its
SHA-256.  In format 2 (written since 2026-12) the payload is the arrays' raw bytes, each at a
multiple of :data:`ALIGN`, and the header's ``"arrays"`` lists ``[name, dtype string, shape,
order, offset, nbytes]`` for each, so a reader takes an array with one ``numpy.frombuffer``
(0.2 ms for a 21-array model against 4 ms through ``numpy.load`` of an ``.npz``; the cost of
restoring a model a learner gains, ``docs/cluster.md``) or seeks to the arrays it needs
(:func:`array_index`).  Format 1 files (an ``.npz`` archive written by :func:`numpy.savez`)
are still read, with ``allow_pickle=False``.  Object dtypes are refused in both.  A truncated
or altered file fails the length, index or checksum test and raises
:class:`CorruptStateError`; nothing is ever unpickled.

Every estimator that can be saved implements

* ``get_state() -> (arrays: dict[str, np.ndarray], meta: dict)`` where ``meta`` is
  JSON-serialisable and contains ``"estimator": <class name>``, and
* ``from_state(arrays, meta)`` (a classmethod) that rebuilds an identical estimator.

Classes register themselves with :func:`register_estimator` so that
:func:`estimator_from_state` can rebuild any of them by name.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import math
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

MAGIC = b"SVMSTATE"
#: The format written; :data:`READABLE` are the formats read.
FORMAT_VERSION = 2
READABLE = (1, 2)
#: Byte alignment of each array in a format-2 payload.
ALIGN = 16
_HEADER = struct.Struct("<IQ")

_ESTIMATORS: dict[str, type] = {}
_UPGRADES: list = []


class CorruptStateError(ValueError):
    """Raised when a saved state is truncated, altered or of an unknown format."""


def register_estimator(cls: type) -> type:
    """Class decorator: make ``cls`` loadable by :func:`estimator_from_state`."""
    _ESTIMATORS[cls.__name__] = cls
    return cls


def register_upgrade(upgrade):
    """Register ``upgrade(meta) -> meta``: rewrites the meta of a state saved in an older
    layout (e.g. a budgeted estimator that carried the streaming stages) before it is loaded;
    returns ``upgrade``."""
    _UPGRADES.append(upgrade)
    return upgrade


def estimator_from_state(arrays: dict[str, np.ndarray], meta: dict[str, Any]):
    """Rebuild a registered estimator from ``(arrays, meta)`` (after the registered upgrades).

    Raises
    ------
    CorruptStateError
        If ``meta["estimator"]`` names no registered class.
    """
    if not _UPGRADES:
        # the streaming pipeline registers its upgrade; by name at call time, as below
        importlib.import_module(__package__).load_estimators()
    for upgrade in _UPGRADES:
        meta = upgrade(meta)
    name = meta.get("estimator")
    cls = _ESTIMATORS.get(name)
    if cls is None:
        # Loading the package's estimators registers every one.  By name, at call time: the
        # families import this module, so a static import here would be a cycle.
        importlib.import_module(__package__).load_estimators()

        cls = _ESTIMATORS.get(name)
    if cls is None:
        raise CorruptStateError(f"unknown estimator {name!r} in saved state")
    return cls.from_state(arrays, meta)


def encode_state(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> bytes:
    """Serialise ``arrays`` (name -> ndarray, no object dtype) and JSON ``meta`` to bytes
    (format :data:`FORMAT_VERSION`; the module docstring has the layout)."""
    parts: list = []
    index: list[list] = []
    offset = 0
    for key, value in arrays.items():
        value = np.asarray(value)
        if value.dtype.hasobject:
            raise TypeError(f"array {key!r} has object dtype; only plain numeric arrays are saved")
        order = "F" if value.ndim > 1 and value.flags.f_contiguous and not value.flags.c_contiguous else "C"
        raw = np.ravel(value, order=order).view(np.uint8)  # a view of a contiguous array: no copy
        pad = -offset % ALIGN
        if pad:
            parts.append(bytes(pad))
            offset += pad
        index.append([key, value.dtype.str, list(value.shape), order, offset, raw.nbytes])
        parts.append(raw)
        offset += raw.nbytes
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    header = json.dumps(
        {
            "format_version": FORMAT_VERSION,
            "payload_bytes": offset,
            "payload_sha256": digest.hexdigest(),
            "arrays": index,
            "meta": meta,
        },
        sort_keys=True,
    ).encode()
    # the arrays' bytes are copied once, into the result (as format 1 did)
    return b"".join((MAGIC, _HEADER.pack(FORMAT_VERSION, len(header)), header, *parts))


def array_index(
    header: dict[str, Any], payload_bytes: int
) -> list[tuple[str, np.dtype, tuple, str, int, int]]:
    """The checked ``"arrays"`` of a format-2 header: ``(name, dtype, shape, order, offset,
    nbytes)`` each, inside ``payload_bytes``, no object dtype, the shape's size matching.

    Raises
    ------
    CorruptStateError
        On any entry that does not hold.
    """
    out = []
    try:
        for name, dtype, shape, order, offset, nbytes in header["arrays"]:
            dt = np.dtype(dtype)
            shape = tuple(int(n) for n in shape)
            if (
                not isinstance(name, str)
                or dt.hasobject
                or order not in ("C", "F")
                or min(shape, default=0) < 0
                or type(offset) is not int
                or type(nbytes) is not int
                or offset < 0
                or offset + nbytes > payload_bytes
                or math.prod(shape) * dt.itemsize != nbytes
            ):
                raise ValueError(f"array {name!r}: bad entry")
            out.append((name, dt, shape, order, offset, nbytes))
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptStateError(f"bad array index: {exc}") from exc
    return out


def array_from(buffer, dtype: np.dtype, shape: tuple, order: str, offset: int = 0) -> np.ndarray:
    """The array of ``shape`` at ``offset`` in ``buffer`` (a view: writable when ``buffer``
    is, e.g. a ``bytearray``)."""
    count = math.prod(shape)
    if count == 0:
        return np.empty(shape, dtype=dtype, order=order)
    return np.frombuffer(buffer, dtype=dtype, count=count, offset=offset).reshape(shape, order=order)


def decode_state(blob: bytes) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Inverse of :func:`encode_state`.

    Raises
    ------
    CorruptStateError
        On a wrong magic, unknown version, truncation or checksum mismatch.
    """
    header, payload = _checked(blob)
    if header["format_version"] == 1:
        try:
            with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
                return {k: npz[k] for k in npz.files}, header["meta"]
        except Exception as exc:  # zipfile / format errors
            raise CorruptStateError(f"unreadable payload: {exc}") from exc
    arrays = {
        name: array_from(payload, dtype, shape, order, offset).copy(order="K")
        for name, dtype, shape, order, offset, _ in array_index(header, len(payload))
    }
    return arrays, header["meta"]


def decode_meta(blob: bytes) -> dict[str, Any]:
    """The ``meta`` of a saved state, with every check of :func:`decode_state` (magic,
    version, lengths, the payload's SHA-256) but without reading the arrays: what a service
    needs to list a model before it decodes it (about 10x cheaper for a small model).

    Raises
    ------
    CorruptStateError
        As :func:`decode_state` (an ``.npz`` payload that passes its checksum but does not
        load is found only by :func:`decode_state`).
    """
    return _checked(blob)[0]["meta"]


def _checked(blob: bytes) -> tuple[dict[str, Any], memoryview]:
    """``(header, payload)`` of a state whose magic, version, lengths and checksum are right
    (``header["format_version"]``: the version read from the file's fixed header)."""
    if len(blob) < len(MAGIC) + _HEADER.size or not blob.startswith(MAGIC):
        raise CorruptStateError("not an svmstream state file (bad magic or too short)")
    version, header_len = _HEADER.unpack_from(blob, len(MAGIC))
    if version not in READABLE:
        raise CorruptStateError(f"unsupported state format version {version}")
    start = len(MAGIC) + _HEADER.size
    if len(blob) < start + header_len:
        raise CorruptStateError("truncated header")
    try:
        header = json.loads(blob[start : start + header_len])
    except ValueError as exc:
        raise CorruptStateError(f"unreadable header: {exc}") from exc
    payload = memoryview(blob)[start + header_len :]
    if len(payload) != header.get("payload_bytes"):
        raise CorruptStateError(f"truncated payload: {len(payload)} of {header.get('payload_bytes')} bytes")
    if hashlib.sha256(payload).hexdigest() != header.get("payload_sha256"):
        raise CorruptStateError("payload checksum mismatch")
    if not isinstance(header.get("meta"), dict):
        raise CorruptStateError("header without meta")
    header["format_version"] = version
    return header, payload


def write_atomic(
    path: str | os.PathLike, data: bytes, before_replace: Callable[[], None] | None = None
) -> None:
    """Write ``data`` to ``path`` atomically: temp file in the same directory, fsync, rename.

    ``before_replace``, if given, runs after the temp file is on disk and right before the
    rename (e.g. a fencing check); if it raises, the temp file is removed and nothing is renamed.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    if before_replace is not None:
        try:
            before_replace()
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def save_estimator(estimator, path: str | os.PathLike) -> None:
    """Atomically save an estimator implementing ``get_state`` to ``path``."""
    arrays, meta = estimator.get_state()
    write_atomic(path, encode_state(arrays, meta))


def load_estimator(path: str | os.PathLike):
    """Load an estimator saved by :func:`save_estimator`.

    Raises
    ------
    CorruptStateError
        If the file is truncated, altered or names an unknown estimator.
    """
    arrays, meta = decode_state(Path(path).read_bytes())
    return estimator_from_state(arrays, meta)
