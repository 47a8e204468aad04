"""Redis stream entries -> the arrays of the good entries, and a reason for each bad one.

Entries are validated **one by one**: a bad entry never rejects the others (the stream
consumer dead-letters it with its reason and learns from the rest).  The checks and
messages are those of the HTTP path -- the same helpers of :mod:`.decode`,
:mod:`.features` and :mod:`.labels` -- applied per entry, with the field names of the
entry (``x``, ``xd``, ``xb``, ``y``) and no example index.

Entry format: :mod:`.entry_format` (fields ``y``, one of ``x``/``xd``/``xb``, optional ``id``).

The precision contract (``docs/stream.md``): every path learns float64; ``x`` and ``xd``
give the model exactly the float64 values an HTTP ``/learn`` body would, ``xb`` the float32
quantisation of them.

No other field is allowed.  The kind of each entry's features is an
:class:`~svmstream.app.ingest.entry_format.EntryKind`.
An entry may come as a mapping or as Redis' raw ``[field, value, field, value, ...]``
reply; the raw replies ``[b"y", label, b"xd", features]`` and ``[b"y", label, b"xb",
features]`` -- what ``svmstream replay --redis`` and most producers write -- are read
without building a dict (the fast path of a high-rate stream).

Labels repeat, so each distinct raw ``y`` is parsed once per batch.  Rows of one kind are
converted together (one ``np.asarray`` for the JSON lists, one buffer per binary field
(``xd``, ``xb``), one :func:`~svmstream.app.ingest.features.sparse_parts` call for all the sparse
objects -- entry by entry only when one of them is bad, to find it); the good entries come
back as one dense matrix, or as a CSR matrix when sparse entries make the batch wide
(:func:`svmstream.app.ingest.features.should_densify`: never for d > 256 or more than 4M
elements, so a wide sparse stream reaches the solver as CSR).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from svmstream.app.errors import InvalidInput
from svmstream.app.ingest.decode import decode_json, may_contain_bools
from svmstream.app.ingest.entry_format import (
    BINARY_B,
    BINARY_FIELDS,
    DENSE,
    REJECTED,
    SPARSE,
    BinaryField,
    entry_fields,
    entry_weight,
)
from svmstream.app.ingest.features import (
    first_non_number,
    no_features,
    nonfinite_cells,
    not_a_number,
    not_a_row,
    number_error,
    numeric_matrix,
    should_densify,
    sparse_parts,
    wrong_width,
)
from svmstream.app.ingest.labels import LabelCodec, NewLabels, parse_stream_label


@dataclass(frozen=True)
class EntryBatch:
    """Stream entries validated one by one.

    Attributes
    ----------
    X : ndarray of shape (g, d), float64, CSR matrix of shape (g, d), or None
        Features of the ``g`` good entries, in entry order (None if there is none).
    y : ndarray of shape (g,), int64, or None
        Their class indices.
    good : ndarray of shape (g,), int64
        Positions of the good entries in the input sequence (increasing).
    rejected : list of (int, str)
        ``(position, reason)`` of every bad entry, by position; the reason starts with
        the field (``"x[3]: nan is not a finite number"``).
    sparse : bool
        Every good entry gave sparse ``{index: value}`` features (such a batch may widen
        a model whose dimension is not fixed).
    new_labels : NewLabels or None
        Labels the good entries add to a model that learns its classes.
    weights : ndarray of shape (g,), float64, or None
        The good entries' ``w`` (1 where absent); None when no entry of the batch had one.
    """

    X: np.ndarray | sp.csr_matrix | None
    y: np.ndarray | None
    good: np.ndarray
    rejected: list[tuple[int, str]]
    sparse: bool = False
    new_labels: NewLabels | None = None
    weights: np.ndarray | None = None


def _label_or_error(raw: Any) -> Any:
    if raw is None:  # no y: the codec says whether the model needs one (encode_labels)
        return None
    try:
        return parse_stream_label(raw)
    except InvalidInput as exc:
        return exc


def _json_kind(value: Any) -> int:
    """:class:`EntryKind` of a decoded ``x``; raises for an empty list or a non-row."""
    if isinstance(value, list):
        if not value:
            raise no_features("x")
        return DENSE
    if isinstance(value, dict):
        return SPARSE
    raise not_a_row("x", value)


def _entry_row(i: int) -> tuple[str, int | None]:
    return "x", None


_UNSEEN = object()


@dataclass
class _SparseBlock:
    """The sparse entries of a batch as CSR parts: row ``k`` is the entry at ``pos[k]``
    (rows of entries rejected later stay in the block; their kind says so)."""

    pos: np.ndarray  # (k,) entry positions, increasing
    indices: np.ndarray  # int64, in each entry's key order
    data: np.ndarray  # float64
    indptr: np.ndarray  # (k + 1,) int64
    last: np.ndarray  # (k,) largest index of each row, -1 for an empty row

    @classmethod
    def of(cls, pos: np.ndarray, indices: np.ndarray, data: np.ndarray, indptr: np.ndarray) -> _SparseBlock:
        last = np.full(pos.size, -1, dtype=np.int64)
        nonempty = np.diff(indptr) > 0
        if indices.size:  # a segment runs on over the empty rows after it: they add nothing
            last[nonempty] = np.maximum.reduceat(indices, indptr[:-1][nonempty])
        return cls(pos, indices, data, indptr, last)

    def rows(self, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """CSR parts ``(data, indices, indptr)`` of the rows where ``keep`` (bool, (k,)) holds."""
        counts = np.diff(self.indptr)
        nnz = np.repeat(keep, counts)
        indptr = np.concatenate(([0], np.cumsum(counts[keep]))).astype(np.int64)
        return self.data[nnz], self.indices[nnz], indptr


@dataclass
class _Entries:
    """The entries of one batch while they are validated (positions are entry indices)."""

    n: int
    d: int | None
    whose: str
    grow_to: int | None = None  # sparse entries may widen the batch up to this width
    kinds: Any = None  # list of int while reading, then ndarray of int8
    rows: list[Any] = field(default_factory=list)
    labels: list[Any] = field(default_factory=list)
    rejected: dict[int, str] = field(default_factory=dict)
    weights: dict[int, float] = field(default_factory=dict)  # entries with a w
    sparse_bools: bool = False  # a sparse entry's raw JSON may hold true/false (values to check)

    def read(self, entries: Sequence[Any]) -> None:
        """Per entry: envelope, label, feature kind and width (the one per-entry loop)."""
        n, d, whose = self.n, self.d, self.whose
        kinds = [REJECTED] * n
        rows: list[Any] = [None] * n
        labels: list[Any] = [None] * n
        rejected = self.rejected
        label_cache: dict[Any, Any] = {}  # raw y -> label (or its InvalidInput): labels repeat
        for i, fields in enumerate(entries):
            try:
                if (
                    type(fields) is list
                    and len(fields) == 4
                    and fields[0] == b"y"
                    and (binary := BINARY_B.get(fields[2])) is not None
                ):
                    y_raw, x_raw, raw = fields[1], None, fields[3]  # the common raw reply: no dict
                else:
                    y_raw, x_raw, binary, raw = entry_fields(fields)
                    w = entry_weight(fields)
                    if w is not None:
                        self.weights[i] = w
                label = label_cache.get(y_raw, _UNSEEN)
                if label is _UNSEEN:
                    label = label_cache[y_raw] = _label_or_error(y_raw)
                if label.__class__ is InvalidInput:
                    raise label
                if binary is not None:
                    if isinstance(raw, str):
                        raw = raw.encode("latin-1", "replace")
                    size = len(raw)
                    item = binary.itemsize
                    if size == 0 or size % item:
                        raise InvalidInput(
                            f"{binary.name}: has {size} bytes, expected {item} per feature ({binary.described})",
                            field=binary.name,
                        )
                    if d is None:
                        d = size // item
                    elif size != item * d:
                        raise wrong_width(binary.name, size // item, whose, d)
                    kinds[i] = binary.kind
                    rows[i] = raw
                else:
                    value = decode_json(x_raw, "x")
                    kind = _json_kind(value)
                    if kind == SPARSE:
                        self.sparse_bools = self.sparse_bools or may_contain_bools(x_raw)
                    elif kind == DENSE:
                        if d is None:
                            d = len(value)
                        elif len(value) != d:
                            raise wrong_width("x", len(value), whose, d)
                        if may_contain_bools(x_raw):
                            error = number_error(value, "x")
                            if error is not None:
                                raise error
                    kinds[i] = kind
                    rows[i] = value
                labels[i] = label
            except InvalidInput as exc:
                rejected[i] = exc.message
                kinds[i] = REJECTED
        self.d = d
        self.kinds = np.array(kinds, dtype=np.int8)
        self.rows = rows
        self.labels = labels

    def reject(self, i: int, reason: str) -> None:
        self.rejected[int(i)] = reason
        self.kinds[i] = REJECTED

    def dense_matrix(self) -> tuple[np.ndarray, np.ndarray]:
        """``(positions, float64 rows)`` of the JSON-list entries: one conversion, then the
        entries whose values are not all numbers are rejected."""
        width = self.d or 0
        pos = np.flatnonzero(self.kinds == DENSE)
        if not pos.size:
            return pos, np.empty((0, width))
        rows = self.rows
        dense = numeric_matrix([rows[i] for i in pos])
        if dense is not None:
            return pos, dense.astype(np.float64, copy=False)
        good_rows = []  # strings, nulls, nested lists: find them row by row
        for i in pos:
            j = first_non_number(rows[i])
            if j is None:
                good_rows.append(rows[i])
            else:
                self.reject(i, not_a_number(f"x[{j}]", rows[i][j]).message)
        pos = np.flatnonzero(self.kinds == DENSE)
        return pos, np.array(good_rows, dtype=np.float64).reshape(len(good_rows), width)

    def binary_matrix(self, binary: BinaryField) -> tuple[np.ndarray, np.ndarray]:
        """``(positions, rows)`` of the entries of one binary field, read from one buffer
        (dtype ``binary.dtype``: float64 for ``xd``, float32 for ``xb``; read-only)."""
        width = self.d or 0
        pos = np.flatnonzero(self.kinds == binary.kind)
        if not pos.size:
            return pos, np.empty((0, width), dtype=binary.dtype)
        rows = self.rows
        return pos, np.frombuffer(b"".join([rows[i] for i in pos]), dtype=binary.dtype).reshape(
            pos.size, width
        )

    def reject_nonfinite(self, pos: np.ndarray, arr: np.ndarray, name: str) -> None:
        for r, j in nonfinite_cells(arr):
            self.reject(pos[r], f"{name}[{j}]: {float(arr[r, j])!r} is not a finite number")

    def sparse_block(self) -> _SparseBlock:
        """The sparse entries as one :class:`_SparseBlock`; entries with a bad key or value,
        or an index out of range, are rejected (with the message of the HTTP checks).

        All of them are read by one :func:`sparse_parts` call (one ``int`` per key, one
        array of values); only if that finds an error are they read again one by one, to
        reject exactly the bad entries.
        """
        pos = np.flatnonzero(self.kinds == SPARSE)
        rows = self.rows
        try:
            indices, data, indptr = sparse_parts([rows[i] for i in pos], _entry_row, self.sparse_bools)
        except InvalidInput:
            parts = []
            for i in pos:
                try:
                    parts.append(sparse_parts((rows[i],), _entry_row)[:2])
                except InvalidInput as exc:
                    self.reject(i, exc.message)
                    parts.append((np.empty(0, dtype=np.int64), np.empty(0)))
            counts = [ix.size for ix, _ in parts]
            indptr = np.concatenate(([0], np.cumsum(counts, dtype=np.int64)))
            indices = np.concatenate([ix for ix, _ in parts]) if parts else np.empty(0, dtype=np.int64)
            data = np.concatenate([v for _, v in parts]) if parts else np.empty(0)
        block = _SparseBlock.of(pos, indices, data, indptr)
        # without dense entries in the batch, a model whose d is not fixed grows up to grow_to
        grows = self.grow_to is not None and not np.any((self.kinds > 0) & (self.kinds != SPARSE))
        bound = self.grow_to if grows else self.d
        if bound is not None:
            for k in np.flatnonzero(block.last >= bound):
                i, top = int(pos[k]), int(block.last[k])
                if self.kinds[i] != SPARSE:
                    continue
                if grows:
                    self.reject(
                        i,
                        f"x: feature index {top} is out of range: the model may grow to at most {bound} "
                        "features (max_features, max_model_bytes)",
                    )
                else:
                    self.reject(
                        i,
                        f"x: feature index {top} is out of range: the model expects {bound} features "
                        f"(indices 0..{bound - 1})",
                    )
        return block

    def encode_labels(self, codec: LabelCodec) -> tuple[np.ndarray | None, NewLabels | None]:
        """Class indices of the entries still good (unknown labels reject their entry), and
        the labels they add to a model that learns its classes."""
        cand = np.flatnonzero(self.kinds > 0)
        if not cand.size:
            return None, None
        labels = self.labels
        absent = np.asarray([labels[i] is None for i in cand], dtype=bool)
        if absent.any():  # entries without y: refused, or a novelty model's rows (targets.py)
            if codec.requires_y:
                for i in cand[absent]:
                    self.reject(i, "y: field required")
                cand = cand[~absent]
                absent = absent[~absent]
            if not cand.size:
                return None, None
        given = np.flatnonzero(~absent)
        idx, bad, new = codec.encode_each([labels[i] for i in cand[given]])
        if absent.any():
            full = codec.absent(cand.size)
            full[given] = idx
            idx = full
        for k, message in bad:
            self.reject(cand[given[k]], message)
        keep = np.ones(cand.size, dtype=bool)
        keep[given[[k for k, _ in bad]]] = False
        return idx[keep], new


def _dense_batch(entries: _Entries, good: np.ndarray, d: int, parts: list, block: _SparseBlock) -> np.ndarray:
    """The good entries as one dense (g, d) float64 matrix."""
    kinds = entries.kinds
    for _kind, pos, arr in parts:
        if pos.size == good.size and arr.shape[1] == d and np.array_equal(pos, good):
            # every good entry is of this kind (the usual read): its rows, one conversion
            return np.array(arr, dtype=np.float64)  # (a copy: xd/xb rows are read-only buffers)
    row_of = np.full(entries.n, -1, dtype=np.int64)
    row_of[good] = np.arange(good.size)
    X = np.empty((good.size, d), dtype=np.float64)
    for kind, pos, arr in parts:
        if not pos.size:  # (an all-sparse batch may be wider than the model's d)
            continue
        sel = kinds[pos] == kind
        X[row_of[pos[sel]]] = arr[sel]
    keep = kinds[block.pos] == SPARSE
    if keep.any():
        data, indices, indptr = block.rows(keep)
        rows = row_of[block.pos[keep]]
        X[rows] = 0.0
        X[np.repeat(rows, np.diff(indptr)), indices] = data
    return X


def _csr_batch(
    entries: _Entries, good: np.ndarray, d: int, parts: list, block: _SparseBlock
) -> sp.csr_matrix:
    """The good entries as one (g, d) CSR matrix with sorted indices (a wide batch with
    sparse entries): the sparse rows as they came, dense rows (if any) made sparse."""
    kinds = entries.kinds
    keep = kinds[block.pos] == SPARSE
    data, indices, indptr = block.rows(keep)
    X = sp.csr_matrix((data, indices, indptr), shape=(int(keep.sum()), d))
    if X.shape[0] != good.size:  # dense entries too: stack the kinds, then put rows in entry order
        pieces, where = [X], [block.pos[keep]]
        for kind, pos, arr in parts:
            sel = kinds[pos] == kind if pos.size else np.zeros(0, dtype=bool)
            if sel.any():
                pieces.append(sp.csr_matrix(arr[sel].astype(np.float64, copy=False)))
                where.append(pos[sel])
        X = sp.vstack(pieces, format="csr")[np.argsort(np.concatenate(where), kind="stable")]
    X.sort_indices()
    return X


def parse_stream_entries(
    entries: Sequence[Mapping[Any, Any]],
    codec: LabelCodec,
    n_features: int | None,
    model: str = "model",
    grow_to: int | None = None,
) -> EntryBatch:
    """Validate Redis stream entries **one by one** (a bad entry never rejects the others).

    Parameters
    ----------
    entries : sequence of mappings or of flat lists
        The entries' fields, in stream order: ``{field: value}`` or Redis' raw
        ``[field, value, field, value, ...]`` (see the module docstring for the format).
    codec : LabelCodec
        Label set of the model.
    n_features : int or None
        The model's d; None while it is not fixed (then the first good dense entry fixes
        it for this batch, or, for an all-sparse batch, the largest index + 1).
    model : str
        Model name for messages.
    grow_to : int or None
        For a model whose dimension is not fixed (sparse input): in a batch without dense
        entries, sparse indices up to ``grow_to - 1`` are accepted and widen the batch.

    Returns
    -------
    EntryBatch
        The good entries as arrays, in order; the bad ones with their reasons.
    """
    whose = f"model {model!r}" if n_features is not None else "the batch's first example"
    table = _Entries(len(entries), n_features, whose, grow_to)
    table.read(entries)
    parts = []
    for kind, name, (pos, arr) in (
        (DENSE, "x", table.dense_matrix()),
        *((b.kind, b.name, table.binary_matrix(b)) for b in BINARY_FIELDS.values()),
    ):
        table.reject_nonfinite(pos, arr, name)
        parts.append((kind, pos, arr))
    block = table.sparse_block()
    y, new = table.encode_labels(codec)
    good = np.flatnonzero(table.kinds > 0).astype(np.int64)
    rejected = sorted(table.rejected.items())
    if good.size == 0:
        return EntryBatch(None, None, good, rejected)
    weights = good_weights(table.weights, good)
    d = table.d
    all_sparse = bool(np.all(table.kinds[good] == SPARSE))
    if d is None or (all_sparse and grow_to is not None):  # all-sparse: the largest index fixes the width
        good_sparse = table.kinds[block.pos] == SPARSE
        widest = int(block.last[good_sparse].max(initial=0)) + 1
        d = max(d or 1, widest)
    # Densify or not: see should_densify (narrow batches go dense, wide ones stay CSR)
    if not np.any(table.kinds[block.pos] == SPARSE) or should_densify(good.size, d):
        return EntryBatch(
            _dense_batch(table, good, d, parts, block), y, good, rejected, all_sparse, new, weights
        )
    return EntryBatch(_csr_batch(table, good, d, parts, block), y, good, rejected, all_sparse, new, weights)


def good_weights(weights: dict[int, float], good: np.ndarray) -> np.ndarray | None:
    """The weights of the good entries (1 where an entry gave none; None: no entry gave one)."""
    if not weights:
        return None
    return np.array([weights.get(int(i), 1.0) for i in good], dtype=np.float64)
