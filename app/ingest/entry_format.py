"""The envelope of one Redis stream entry: its allowed fields, the kind of its features
(:class:`EntryKind`), the binary row formats (:data:`BINARY_FIELDS`) and the checks of
:func:`entry_fields`; :mod:`.stream_entries` validates whole batches with them.

Entry format (field values are bytes as Redis returns them, or str):

* ``y`` -- the label: a JSON number or string, or plain text (a string label); a regression
  model's target (a number); absent or 0/1 for a novelty model (the model's codec decides:
  :mod:`.targets`);
* exactly one of
  * ``x`` -- JSON: a dense list of d numbers or a sparse ``{"index": value}`` object with
    0-based integer keys (numbers parsed to float64);
  * ``xd`` -- little-endian float64 bytes, dense, 8·d bytes (the same values as JSON
    carries, bit for bit);
  * ``xb`` -- little-endian float32 bytes, dense, 4·d bytes (kept for compatibility: each
    value is widened exactly to float64, so the model learns the float32-rounded features);
* ``w`` -- optional, the example's importance weight: a JSON number, finite and >= 0
  (``docs/weights.md``; absent: 1);
* ``id`` -- optional, the producer's own reference (not used by the learner).

An entry ``{fid, y}`` labels a remembered prediction by its id instead of giving features; the
stream consumer turns it into the ordinary entry of that row before these checks
(:mod:`svmstream.app.stream.feedback_entries`, ``docs/feedback.md``).

No other field is allowed.  An entry may come as a mapping or as Redis' raw
``[field, value, field, value, ...]`` reply.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from svmstream.app.errors import InvalidInput
from svmstream.app.ingest.decode import decode_json, is_number

STREAM_FIELDS = frozenset({"y", "x", "xd", "xb", "w", "id"})
STREAM_FIELDS_B = frozenset(f.encode() for f in STREAM_FIELDS) | STREAM_FIELDS


class EntryKind(IntEnum):
    """How an entry gives its features (stored as ``int8`` per entry)."""

    REJECTED = 0
    DENSE = 1
    """``x``: a JSON list of d numbers."""
    FLOAT32 = 2
    """``xb``: 4·d bytes of little-endian float32, widened exactly to float64."""
    SPARSE = 3
    """``x``: a JSON ``{"index": value}`` object."""
    FLOAT64 = 4
    """``xd``: 8·d bytes of little-endian float64 (exact)."""


# plain ints for the per-entry loop
REJECTED, DENSE, FLOAT32, SPARSE, FLOAT64 = (int(k) for k in EntryKind)


@dataclass(frozen=True)
class BinaryField:
    """A field that carries a dense row as raw little-endian bytes."""

    name: str
    kind: int
    dtype: str
    """numpy dtype of one value (``"<f8"``, ``"<f4"``)."""
    itemsize: int
    """Bytes per value."""
    described: str
    """How the message names the format (``"little-endian float64"``)."""


BINARY_FIELDS: dict[str, BinaryField] = {
    "xd": BinaryField("xd", FLOAT64, "<f8", 8, "little-endian float64"),
    "xb": BinaryField("xb", FLOAT32, "<f4", 4, "little-endian float32"),
}
"""The binary feature fields by name: ``xd`` (float64, exact) and ``xb`` (float32)."""
BINARY_B: dict[Any, BinaryField] = {**{k.encode(): f for k, f in BINARY_FIELDS.items()}, **BINARY_FIELDS}
FEATURE_FIELDS = (("x", b"x"), ("xd", b"xd"), ("xb", b"xb"))


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else str(value)


def entry_weight(fields: Mapping[Any, Any] | list) -> float | None:
    """The entry's ``w`` (None: absent, weight 1).  Raises InvalidInput naming ``w`` unless it
    is a JSON number, finite and >= 0 (``"2"`` is the number 2 as Redis carries every value
    as text; ``true``, ``"nan"``, ``"-1"``, ``"1_0"`` are refused)."""
    if type(fields) is list:
        fields = dict(zip(fields[::2], fields[1::2]))
    raw = fields.get(b"w")
    if raw is None:
        raw = fields.get("w")
        if raw is None:
            return None
    try:
        value = decode_json(raw, "w")
    except InvalidInput:
        value = _text(raw)
    if not is_number(value) or not math.isfinite(value) or value < 0:
        raise InvalidInput(f"w: a weight must be a finite number >= 0, got {value!r}", field="w")
    return float(value)


def entry_fields(fields: Mapping[Any, Any] | list) -> tuple[Any, Any, BinaryField | None, Any]:
    """``(y, x, binary field, its bytes)`` raw values of an entry (``x`` is None for a binary
    row, the binary pair is ``(None, None)`` for JSON ``x``); the envelope checks.

    Raises
    ------
    InvalidInput
        Unknown field, several or none of ``x``, ``xd`` and ``xb`` (an entry without ``y``
        gives ``y`` None: refused by a model whose examples need one, ``"y: field required"``).
    """
    if type(fields) is list:  # a raw reply: [field, value, field, value, ...]
        fields = dict(zip(fields[::2], fields[1::2]))
    if not fields.keys() <= STREAM_FIELDS_B:
        unknown = sorted(_text(k) for k in fields if k not in STREAM_FIELDS_B)
        raise InvalidInput(
            f"entry: unknown field {unknown[0]!r}; allowed fields are {sorted(STREAM_FIELDS)}",
            field=unknown[0],
        )
    get = fields.get
    y_raw = get(b"y")
    if y_raw is None:
        y_raw = get("y")  # None: no y (a novelty model's rows; the model's codec decides)
    given = []
    for name, name_b in FEATURE_FIELDS:
        value = get(name_b)
        if value is None:
            value = get(name)
        if value is not None:
            given.append((name, value))
    if len(given) > 1:
        names = " and ".join(repr(n) for n, _ in given)
        raise InvalidInput(
            f"entry: give the features in one field ('x', 'xd' or 'xb'), not in {names}", field=given[1][0]
        )
    if not given:
        raise InvalidInput(
            "x: field required (features as JSON 'x', float64 bytes 'xd' or float32 bytes 'xb')", field="x"
        )
    name, value = given[0]
    if name == "x":
        return y_raw, value, None, None
    return y_raw, None, BINARY_FIELDS[name], value
