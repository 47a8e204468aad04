"""Numba kernels that read a JSON body's dense matrix of numbers straight into float64.

The service's ``/learn`` fast path (:mod:`svmstream.app.ingest.decode_dense`, which documents
the rules) calls :func:`scan_dense_json`.  Only the byte scan lives here: one kernel per loop,
because a call of another jitted function per value cost 3 x the whole scan (measured: 0.8 ms
instead of 0.26 for 22,000 values, ``inline="always"`` included).
"""

from __future__ import annotations

import numba
import numpy as np

POW10 = np.array([10.0**k for k in range(23)], dtype=np.float64)  # exact doubles 1e0..1e22
_MAX_EXACT = 1 << 53
_MAX_DIGITS = 18  # significant digits kept: < 10**18 fits int64

# kernel status codes
OK, _NO = 0, 1


@numba.njit(nogil=True, cache=True)
def _ws(b, i):
    n = b.shape[0]
    while i < n and (b[i] == 32 or b[i] == 10 or b[i] == 13 or b[i] == 9):
        i += 1
    return i


@numba.njit(nogil=True, cache=True)
def _skip_string(b, i):
    """``b[i]`` is a quote: the index after the closing quote, or -1."""
    n = b.shape[0]
    i += 1
    while i < n:
        c = b[i]
        if c == 34:
            return i + 1
        i += 2 if c == 92 else 1
    return -1


@numba.njit(nogil=True, cache=True)
def _skip_value(b, i, max_depth):
    """The index after the JSON value starting at ``b[i]`` (not validated: the rest of the body
    is decoded by orjson), or -1 when it does not end or nests deeper than ``max_depth``."""
    n = b.shape[0]
    if b[i] != 34 and b[i] != 91 and b[i] != 123:  # a scalar: up to the next separator
        while i < n and b[i] not in (44, 93, 125, 32, 10, 13, 9):
            i += 1
        return i
    depth = 0
    while i < n:
        c = b[i]
        if c == 34:
            i = _skip_string(b, i)
            if i < 0:
                return -1
            if depth == 0:
                return i
            continue
        if c == 91 or c == 123:
            depth += 1
            if depth > max_depth:
                return -1
        elif c == 93 or c == 125:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


