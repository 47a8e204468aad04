"""Versioned, pickle-free persistence of estimator state.

A saved state is one file::

    b"SVMSTATE" | format version (uint32 LE) | JSON length (uint64 LE) | JSON header | NPZ payload

The JSON header holds the estimator's metadata (``meta``), the payload length and its
SHA-256.  The payload is an ``.npz`` archive written by :func:`numpy.savez` and read back
with ``allow_pickle=False``, so object arrays are refused.  A truncated or altered file
fails the length or checksum test and raises :class:`CorruptStateError`; nothing is ever
unpickled.

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
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

MAGIC = b"SVMSTATE"
FORMAT_VERSION = 1
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
    """Serialise ``arrays`` (name -> ndarray, no object dtype) and JSON ``meta`` to bytes."""
    for key, value in arrays.items():
        if np.asarray(value).dtype == object:
            raise TypeError(f"array {key!r} has object dtype; only plain numeric arrays are saved")
    buffer = io.BytesIO()
    np.savez(buffer, **{k: np.asarray(v) for k, v in arrays.items()})
    with buffer.getbuffer() as payload:  # the payload without a copy: one copy in all, the result
        header = json.dumps(
            {
                "format_version": FORMAT_VERSION,
                "payload_bytes": payload.nbytes,
                "payload_sha256": hashlib.sha256(payload).hexdigest(),
                "meta": meta,
            },
            sort_keys=True,
        ).encode()
        return b"".join((MAGIC, _HEADER.pack(FORMAT_VERSION, len(header)), header, payload))


def decode_state(blob: bytes) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Inverse of :func:`encode_state`.

    Raises
    ------
    CorruptStateError
        On a wrong magic, unknown version, truncation or checksum mismatch.
    """
    meta, payload = _checked(blob)
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except Exception as exc:  # zipfile / format errors
        raise CorruptStateError(f"unreadable payload: {exc}") from exc
    return arrays, meta


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
    return _checked(blob)[0]


def _checked(blob: bytes) -> tuple[dict[str, Any], memoryview]:
    """``(meta, payload)`` of a state whose magic, version, lengths and checksum are right."""
    if len(blob) < len(MAGIC) + _HEADER.size or not blob.startswith(MAGIC):
        raise CorruptStateError("not an svmstream state file (bad magic or too short)")
    version, header_len = _HEADER.unpack_from(blob, len(MAGIC))
    if version != FORMAT_VERSION:
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
    return header["meta"], payload


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
