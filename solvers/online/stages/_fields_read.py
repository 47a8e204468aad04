"""What the fields stage reads a batch with (:mod:`.fields`): the refusal, the grouping of a
batch's values by field, the kinds and type checks, the hash."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils import murmurhash3_32

_NUMBER_TYPES = frozenset({int, float})
_NONE = type(None)


class FieldError(ValueError):
    """A named-field row the schema refuses: ``field`` names the value (``X[3].country``),
    ``index`` the example."""

    def __init__(self, message: str, field: str, index: int | None):
        super().__init__(message)
        self.field = field
        self.index = index


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"
    if isinstance(value, str):
        return f"a string {value[:40]!r}"
    return repr(value)


def _hash(text: str, bits: int) -> int:
    """MurmurHash3 (32 bits, seed 0) of ``text`` masked to ``bits`` bits."""
    return int(murmurhash3_32(text, seed=0, positive=True)) & ((1 << bits) - 1)


# ---------------------------------------------------------------------- helpers
def _short(name: str) -> str:
    return name if len(name) <= 40 else name[:40] + "..."


def _in_order(values, new) -> list:
    """The values of ``new`` in order of first appearance in ``values``."""
    seen, out = set(), []
    for v in values:
        if v in new and v not in seen:
            seen.add(v)
            out.append(v)
    return out


def _by_field(rows: list, locate) -> dict[str, tuple[np.ndarray, list]]:
    """``{field: (row indices int64, values)}`` of a batch of dict rows (fields in order of first
    appearance).  Rows with the keys of the first row in its order: one transposition."""
    n = len(rows)
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise FieldError(
                f"{locate(i)}: expected an object of named fields, got {_describe(row)}", locate(i), i
            )
    first = tuple(rows[0]) if n else ()
    if n and list(map(tuple, rows)).count(first) == n:
        where = np.arange(n, dtype=np.int64)
        columns = zip(*map(dict.values, rows)) if first else ()
        return {name: (where, list(col)) for name, col in zip(first, columns)}
    out: dict[str, tuple[list, list]] = {}
    for i, row in enumerate(rows):
        for name, value in row.items():
            entry = out.get(name)
            if entry is None:
                entry = out[name] = ([], [])
            entry[0].append(i)
            entry[1].append(value)
    return {name: (np.asarray(w, np.int64), v) for name, (w, v) in out.items()}


def _kind_of(types: set) -> str | None:
    if not types:
        return None
    if types <= _NUMBER_TYPES:
        return "number"
    if types == {bool}:
        return "boolean"
    if types == {str}:
        return "category"
    return next(
        ("number" if t in _NUMBER_TYPES else "boolean" if t is bool else "category" if t is str else None)
        for t in types
    )


def _expected(kind: str) -> tuple[frozenset, str]:
    if kind == "number":
        return _NUMBER_TYPES, "a number"
    if kind == "boolean":
        return frozenset({bool}), "true or false"
    return frozenset({str}), "a string"


def _check_types(kind, types, values, where, name, locate) -> None:
    allowed, what = _expected(kind)
    if types <= allowed:
        return
    j = next(j for j, v in enumerate(values) if type(v) not in allowed)
    i = int(where[j])
    loc = f"{locate(i)}.{_short(name)}"
    raise FieldError(
        f"{loc}: expected {what} (field {_short(name)!r} is a {kind}), got {_describe(values[j])}", loc, i
    )


def _numbers(f: Any, where: np.ndarray, values: list, locate):
    data = np.array(values, dtype=np.float64)
    bad = ~np.isfinite(data)
    if bad.any():  # JSON has no inf/nan, but a parsed 1e999 is inf
        j = int(np.flatnonzero(bad)[0])
        i = int(where[j])
        loc = f"{locate(i)}.{_short(f.name)}"
        raise FieldError(f"{loc}: {float(data[j])!r} is not a finite number", loc, i)
    return where, np.full(where.shape[0], f.column, np.int64), data
