"""Rows of named fields (``{"amount": 31.5, "country": "DE"}``) -> the model's columns.

A model's :class:`~svmstream.solvers.online.stages.fields.FieldSchema` (``handle.fields``) turns
them into CSR rows (``docs/fields.md``).  Which object rows are named: every object row of a model
that has a schema; otherwise an object row with a key that is not an integer (rows
``{"0": 1.5, "7": -2.0}`` stay the sparse positional form they always were).  A model learns
either named fields or positional rows: the first batch decides, the other form is refused
(422 naming ``X[0]``) — a column order and a schema cannot both be the model's.

Learning (:func:`encode_named`) encodes under the handle's lock and keeps the batch's new columns
only once the batch is queued; predictions (:func:`encode_for_view`) never add columns: unknown
fields and categories are ignored, and columns beyond the predicting version's width (made by
later batches) are dropped, so a pinned version, a replica and a restarted model encode a row
exactly as the live model did at that version.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import scipy.sparse as sp

from svmstream.app.errors import InvalidInput
from svmstream.solvers.online.stages.fields import FieldError, FieldSchema

__all__ = ["FieldError", "FieldSchema", "encode_for_view", "encode_named", "named_rows", "named_schema"]


def _integer_key(key: Any) -> bool:
    """A key ``int()`` reads (``"7"``, ``"-1"``, ``" +3"``): the sparse positional form (whose
    checks refuse the negative ones)."""
    try:
        int(key)
    except (TypeError, ValueError):
        return False
    return True


def named_rows(rows: Any, has_schema: bool = False) -> bool:
    """Whether a request's ``X`` holds named-field rows (see the module's rule)."""
    if not isinstance(rows, list) or not rows:
        return False
    first = next((r for r in rows if isinstance(r, dict)), None)
    if first is None:
        return False
    return has_schema or not all(map(_integer_key, first))


def invalid(exc: FieldError) -> InvalidInput:
    """The service's 4xx of a schema refusal (the field named as the schema named it)."""
    return InvalidInput(str(exc), field=exc.field, index=exc.index)


def named_schema(config: Any, saved: dict[str, Any] | None) -> FieldSchema | None:
    """The schema of a model: the saved one (``meta["service"]["fields"]`` of its snapshot), else
    the one its configuration declares (``fields``), else None (made on the first named batch)."""
    if saved:
        return FieldSchema.from_state({}, saved)
    declared = getattr(config, "fields", None)
    if declared:
        return FieldSchema(declared)
    return None


def declared_schema(declared: dict[str, Any] | None) -> dict[str, Any] | None:
    """The saved form (``meta``) of the schema a ``PUT`` body declares (``fields``), None when it
    declares none.  Raises InvalidInput naming ``fields.<name>`` (an unknown kind or key, a
    category that is not a string of at most ``max_value_length`` characters, a name over
    ``max_name_length``, more than ``max_fields`` fields)."""
    if not declared:
        return None
    try:
        return FieldSchema(declared).get_state()[1]
    except FieldError as exc:
        raise invalid(exc) from None


def refuse_mixed(handle: Any, named: bool) -> None:
    """Under the handle's lock: refuse named rows on a model of positional rows and the reverse."""
    if named and handle.fields is None and handle.n_features is not None:
        raise InvalidInput(
            f"X[0]: model {handle.name!r} learns positional rows of {handle.n_features} features; "
            "it cannot take named fields (create a new model for them)",
            field="X[0]",
            index=0,
        )
    if not named and handle.fields is not None:
        raise InvalidInput(
            f"X[0]: model {handle.name!r} learns named fields ({len(handle.fields.fields)} so far); "
            "send each example as an object of its fields",
            field="X[0]",
            index=0,
        )


def encode_named(handle: Any, rows: list, locate: Callable[[int], str] | None = None):
    """``(X, commit, nbytes)``: ``rows`` encoded by ``handle.fields`` (a new schema for the first
    named batch), CSR of shape ``(n, columns)``; ``commit()`` keeps the batch's new columns;
    ``nbytes``: the schema's estimated bytes with them (counted in ``max_model_bytes``).

    Raises InvalidInput naming ``X[i].field`` (nothing changes)."""
    schema = handle.fields if handle.fields is not None else FieldSchema()
    try:
        X, growth = schema.encode(rows, grow=True, locate=locate)
    except FieldError as exc:
        raise invalid(exc) from None

    def commit() -> None:
        schema.commit(growth)
        handle.fields = schema

    return X, commit, schema.nbytes(growth)


def encode_for_view(schema: FieldSchema | None, rows: list, width: int | None, locate=None):
    """Rows of named fields for a prediction of a version of width ``width``: CSR of shape
    ``(n, width)`` (no new columns; those beyond ``width`` dropped).

    Raises InvalidInput naming ``X[i].field``, or ``X`` when the model has no schema."""
    if schema is None or width is None:
        raise InvalidInput("X: this model has not learned named fields; send positional rows", field="X")
    try:
        X, _ = schema.encode(rows, grow=False, locate=locate)
    except FieldError as exc:
        raise invalid(exc) from None
    if X.shape[1] > width:
        X = X[:, :width].tocsr()
    elif X.shape[1] < width:
        X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], width))
    X.sort_indices()
    return X


def rows_for_view(view: Any, X: Any):
    """``X`` as a version (a :class:`~svmstream.app.models.view.ModelView`) predicts it: rows of
    named fields (a list) encoded by :func:`encode_for_view`, anything else unchanged."""
    return encode_for_view(view.fields, X, view.n_features) if isinstance(X, list) else X
