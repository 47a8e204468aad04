"""Redis stream entries of named fields (``x`` a JSON object ``{"amount": 31.5, "country": "DE"}``)
-> the good entries' rows and labels, and a reason for each bad one (``docs/fields.md``).

A model that learns named fields (``handle.fields``), or a model without a dimension yet whose
first entry's ``x`` is an object with a non-integer key (:func:`named_stream`), reads its entries
here instead of :func:`svmstream.app.ingest.stream_entries.parse_stream_entries`.  As there, a bad
entry never rejects the others: each is checked for its envelope and label, then the rows are
encoded on a scratch copy of the schema in stream order; an entry the schema refuses (a wrong
type, a name or category over its bound, one field too many) is rejected with the schema's
message (``"x.amount: expected a number ..."``) and the others are encoded again without it.
The good rows go to ``registry.learn`` as a list; the handle encodes them again under its lock,
on the real schema (:func:`svmstream.app.ingest.named.encode_named`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from svmstream.app.errors import InvalidInput
from svmstream.app.ingest.decode import decode_json
from svmstream.app.ingest.entry_format import entry_fields, entry_weight
from svmstream.app.ingest.labels import LabelCodec, parse_stream_label
from svmstream.app.ingest.named import FieldError, FieldSchema, named_rows
from svmstream.app.ingest.stream_entries import EntryBatch, good_weights


def named_stream(handle: Any, entries: Sequence[Any]) -> bool:
    """Whether ``handle``'s entries are read as named fields: it has a schema, or it has no
    dimension yet and the first entry's ``x`` is a named-field object."""
    if handle.fields is not None:
        return True
    if handle.n_features is not None or not entries:
        return False
    try:
        _, x_raw, binary, _ = entry_fields(entries[0])
        return binary is None and named_rows([decode_json(x_raw, "x")])
    except InvalidInput:
        return False


def _row(fields: Any) -> tuple[Any, dict]:
    """``(label, row)`` of one entry (its ``w`` checked).  Raises InvalidInput naming the field."""
    y_raw, x_raw, binary, _ = entry_fields(fields)
    entry_weight(fields)
    label = parse_stream_label(y_raw)
    if binary is not None:
        raise InvalidInput(
            f"{binary.name}: this model learns named fields; send x as a JSON object", field=binary.name
        )
    row = decode_json(x_raw, "x")
    if not isinstance(row, dict):
        raise InvalidInput("x: this model learns named fields; send x as a JSON object", field="x")
    return label, row


def parse_named_entries(entries: Sequence[Any], codec: LabelCodec, schema: FieldSchema | None) -> EntryBatch:
    """Validate stream entries of named fields one by one (see the module docstring).

    Returns an :class:`~svmstream.app.ingest.stream_entries.EntryBatch` whose ``X`` is the list
    of the good entries' rows (None if none is good); ``sparse`` is True (they may widen)."""
    rejected: dict[int, str] = {}
    rows: dict[int, dict] = {}
    labels: dict[int, Any] = {}
    for i, fields in enumerate(entries):
        try:
            labels[i], rows[i] = _row(fields)
        except InvalidInput as exc:
            rejected[i] = exc.message
    cand = _schema_checked(sorted(rows), rows, schema, rejected)
    y, new = None, None
    if cand:
        y, bad, new = codec.encode_each([labels[i] for i in cand])
        for k, message in bad:
            rejected[cand[k]] = message
        keep = [k for k in range(len(cand)) if k not in {b for b, _ in bad}]
        cand, y = [cand[k] for k in keep], y[keep]
    if not cand:
        return EntryBatch(None, None, np.zeros(0, np.int64), sorted(rejected.items()))
    good = np.asarray(cand, dtype=np.int64)
    weights = {i: w for i in cand if (w := entry_weight(entries[i])) is not None}
    return EntryBatch(
        [rows[i] for i in cand], y, good, sorted(rejected.items()), True, new, good_weights(weights, good)
    )


def _schema_checked(cand: list[int], rows: dict, schema: FieldSchema | None, rejected: dict) -> list[int]:
    """The entries of ``cand`` a scratch copy of ``schema`` encodes, in order; each refused one
    rejected with the schema's message (the rest encoded again without it)."""
    while cand:
        scratch = schema.copy() if schema is not None else FieldSchema()
        try:
            scratch.encode([rows[i] for i in cand], grow=True, locate=lambda i: "x")
            return cand
        except FieldError as exc:
            k = exc.index if exc.index is not None else 0
            rejected[cand[k]] = str(exc)
            cand = cand[:k] + cand[k + 1 :]
    return cand
