"""The fields stage: rows of named fields (JSON objects) -> the columns of a sparse matrix.

A stream's events are objects such as ``{"amount": 31.5, "country": "DE", "note": "refund
asked twice", "age": null}``.  :class:`FieldSchema` turns a batch of them into a CSR matrix the
rest of the pipeline learns (before the scaler stage), and keeps what it learned about the
fields as state (``get_state``/``from_state``, saved through :mod:`svmstream.solvers.persistence`).
The rules (``docs/fields.md``):

* a field's **kind** is declared, or learned from its first non-null value: a JSON number ->
  ``"number"`` (one column, the value as sent), ``true``/``false`` -> ``"boolean"`` (one column,
  1/0), a string -> ``"category"``; ``"text"`` is declared only;
* a **category** gets one one-hot column per value, in order of first appearance, up to
  ``max_categories`` values per field; the values after those go to ``2**bucket_bits`` hashed
  buckets of that field (MurmurHash3 of the value; a bucket's column is made the first time it is
  hit), so a field with 10**6 distinct values costs at most ``max_categories + 2**bucket_bits``
  columns and the schema never stores the values beyond ``max_categories``;
* a **text** field is a hashed bag of words (Vowpal Wabbit's convention: tokens split on
  white space, MurmurHash3 of ``field^token`` masked to ``hash_bits`` bits, the value the token's
  count; a bucket's column is made when first hit);
* **missing** (null or absent): the field's columns are 0 and its indicator column
  ``field?missing`` is 1 (made on the first missing value).  The rule is deterministic (no running
  mean), so a restored copy encodes every row exactly as the live one;
* a field or category first seen mid-stream gets new columns at the end (columns are never
  renumbered): the model widens, as with sparse rows; predictions ignore fields and categories
  the schema has not learned (a value over a full vocabulary still finds its bucket if that
  bucket has a column);
* a value of the wrong type (a string where the field is a number, a boolean where it is a
  number, a list or an object anywhere) raises :class:`FieldError` naming ``X[i].field``; so do
  a field name over ``max_name_length`` characters, a category over ``max_value_length``, and a
  batch that would take the schema over ``max_fields`` fields.  An encoding that raises changes
  nothing: the new columns of a batch are kept only on :meth:`FieldSchema.commit`.

Every batch is read field by field: the values of a field are one tuple (rows with the same keys
in the same order, the usual case, are transposed with one ``zip``), its types one ``set(map(type,
...))``, a number column one ``np.array``, a category column one ``map(dict.get, ...)``; the only
per-value Python work is for values new to the schema.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._fields_read import (
    _NONE,
    FieldError,
    _by_field,
    _check_types,
    _hash,
    _in_order,
    _kind_of,
    _numbers,
    _short,
)

__all__ = ["FieldError", "FieldSchema", "KINDS"]

KINDS = ("number", "boolean", "category", "text")


@dataclass
class Field:
    """One field of the schema: its kind and columns (-1: not made yet)."""

    name: str
    kind: str | None  # None: only nulls seen so far
    column: int = -1  # number / boolean
    missing: int = -1  # the indicator column
    categories: dict[str, int] = field(default_factory=dict)  # category -> column
    buckets: dict[int, int] = field(default_factory=dict)  # hashed bucket -> column
    declared: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "column": self.column,
            "missing": self.missing,
            "categories": list(self.categories),
            "category_columns": list(self.categories.values()),
            "buckets": [[int(b), int(c)] for b, c in self.buckets.items()],
            "declared": self.declared,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Field:
        return cls(
            name=data["name"],
            kind=data["kind"],
            column=int(data["column"]),
            missing=int(data["missing"]),
            categories=dict(zip(data["categories"], map(int, data["category_columns"]))),
            buckets={int(b): int(c) for b, c in data["buckets"]},
            declared=bool(data.get("declared", False)),
        )


class Growth:
    """The columns one batch adds (kept only on :meth:`FieldSchema.commit`)."""

    def __init__(self, n_columns: int):
        self.start = n_columns
        self.n_columns = n_columns
        self.fields: dict[str, Field] = {}  # new fields, or new copies of changed ones

    def new_column(self) -> int:
        self.n_columns += 1
        return self.n_columns - 1

    @property
    def empty(self) -> bool:
        return not self.fields


class FieldSchema:
    """What a model knows of its named fields, and the encoder of their rows.

    Parameters
    ----------
    declared : dict, optional
        ``{name: {"kind": kind, "categories": [...]}}`` fixed up front (kinds in :data:`KINDS`;
        declared categories take the first columns, in the order given).
    max_fields : int, default=256
        Fields a schema holds; a batch that would add more is refused.
    max_categories : int, default=256
        One-hot columns per category field; later values go to hashed buckets.
    bucket_bits : int, default=6
        A category field has ``2**bucket_bits`` buckets for the values over ``max_categories``.
    hash_bits : int, default=18
        Text fields: tokens hash to ``2**hash_bits`` buckets (VW's ``-b``).
    max_name_length, max_value_length : int, default=128, 256
        Longest field name and category value, in characters (text values: 64 × longer).

    Examples
    --------
    >>> schema = FieldSchema()
    >>> X, growth = schema.encode([{"a": 1.5, "c": "x"}, {"a": 2.0, "c": "y", "b": None}])
    >>> schema.commit(growth).n_columns, X.toarray().tolist()
    (4, [[1.5, 1.0, 0.0, 0.0], [2.0, 0.0, 1.0, 1.0]])
    >>> schema.column_names()
    ['a', 'c=x', 'c=y', 'b?missing']
    """

    def __init__(
        self,
        declared: dict[str, dict[str, Any]] | None = None,
        *,
        max_fields: int = 256,
        max_categories: int = 256,
        bucket_bits: int = 6,
        hash_bits: int = 18,
        max_name_length: int = 128,
        max_value_length: int = 256,
    ):
        self.max_fields = int(max_fields)
        self.max_categories = int(max_categories)
        self.bucket_bits = int(bucket_bits)
        self.hash_bits = int(hash_bits)
        self.max_name_length = int(max_name_length)
        self.max_value_length = int(max_value_length)
        self.fields: dict[str, Field] = {}
        self.n_columns = 0
        self._lock = threading.Lock()
        if declared:
            if len(declared) > self.max_fields:
                raise FieldError(
                    f"fields: {len(declared)} fields declared, at most {self.max_fields}", "fields", None
                )
            growth = Growth(0)
            for name, spec in declared.items():
                self._declare(growth, name, spec)
            self.commit(growth)

    def _declare(self, growth: Growth, name: str, spec: dict[str, Any]) -> None:
        unknown = (
            sorted(set(spec) - {"kind", "categories"}) if isinstance(spec, dict) else ["(not an object)"]
        )
        if unknown:
            raise FieldError(
                f"fields.{name}: unknown key {unknown[0]!r}; a declared field has 'kind' and 'categories'",
                f"fields.{name}",
                None,
            )
        kind = spec.get("kind")
        if kind not in KINDS:
            raise FieldError(
                f"fields.{name}.kind: expected one of {list(KINDS)}, got {kind!r}", f"fields.{name}", None
            )
        self._check_name(name, f"fields.{name}", None)
        f = Field(name, kind, declared=True)
        growth.fields[name] = f
        if kind in ("number", "boolean"):
            f.column = growth.new_column()
        categories = spec.get("categories") or ()
        if not isinstance(categories, (list, tuple)):
            raise FieldError(
                f"fields.{name}.categories: expected a list of strings", f"fields.{name}.categories", None
            )
        for value in categories:
            if (
                kind != "category"
                or not isinstance(value, str)
                or not 0 < len(value) <= self.max_value_length
            ):
                raise FieldError(
                    f"fields.{name}.categories: {_short(repr(value))} is not a category of this field (a "
                    f"category field's strings of 1 to {self.max_value_length} characters)",
                    f"fields.{name}.categories",
                    None,
                )
            if value not in f.categories and len(f.categories) < self.max_categories:
                f.categories[value] = growth.new_column()

    # ------------------------------------------------------------------ encoding
    def encode(self, rows: list, grow: bool = True, locate=None) -> tuple[sp.csr_matrix, Growth]:
        """Encode ``rows`` (a list of dicts) -> ``(X, growth)``.

        ``X`` is a CSR float64 matrix of shape ``(n, growth.n_columns)`` (sorted indices);
        ``growth`` holds the columns the batch adds, kept by :meth:`commit` (``grow=False``:
        nothing new is made; unknown fields and categories are ignored, the width is
        :attr:`n_columns`).  ``locate(i) -> "X[i]"`` names a row in errors.

        Raises :class:`FieldError` (nothing changes) for the first offending value."""
        locate = locate or (lambda i: f"X[{i}]")
        with self._lock:
            growth = Growth(self.n_columns)
            parts = []
            for name, (where, values) in _by_field(rows, locate).items():
                parts.append(self._encode_field(growth, name, where, values, grow, locate))
        n = len(rows)
        if parts:
            r = np.concatenate([p[0] for p in parts])
            c = np.concatenate([p[1] for p in parts])
            v = np.concatenate([p[2] for p in parts])
        else:
            r = c = np.zeros(0, dtype=np.int64)
            v = np.zeros(0)
        X = sp.csr_matrix((v, (r, c)), shape=(n, growth.n_columns))
        X.sum_duplicates()
        X.sort_indices()
        return X, growth

    def commit(self, growth: Growth) -> FieldSchema:
        """Keep the columns of an encoded batch (the batch was accepted).  Returns self."""
        with self._lock:
            if growth.start != self.n_columns:
                raise RuntimeError("a schema growth committed out of order")
            self.fields.update(growth.fields)
            self.n_columns = growth.n_columns
        return self

    def _field(self, growth: Growth, name: str, grow: bool, where: np.ndarray, locate) -> Field | None:
        f = growth.fields.get(name) or self.fields.get(name)
        if f is not None or not grow:
            return f
        self._check_name(name, f"{locate(int(where[0]))}.{_short(name)}", int(where[0]))
        n_fields = len(self.fields) + sum(1 for k in growth.fields if k not in self.fields)
        if n_fields >= self.max_fields:
            i = int(where[0])
            raise FieldError(
                f"{locate(i)}.{_short(name)}: a new field, and the schema holds max_fields={self.max_fields}",
                f"{locate(i)}.{_short(name)}",
                i,
            )
        f = growth.fields[name] = Field(name, None)
        return f

    def _check_name(self, name: str, where: str, index: int | None) -> None:
        if len(name) > self.max_name_length or not name:
            raise FieldError(
                f"{where}: a field name must have 1 to {self.max_name_length} characters, this one has {len(name)}",
                where,
                index,
            )

    def _mutable(self, growth: Growth, f: Field) -> Field:
        """``f`` as this batch may change it (a copy the first time; the same copy after)."""
        mine = growth.fields.get(f.name)
        if mine is not None:
            return mine
        copy = Field(f.name, f.kind, f.column, f.missing, dict(f.categories), dict(f.buckets), f.declared)
        growth.fields[f.name] = copy
        return copy

    def _encode_field(self, growth, name, where, values, grow, locate):
        """``(rows, columns, values)`` of one field's entries."""
        f = self._field(growth, name, grow, where, locate)
        empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
        if f is None:
            return empty
        types = set(map(type, values))
        nulls = None
        if _NONE in types:
            mask = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
            nulls = where[mask]
            where = where[~mask]
            values = [v for v in values if v is not None]
            types.discard(_NONE)
        kind = f.kind or _kind_of(types)
        if kind is not None and f.kind is None and grow:
            f = self._mutable(growth, f)
            f.kind = kind
            if kind in ("number", "boolean"):
                f.column = growth.new_column()
        parts = [self._missing(growth, f, nulls, grow)] if nulls is not None and nulls.size else []
        if values:
            _check_types(kind, types, values, where, f.name, locate)
            if kind in ("number", "boolean"):
                parts.append(_numbers(f, where, values, locate))
            elif kind == "category":
                parts.append(self._categories(growth, f, where, values, grow, locate))
            else:
                parts.append(self._text(growth, f, where, values, grow, locate))
        parts = [p for p in parts if p is not None]
        if not parts:
            return empty
        return tuple(np.concatenate([p[k] for p in parts]) for k in range(3))

    def _missing(self, growth, f, nulls, grow):
        if f.missing < 0:
            if not grow:
                return None
            f = self._mutable(growth, f)
            f.missing = growth.new_column()
        return nulls, np.full(nulls.shape[0], f.missing, np.int64), np.ones(nulls.shape[0])

    def _categories(self, growth, f, where, values, grow, locate):
        if max(map(len, values)) > self.max_value_length:
            j = next(j for j, v in enumerate(values) if len(v) > self.max_value_length)
            i = int(where[j])
            loc = f"{locate(i)}.{_short(f.name)}"
            raise FieldError(
                f"{loc}: a category has at most {self.max_value_length} characters, this one has {len(values[j])}",
                loc,
                i,
            )
        new = set(values).difference(f.categories)
        lookup = f.categories
        if new:
            if grow:
                f = self._mutable(growth, f)
            lookup = dict(f.categories)  # with this batch's values over the vocabulary (not kept)
            for value in _in_order(values, new):
                if grow and len(f.categories) < self.max_categories:
                    lookup[value] = f.categories[value] = growth.new_column()
                    continue
                b = _hash(value, self.bucket_bits)
                column = f.buckets.get(b, -1)
                if column < 0 and grow:
                    column = f.buckets[b] = growth.new_column()
                lookup[value] = column
        cols = np.fromiter(map(lookup.get, values), dtype=np.int64, count=len(values))
        keep = cols >= 0
        return where[keep], cols[keep], np.ones(int(keep.sum()))

    def _text(self, growth, f, where, values, grow, locate):
        limit = 64 * self.max_value_length
        rows, cols = [], []
        for j, text in enumerate(values):
            if len(text) > limit:
                i = int(where[j])
                raise FieldError(
                    f"{locate(i)}.{_short(f.name)}: a text has at most {limit} characters, this one has {len(text)}",
                    f"{locate(i)}.{_short(f.name)}",
                    i,
                )
            for token in text.split():
                b = _hash(f"{f.name}^{token}", self.hash_bits)
                column = f.buckets.get(b, -1)
                if column < 0 and grow:
                    f = self._mutable(growth, f)
                    column = f.buckets[b] = growth.new_column()
                if column >= 0:
                    rows.append(int(where[j]))
                    cols.append(column)
        return np.asarray(rows, np.int64), np.asarray(cols, np.int64), np.ones(len(rows))

    # ------------------------------------------------------------------ description, state
    def column_names(self) -> list[str]:
        """The name of every column, in column order (``a``, ``c=x``, ``c#3``, ``t~17``, ``b?missing``)."""
        names = [""] * self.n_columns
        for f in self.fields.values():
            if f.column >= 0:
                names[f.column] = f.name
            if f.missing >= 0:
                names[f.missing] = f"{f.name}?missing"
            for value, c in f.categories.items():
                names[c] = f"{f.name}={value}"
            for b, c in f.buckets.items():
                names[c] = f"{f.name}{'~' if f.kind == 'text' else '#'}{b}"
        return names

    def info(self) -> dict[str, Any]:
        """JSON-ready: per field its kind, columns, vocabulary size and hashed buckets in use."""
        with self._lock:
            fields = [
                {
                    "name": f.name,
                    "kind": f.kind,
                    "declared": f.declared,
                    "categories": len(f.categories),
                    "hashed_buckets": len(f.buckets),
                    "missing_indicator": f.missing >= 0,
                }
                for f in self.fields.values()
            ]
        return {"n_fields": len(fields), "n_columns": self.n_columns, "fields": fields, **self.params()}

    def params(self) -> dict[str, int]:
        return {
            "max_fields": self.max_fields,
            "max_categories": self.max_categories,
            "bucket_bits": self.bucket_bits,
            "hash_bits": self.hash_bits,
            "max_name_length": self.max_name_length,
            "max_value_length": self.max_value_length,
        }

    def nbytes(self, growth: Growth | None = None) -> int:
        """An estimate of the schema's memory (bytes): ~120 per field, ~100 per column plus the
        category strings; with ``growth``: as it will be once ``growth`` is committed (what
        ``max_model_bytes`` counts, ``docs/fields.md``)."""
        fields = self.fields if growth is None else {**self.fields, **growth.fields}
        n_columns = self.n_columns if growth is None else max(self.n_columns, growth.n_columns)
        chars = sum(len(k) for f in fields.values() for k in f.categories)
        return 120 * len(fields) + 100 * n_columns + chars

    def get_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """``(arrays, meta)``: no arrays; the fields in ``meta`` (JSON)."""
        with self._lock:
            return {}, {
                "params": self.params(),
                "n_columns": self.n_columns,
                "fields": [f.to_json() for f in self.fields.values()],
            }

    @classmethod
    def from_state(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> FieldSchema:
        schema = cls(**meta["params"])
        schema.fields = {d["name"]: Field.from_json(d) for d in meta["fields"]}
        schema.n_columns = int(meta["n_columns"])
        return schema

    def copy(self) -> FieldSchema:
        return FieldSchema.from_state(*self.get_state())