# size: one numba kernel, the loop over every byte and value of the matrix (a call per value: 3 x slower)
@numba.njit(nogil=True, cache=True)
def _matrix(b, i, out, slow, pow10):
    """Read ``[[n, ...], ...]`` at ``b[i]`` into ``out`` (flat).  Returns ``(status, end, rows,
    cols, n_slow)``; ``slow`` gets ``(flat index, start, end)`` of each value left to Python.

    A number is converted here when Clinger's fast path is exact (see the module), left to
    Python (``slow``) when it is a valid JSON number with more digits or a larger exponent,
    and the whole matrix refused (status ``_NO``) on anything else, including an integer token
    of more than 18 digits (numpy reads such a list otherwise)."""
    n = b.shape[0]
    bad = (_NO, i, 0, 0, 0)
    if i >= n or b[i] != 91:
        return bad
    i += 1
    rows, cols, k, n_slow, width = 0, -1, 0, 0, 0
    row_open = False
    while True:
        while i < n and (b[i] == 32 or b[i] == 10 or b[i] == 13 or b[i] == 9):
            i += 1
        if i >= n:
            return bad
        if not row_open:  # expect a row
            if b[i] != 91:
                return bad
            row_open, width = True, 0
            i += 1
            continue
        # a number
        start = i
        neg = b[i] == 45
        if neg:
            i += 1
        if i >= n or b[i] < 48 or b[i] > 57:
            return bad
        sig, kept, exp10, inexact, is_int = 0, 0, 0, False, True
        if b[i] == 48:
            i += 1
            if i < n and 48 <= b[i] <= 57:
                return bad  # a leading zero
        else:
            while i < n and 48 <= b[i] <= 57:
                if kept < _MAX_DIGITS:
                    sig = sig * 10 + (b[i] - 48)
                    kept += 1
                else:
                    exp10 += 1
                    inexact = inexact or b[i] != 48
                i += 1
        if i < n and b[i] == 46:
            is_int = False
            i += 1
            if i >= n or b[i] < 48 or b[i] > 57:
                return bad
            while i < n and 48 <= b[i] <= 57:
                if kept < _MAX_DIGITS:
                    if sig != 0 or b[i] != 48:
                        kept += 1
                    sig = sig * 10 + (b[i] - 48)
                    exp10 -= 1
                else:
                    inexact = inexact or b[i] != 48
                i += 1
        if i < n and (b[i] == 101 or b[i] == 69):
            is_int = False
            i += 1
            eneg = False
            if i < n and (b[i] == 43 or b[i] == 45):
                eneg = b[i] == 45
                i += 1
            if i >= n or b[i] < 48 or b[i] > 57:
                return bad
            e = 0
            while i < n and 48 <= b[i] <= 57:
                if e < 100000:
                    e = e * 10 + (b[i] - 48)
                i += 1
            exp10 += -e if eneg else e
        if is_int and (inexact or exp10 != 0):
            return bad
        if k >= out.shape[0]:
            return bad
        if sig == 0 and not inexact:
            out[k] = -0.0 if neg and not is_int else 0.0
        elif inexact or sig > _MAX_EXACT or exp10 < -22 or exp10 > 22:
            if n_slow * 4 > k + 64 or n_slow >= slow.shape[0]:
                return bad  # over a quarter for Python: the caller decodes the whole body
            slow[n_slow, 0] = k
            slow[n_slow, 1] = start
            slow[n_slow, 2] = i
            n_slow += 1
            out[k] = 0.0
        else:
            value = sig * pow10[exp10] if exp10 >= 0 else sig / pow10[-exp10]
            out[k] = -value if neg else value
        k += 1
        width += 1
        # after a number: "," or "]" (end of the row), then "," or "]" (end of the matrix)
        while i < n and (b[i] == 32 or b[i] == 10 or b[i] == 13 or b[i] == 9):
            i += 1
        if i < n and b[i] == 44:
            i += 1
            continue
        if i >= n or b[i] != 93:
            return bad
        i += 1
        row_open = False
        if cols == -1:
            cols = width
        elif width != cols:
            return bad
        rows += 1
        while i < n and (b[i] == 32 or b[i] == 10 or b[i] == 13 or b[i] == 9):
            i += 1
        if i < n and b[i] == 44:
            i += 1
        elif i < n and b[i] == 93:
            return (OK, i + 1, rows, cols, n_slow)
        else:
            return bad


@numba.njit(nogil=True, cache=True)
def scan_dense_json(b, out, slow, pow10, max_depth):
    """Find the top-level ``X``/``x`` member of the object ``b`` and read its matrix.
    Returns ``(status, value start, value end, rows, cols, n_slow, key byte)``."""
    n = b.shape[0]
    bad = (_NO, 0, 0, 0, 0, 0, 0)
    i = _ws(b, 0)
    if i >= n or b[i] != 123:
        return bad
    i = _ws(b, i + 1)
    found = (_NO, 0, 0, 0, 0, 0, 0)
    while i < n and b[i] == 34:
        key_end = _skip_string(b, i)
        if key_end < 0:
            return bad
        is_x = key_end == i + 3 and (b[i + 1] == 88 or b[i + 1] == 120)
        i = _ws(b, key_end)
        if i >= n or b[i] != 58:
            return bad
        i = _ws(b, i + 1)
        if i >= n:
            return bad
        if is_x:
            if found[0] == OK:
                return bad  # a second X: the full decoder's rules apply
            status, end, rows, cols, n_slow = _matrix(b, i, out, slow, pow10)
            if status != OK:
                return bad
            found = (OK, i, end, rows, cols, n_slow, np.int64(b[key_end - 2]))
            i = end
        else:
            i = _skip_value(b, i, max_depth - 1)
            if i < 0:
                return bad
        i = _ws(b, i)
        if i < n and b[i] == 44:
            i = _ws(b, i + 1)
        else:
            break
    return found
