"""A JSON body's dense ``X`` read straight into a float64 array (the ``/learn`` fast path).

Decoding ``{"X": [[...], ...], "y": [...]}`` with orjson builds a Python float per value and
``np.asarray`` reads them back: 1.0 + 0.5 ms for 1,000 ijcnn1 rows of 22 values, as much CPU
as learning them (docs/performance.md).  :func:`decode_dense_body` scans the body once in a
numba kernel, reads the ``X`` (or ``x``) member straight into a preallocated array when it is
a plain matrix of JSON numbers (equal-length rows, at least one value each), and decodes only
the rest of the body with :func:`~svmstream.app.ingest.decode.decode_body` (``X`` replaced
by ``0``): the ``y`` list and the envelope.

The values are the ones orjson gives, bit for bit.  A number is converted in the kernel when
Clinger's fast path is exact: at most 18 significant digits with a significand ``<= 2**53``
and a decimal exponent in ``[-22, 22]`` (one correctly rounded IEEE multiplication or
division of two exact doubles); any other number (17 significant digits, huge exponents) is
converted by Python's ``float`` (correctly rounded, as orjson) from its text, which the kernel
has checked against the JSON number grammar.  An integer token keeps numpy's reading of an
integer list (``-0`` is ``0.0``).

Anything else -- booleans, ``null``, ``NaN``, strings, ragged or empty rows, sparse objects,
a second ``X``, a body that is not an object, a body the rest of which is not valid JSON, more
than a quarter of the values needing Python -- returns None, and the caller decodes the whole
body as before (the same checks, the same messages); so does every body until the kernel is
loaded (:func:`kernel_ready`).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from svmstream.app.errors import InvalidInput
from svmstream.app.ingest.decode import MAX_JSON_DEPTH, decode_body
from svmstream.solvers._json_numbers import OK, POW10, scan_dense_json

_READY = threading.Event()
_LOADING = threading.Lock()


def kernel_ready() -> bool:
    """Whether the kernel is compiled (or loaded from numba's cache).  The first call starts
    that in a daemon thread and answers False until it is done: bodies are decoded the usual
    way meanwhile, so a burst of requests at start never waits for numba (32 parallel
    ``/learn`` bodies of 1.6 MB each held their bytes of the server's body budget that long)."""
    if _READY.is_set():
        return True
    if _LOADING.acquire(blocking=False):
        threading.Thread(target=_load, name="decode-dense-load", daemon=True).start()
    return False


def _load() -> None:
    b = np.frombuffer(b'{"X": [[1.5, -2e-3]], "y": [1]}', dtype=np.uint8)
    scan_dense_json(b, np.empty(16), np.empty((4, 3), dtype=np.int64), POW10, MAX_JSON_DEPTH)
    _READY.set()


def decode_dense_body(body: bytes) -> tuple[dict[str, Any], np.ndarray] | None:
    """``(obj, X)`` for a JSON request body whose ``X`` (or ``x``) is a dense matrix of numbers:
    ``obj`` the decoded body with that member's value replaced by the C-contiguous float64
    array ``X`` of shape (n, d) (finite or not: the caller checks), under the key the body used.
    None for any other body (decode it with :func:`~svmstream.app.ingest.decode.decode_body`).
    """
    if not isinstance(body, bytes) or len(body) < 8 or not kernel_ready():
        return None
    b = np.frombuffer(body, dtype=np.uint8)
    out = np.empty((len(body) + 1) // 2, dtype=np.float64)
    slow = np.empty((len(body) // 8 + 32, 3), dtype=np.int64)  # a quarter of the values (+ 16)
    status, start, end, rows, cols, n_slow, key_byte = scan_dense_json(b, out, slow, POW10, MAX_JSON_DEPTH)
    if status != OK or n_slow * 4 > rows * cols:  # (the kernel gives up early on such data)
        return None
    for k, s, e in slow[:n_slow]:
        out[k] = float(body[s:e])
    key = chr(key_byte)
    try:
        obj = decode_body(body[:start] + b"0" + body[end:])
    except InvalidInput:
        return None
    if not isinstance(obj, dict) or obj.get(key) != 0 or isinstance(obj.get(key), bool):
        return None
    obj[key] = out[: rows * cols].reshape(rows, cols)
    return obj, obj[key]
