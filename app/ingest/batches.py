"""The one validation path: a decoded request or stream entry -> ``(X, y)`` arrays.

Every learn/predict input of the service (HTTP today, Redis stream entries later) goes
through :func:`parse_examples` and :func:`conform`; a batch is either turned into arrays
completely or rejected completely with a :class:`BatchError` whose message starts with
the offending field and example index (``"X[3][5]: nan is not a finite number"``), so
no solver step ever sees part of a bad batch.

The examples go under the key ``"X"`` (or ``"x"``; messages always say ``X``).

Formats accepted for ``X``
    * dense rows: ``[[x0, x1, ...], ...]`` (all of the same length), parsed with one
      ``np.asarray`` call (fast path);
    * sparse rows: ``[{"0": 1.5, "7": -2.0}, ...]`` with 0-based integer keys, turned
      into a CSR matrix (rows may mix both forms).

Labels ``y`` are numbers or strings from the model's class set; numeric labels compare
numerically (``1.0 == 1``).  They are encoded as class indices ``0..K-1`` (``int64``)
into the model's sorted class list.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import orjson
import scipy.sparse as sp

LEARN_FIELDS = frozenset({"model", "X", "x", "y", "n_features"})
PREDICT_FIELDS = frozenset({"model", "X", "x", "n_features"})


class BatchError(ValueError):
    """A rejected input.

    Parameters
    ----------
    message : str
        Human-readable reason, starting with ``field``.
    field : str or None
        Locator of the offending value, e.g. ``"X[3][5]"``, ``"y[7]"`` or ``"body"``.
    index : int or None
        Index of the first offending example in the batch, if the error is per example.
    status : int
        HTTP status to answer with (422 by default, 400 for malformed JSON, 413 for an
        oversized body).
    """

    def __init__(self, message: str, field: str | None = None, index: int | None = None, status: int = 422):
        super().__init__(message)
        self.message = message
        self.field = field
        self.index = index
        self.status = status

    def to_json(self) -> dict[str, Any]:
        return {"detail": self.message, "field": self.field, "index": self.index}


@dataclass(frozen=True)
class Batch:
    """A validated batch.

    Attributes
    ----------
    X : ndarray of shape (n, d), float64, C-contiguous, or scipy CSR matrix of shape (n, d)
        Finite feature values.  For sparse input ``d`` is the declared ``n_features`` or
        else the largest index + 1 (:func:`conform` widens it to the model's dimension).
    y : ndarray of shape (n,), int64, or None
        Class indices into the model's sorted class list (``None`` for predict batches).
    n_features : int or None
        Dimension declared by the request (``"n_features"``), if any.
    """

    X: np.ndarray | sp.csr_matrix
    y: np.ndarray | None
    n_features: int | None = None

    @property
    def n(self) -> int:
        return self.X.shape[0]


def may_contain_bools(body: bytes) -> bool:
    """False when the raw JSON body has no ``true``/``false`` token (so no boolean values)."""
    return b"true" in body or b"false" in body


def decode_body(body: bytes) -> Any:
    """Decode a JSON body with orjson; fall back to the standard library parser, which
    also reads ``NaN``/``Infinity`` literals (so that they can be rejected by field).

    Raises
    ------
    BatchError
        status 400 if the body is not JSON.
    """
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        try:
            return json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise BatchError(f"body: invalid JSON: {exc}", field="body", status=400) from None


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"
    return repr(value)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_envelope(obj: Any, allowed: frozenset[str], require_y: bool) -> None:
    """Check the top-level object of a learn/predict request.

    Raises
    ------
    BatchError
        If ``obj`` is not an object, has unknown keys, or lacks ``X`` (or ``y``).
    """
    if not isinstance(obj, dict):
        raise BatchError(f"body: expected a JSON object, got {_describe(obj)}", field="body")
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise BatchError(
            f"body: unknown field {unknown[0]!r}; allowed fields are {sorted(allowed)}", field=unknown[0]
        )
    if "X" in obj and "x" in obj:
        raise BatchError("body: give the examples as 'X' or as 'x', not both", field="x")
    if "X" not in obj and "x" not in obj:
        raise BatchError("X: field required (the examples, key 'X' or 'x')", field="X")
    if require_y and "y" not in obj:
        raise BatchError("y: field required", field="y")
    model = obj.get("model")
    if model is not None and not isinstance(model, str):
        raise BatchError(f"model: expected a string, got {_describe(model)}", field="model")
    nf = obj.get("n_features")
    if nf is not None and (not isinstance(nf, int) or isinstance(nf, bool) or nf < 1):
        raise BatchError(f"n_features: expected a positive integer, got {_describe(nf)}", field="n_features")


# ----------------------------------------------------------------------------- features


def _dense_error(rows: Sequence[Any]) -> BatchError:
    """Find the first offending value of a dense batch that ``np.asarray`` rejected."""
    width = None
    for i, row in enumerate(rows):
        if not isinstance(row, list):
            return BatchError(
                f"X[{i}]: expected a list of numbers or an {{index: value}} object, got {_describe(row)}",
                field=f"X[{i}]", index=i,
            )
        if width is None:
            width = len(row)
        elif len(row) != width:
            return BatchError(
                f"X[{i}]: has {len(row)} features but X[0] has {width}", field=f"X[{i}]", index=i
            )
        for j, v in enumerate(row):
            if not _is_number(v):
                return BatchError(f"X[{i}][{j}]: expected a number, got {_describe(v)}", field=f"X[{i}][{j}]", index=i)
    return BatchError("X: could not be read as a matrix of numbers", field="X")


def _nonfinite_dense(arr: np.ndarray) -> BatchError:
    i, j = (int(k) for k in np.argwhere(~np.isfinite(arr))[0])
    return BatchError(f"X[{i}][{j}]: {float(arr[i, j])!r} is not a finite number", field=f"X[{i}][{j}]", index=i)


def _parse_dense(rows: list[Any], check_bools: bool) -> np.ndarray | None:
    """Fast path: all rows are equal-length lists of numbers.  None if not applicable."""
    try:
        arr = np.asarray(rows)
    except (ValueError, TypeError):
        return None
    if arr.ndim != 2 or arr.dtype.kind not in "iuf":
        return None
    if check_bools:  # numpy reads true/false as 1/0: refuse them
        for i, row in enumerate(rows):
            for j, v in enumerate(row):
                if v.__class__ is bool:
                    raise BatchError(f"X[{i}][{j}]: expected a number, got {_describe(v)}", field=f"X[{i}][{j}]", index=i)
    if arr.shape[1] == 0:
        raise BatchError("X[0]: an example needs at least one feature", field="X[0]", index=0)
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise _nonfinite_dense(arr)
    return arr


def _parse_sparse(rows: list[Any], check_bools: bool = True) -> sp.csr_matrix:
    """Rows given as ``{"index": value}`` objects (dense lists allowed in between)."""
    keys: list[Any] = []
    values: list[Any] = []
    indptr = [0]
    for i, row in enumerate(rows):
        if isinstance(row, dict):
            keys.extend(row.keys())
            values.extend(row.values())
        elif isinstance(row, list):
            keys.extend(range(len(row)))
            values.extend(row)
        else:
            raise BatchError(
                f"X[{i}]: expected a list of numbers or an {{index: value}} object, got {_describe(row)}",
                field=f"X[{i}]", index=i,
            )
        indptr.append(len(keys))
    indptr_arr = np.asarray(indptr, dtype=np.int64)

    def row_of(pos: int) -> int:
        return int(np.searchsorted(indptr_arr, pos, side="right") - 1)

    idx = _keys_to_indices(keys)
    if idx is None:  # find the first bad key for the message
        pos = next(p for p, k in enumerate(keys) if not _is_index_key(k))
        i = row_of(pos)
        raise BatchError(
            f"X[{i}]: feature key {keys[pos]!r} is not a non-negative integer (0-based index)",
            field=f"X[{i}]", index=i,
        )
    try:
        data = np.asarray(values)
    except (ValueError, TypeError):
        data = np.asarray([], dtype=object)
    if data.dtype.kind not in "iuf" or data.shape != (len(values),) or check_bools:
        for pos, v in enumerate(values):
            if not _is_number(v):
                i = row_of(pos)
                raise BatchError(
                    f"X[{i}][{keys[pos]}]: expected a number, got {_describe(v)}", field=f"X[{i}][{keys[pos]}]", index=i
                )
    data = data.astype(np.float64, copy=False)
    bad = ~np.isfinite(data)
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        i = row_of(pos)
        raise BatchError(
            f"X[{i}][{keys[pos]}]: {float(data[pos])!r} is not a finite number", field=f"X[{i}][{keys[pos]}]", index=i
        )
    d = int(idx.max()) + 1 if idx.size else 1
    X = sp.csr_matrix((data, idx, indptr_arr), shape=(len(rows), d))
    X.sort_indices()
    return X


def _is_index_key(key: Any) -> bool:
    try:
        return not isinstance(key, bool) and int(key) >= 0
    except (TypeError, ValueError):
        return False


def _keys_to_indices(keys: list[Any]) -> np.ndarray | None:
    """``int(key)`` for every JSON object key; None if any key is not a non-negative
    integer.  (Like ``int``, this accepts surrounding blanks and a ``+`` sign.)"""
    try:
        idx = np.fromiter(map(int, keys), dtype=np.int64, count=len(keys))
    except (TypeError, ValueError, OverflowError):
        return None
    if idx.size and idx.min() < 0:
        return None
    return idx


def parse_features(rows: Any, n_features: int | None = None, check_bools: bool = True) -> np.ndarray | sp.csr_matrix:
    """Turn the JSON value of ``X`` into a finite float64 matrix.

    Parameters
    ----------
    rows : list
        Dense lists and/or sparse ``{"index": value}`` objects.
    n_features : int, optional
        Dimension declared by the request: dense rows must have exactly this length,
        sparse indices must be below it (the CSR matrix gets this width).
    check_bools : bool
        Scan dense rows for JSON booleans (refused).  Callers that know the raw body
        contains no ``true``/``false`` token skip the scan.

    Returns
    -------
    ndarray of shape (n, d), float64, or scipy.sparse.csr_matrix of shape (n, d)

    Raises
    ------
    BatchError
        Naming the field and the first offending example: not a list, empty batch,
        ragged rows, non-numbers, NaN/inf, bad sparse keys, index beyond ``n_features``.
    """
    if not isinstance(rows, list):
        raise BatchError(f"X: expected a list of examples, got {_describe(rows)}", field="X")
    if not rows:
        raise BatchError("X: empty batch; send at least one example", field="X")
    X: np.ndarray | sp.csr_matrix | None = None
    if isinstance(rows[0], list):
        X = _parse_dense(rows, check_bools)
        if X is None and not any(isinstance(r, dict) for r in rows):
            raise _dense_error(rows)
    if X is None:
        X = _parse_sparse(rows, check_bools)
    if n_features is not None:
        X = _fit_width(X, n_features, "the request (n_features)")
    return X


def _fit_width(X, d: int, whose: str):
    """Check ``X`` against dimension ``d``; widen a sparse matrix to ``d`` columns."""
    if sp.issparse(X):
        if X.shape[1] > d:
            over = X.indices >= d
            pos = int(np.flatnonzero(over)[0])
            i = int(np.searchsorted(X.indptr, pos, side="right") - 1)
            raise BatchError(
                f"X[{i}]: feature index {int(X.indices[pos])} is out of range: {whose} expects {d} features "
                f"(indices 0..{d - 1})",
                field=f"X[{i}]", index=i,
            )
        if X.shape[1] < d:
            X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], d))
        return X
    if X.shape[1] != d:
        raise BatchError(f"X[0]: has {X.shape[1]} features, {whose} expects {d}", field="X[0]", index=0)
    return X


DENSIFY_MAX_FEATURES = 1024
DENSIFY_MAX_ELEMENTS = 1 << 22


def densify_if_small(X):
    """A sparse batch of a low-dimensional model as a dense C-contiguous float64 array.

    Done when ``d <= 1024`` and ``n * d <= 4M`` elements (32 MB): the solver's dense path
    is faster there (a9a, d=123: about 1.5x), while wide sparse data (text, d in the
    thousands) stays CSR.
    """
    if sp.issparse(X) and X.shape[1] <= DENSIFY_MAX_FEATURES and X.shape[0] * X.shape[1] <= DENSIFY_MAX_ELEMENTS:
        return np.ascontiguousarray(X.toarray(), dtype=np.float64)
    return X


def conform(X, n_features: int | None, declared: int | None = None, model: str = "model"):
    """Check a parsed batch against the model's input dimension.

    Parameters
    ----------
    X : ndarray of shape (n, k) or CSR matrix of shape (n, k)
    n_features : int or None
        The model's dimension ``d``; ``None`` while it is not fixed yet (then the batch
        is returned unchanged and its width becomes ``d``).
    declared : int, optional
        ``n_features`` declared by the request; must equal ``d`` when both are known.

    Returns
    -------
    ndarray of shape (n, d) or CSR matrix of shape (n, d)
        Small sparse batches come back dense (:func:`densify_if_small`).

    Raises
    ------
    BatchError
        Wrong dense width, sparse index ``>= d``, or a declared dimension that differs.
    """
    if n_features is None:
        return densify_if_small(X)
    if declared is not None and declared != n_features:
        raise BatchError(
            f"n_features: the request declares {declared} features, model {model!r} has {n_features}",
            field="n_features",
        )
    return densify_if_small(_fit_width(X, n_features, f"model {model!r}"))


# ------------------------------------------------------------------------------- labels


class LabelCodec:
    """Map JSON labels to class indices of a model and back.

    Parameters
    ----------
    classes : list of int/float or list of str
        The model's normalised (sorted) class list, see
        :func:`app.schemas.normalise_classes`.
    """

    def __init__(self, classes: Sequence[Any]):
        self.classes = list(classes)
        self.numeric = not isinstance(self.classes[0], str)
        self._values = np.asarray(self.classes, dtype=np.float64) if self.numeric else None
        self._index = {c: k for k, c in enumerate(self.classes)}

    def encode(self, labels: Any) -> np.ndarray:
        """Encode a JSON list of labels.

        Returns
        -------
        ndarray of shape (n,), int64
            Indices into :attr:`classes`.

        Raises
        ------
        BatchError
            ``"y[i]: unknown label ...; model classes are [...]"`` for the first label
            outside the class set (or of the wrong type); also if ``labels`` is not a list.
        """
        if not isinstance(labels, list):
            raise BatchError(f"y: expected a list of labels, got {_describe(labels)}", field="y")
        if self.numeric:
            try:
                arr = np.asarray(labels)
            except (ValueError, TypeError):
                arr = np.asarray([], dtype=object)
            if arr.dtype.kind in "iuf" and arr.shape == (len(labels),):
                for i, v in enumerate(labels):
                    if v.__class__ is bool:
                        raise self._unknown(i, v)
                arr = arr.astype(np.float64, copy=False)
                idx = np.searchsorted(self._values, arr)
                np.minimum(idx, len(self.classes) - 1, out=idx)
                ok = self._values[idx] == arr
                if ok.all():
                    return idx.astype(np.int64, copy=False)
                i = int(np.flatnonzero(~ok)[0])
                raise self._unknown(i, labels[i])
        out = np.empty(len(labels), dtype=np.int64)
        index = self._index
        for i, v in enumerate(labels):
            if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                raise self._unknown(i, v)
            if self.numeric and isinstance(v, float) and v.is_integer():
                v = int(v)
            k = index.get(v) if isinstance(v, str) != self.numeric else None
            if k is None:
                raise self._unknown(i, v)
            out[i] = k
        return out

    def encode_each(self, labels: Sequence[Any]) -> tuple[np.ndarray, list[tuple[int, str]]]:
        """Encode labels one by one, collecting every unknown one instead of stopping.

        Returns
        -------
        idx : ndarray of shape (n,), int64
            Class indices (meaningless at the rejected positions).
        rejected : list of (int, str)
            ``(position, "y: unknown label ...; model classes are [...]")``.
        """
        n = len(labels)
        out = np.zeros(n, dtype=np.int64)
        rejected: list[tuple[int, str]] = []
        if self.numeric:
            numbers = [isinstance(v, (int, float)) and not isinstance(v, bool) for v in labels]
            if all(numbers):
                arr = np.asarray(labels, dtype=np.float64)
                idx = np.searchsorted(self._values, arr)
                np.minimum(idx, len(self.classes) - 1, out=idx)
                ok = self._values[idx] == arr
                out[:] = idx
                bad = np.flatnonzero(~ok).tolist()
            else:
                bad = []
                for i, v in enumerate(labels):
                    if not numbers[i]:
                        bad.append(i)
                        continue
                    k = int(np.searchsorted(self._values, float(v)))
                    if k < len(self.classes) and self._values[k] == float(v):
                        out[i] = k
                    else:
                        bad.append(i)
        else:
            index = self._index
            bad = []
            for i, v in enumerate(labels):
                k = index.get(v) if isinstance(v, str) else None
                if k is None:
                    bad.append(i)
                else:
                    out[i] = k
        for i in bad:
            rejected.append((i, f"y: unknown label {_describe(labels[i])}; model classes are {json.dumps(self.classes)}"))
        return out, rejected

    def _unknown(self, i: int, v: Any) -> BatchError:
        return BatchError(
            f"y[{i}]: unknown label {_describe(v)}; model classes are {json.dumps(self.classes)}",
            field=f"y[{i}]", index=i,
        )

    def decode(self, idx: np.ndarray) -> list[Any]:
        """Class indices -> JSON labels (list of length n)."""
        classes = self.classes
        return [classes[k] for k in idx.tolist()]


def parse_examples(obj: Mapping[str, Any], codec: LabelCodec | None, check_bools: bool = True) -> Batch:
    """Validate a decoded learn (``codec`` given) or predict (``codec=None``) request.

    Parameters
    ----------
    obj : dict
        Decoded JSON with keys ``X`` (or ``x``), ``y`` (learn only), optional ``model``
        and ``n_features``.
    codec : LabelCodec or None
        Label set of the target model; ``None`` for predict requests (no ``y``).
    check_bools : bool
        See :func:`parse_features`.

    Returns
    -------
    Batch

    Raises
    ------
    BatchError
        See :func:`check_envelope`, :func:`parse_features`, :meth:`LabelCodec.encode`;
        also when ``len(y) != len(X)``.
    """
    learn = codec is not None
    check_envelope(obj, LEARN_FIELDS if learn else PREDICT_FIELDS, require_y=learn)
    declared = obj.get("n_features")
    X = parse_features(obj["X"] if "X" in obj else obj["x"], declared, check_bools)
    y = None
    if learn:
        labels = obj["y"]
        if isinstance(labels, list) and len(labels) != X.shape[0]:
            raise BatchError(f"y: has {len(labels)} labels for {X.shape[0]} examples in X", field="y")
        y = codec.encode(labels)
    return Batch(X=X, y=y, n_features=declared)


# ------------------------------------------------------------------------ stream entries

STREAM_FIELDS = frozenset({"y", "x", "xb", "id"})
_STREAM_FIELDS_B = frozenset(f.encode() for f in STREAM_FIELDS) | STREAM_FIELDS


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
        ``(position, reason)`` of every bad entry; the reason starts with the field
        (``"x[3]: nan is not a finite number"``).
    """

    X: np.ndarray | sp.csr_matrix | None
    y: np.ndarray | None
    good: np.ndarray
    rejected: list[tuple[int, str]]


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else str(value)


def parse_stream_label(raw: Any) -> Any:
    """The label of a stream entry's ``y`` field (bytes or str).

    JSON scalars are decoded (``b"1"`` -> 1, ``b"-1.0"`` -> -1.0, ``b'"cat"'`` -> "cat");
    anything that is not JSON is taken as a string label (``b"cat"`` -> "cat").

    Raises
    ------
    BatchError
        If the value decodes to JSON that is not a number or a string, or is not UTF-8.
    """
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            value = raw.decode("utf-8") if isinstance(raw, (bytes, bytearray)) else str(raw)
        except UnicodeDecodeError:
            raise BatchError("y: label is not valid UTF-8", field="y") from None
        return value.strip()
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise BatchError(f"y: expected a number or a string label, got {_describe(value)}", field="y")
    return value


_UNSEEN = object()


def _label_or_error(raw: Any) -> Any:
    try:
        return parse_stream_label(raw)
    except BatchError as exc:
        return exc


def _decode_x(raw: Any) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        try:  # the standard parser also reads NaN/Infinity, so that they are named below
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise BatchError(f"x: invalid JSON: {exc}", field="x") from None


def _sparse_row(row: dict, d: int | None) -> tuple[np.ndarray, np.ndarray]:
    """``(indices int64, values float64)`` of one ``{index: value}`` row, sorted by index."""
    keys = list(row.keys())
    idx = _keys_to_indices(keys)
    if idx is None:
        bad = next(k for k in keys if not _is_index_key(k))
        raise BatchError(f"x: feature key {bad!r} is not a non-negative integer (0-based index)", field="x")
    values = list(row.values())
    for k, v in zip(keys, values):
        if not _is_number(v):
            raise BatchError(f"x[{k}]: expected a number, got {_describe(v)}", field=f"x[{k}]")
    data = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(data)
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        raise BatchError(f"x[{keys[pos]}]: {float(data[pos])!r} is not a finite number", field=f"x[{keys[pos]}]")
    if d is not None and idx.size and int(idx.max()) >= d:
        raise BatchError(
            f"x: feature index {int(idx.max())} is out of range: the model expects {d} features (indices 0..{d - 1})",
            field="x",
        )
    order = np.argsort(idx, kind="stable")
    return idx[order], data[order]


def parse_stream_entries(entries: Sequence[Mapping[Any, Any]], codec: LabelCodec,
                         n_features: int | None, model: str = "model") -> EntryBatch:
    """Validate Redis stream entries **one by one** (a bad entry never rejects the others).

    Entry format (field values are bytes as Redis returns them, or str):

    * ``y`` -- the label: a JSON number or string, or plain text (a string label);
    * ``x`` -- JSON: a dense list of d numbers or a sparse ``{"index": value}`` object with
      0-based integer keys; **or** ``xb`` -- little-endian float32 bytes, dense, 4·d bytes;
    * ``id`` -- optional, the producer's own reference (not used by the learner).

    No other field is allowed.  The checks and messages are those of the HTTP path
    (:func:`parse_features`, :meth:`LabelCodec.encode`) applied per entry, with the field
    names of the entry (``x``, ``xb``, ``y``).

    Parameters
    ----------
    entries : sequence of mappings or of flat lists
        The entries' fields, in stream order: ``{field: value}`` or Redis' raw
        ``[field, value, field, value, ...]``.
    codec : LabelCodec
        Label set of the model.
    n_features : int or None
        The model's d; None while it is not fixed (then the first good dense entry fixes
        it for this batch, or, for an all-sparse batch, the largest index + 1).
    model : str
        Model name for messages.

    Returns
    -------
    EntryBatch
        The good entries as arrays, in order; the bad ones with their reasons.
    """
    n = len(entries)
    rejected: dict[int, str] = {}
    labels: list[Any] = [None] * n
    kinds = np.zeros(n, dtype=np.int8)  # 0 rejected, 1 dense list, 2 float32 bytes, 3 sparse
    rows: list[Any] = [None] * n
    d = n_features
    whose = f"model {model!r}" if d is not None else "the batch's first example"

    label_cache: dict[Any, Any] = {}  # raw y -> label (or its BatchError): labels repeat

    for i, fields in enumerate(entries):
        try:
            if type(fields) is list:  # a raw reply: [field, value, field, value, ...]
                if len(fields) == 4 and fields[0] == b"y" and fields[2] == b"xb":  # the common case, fast
                    y_raw = fields[1]
                    label = label_cache.get(y_raw, _UNSEEN)
                    if label is _UNSEEN:
                        label = label_cache[y_raw] = _label_or_error(y_raw)
                    if label.__class__ is BatchError:
                        raise label
                    xb_raw = fields[3]
                    size = len(xb_raw)
                    if size == 0 or size % 4:
                        raise BatchError(f"xb: has {size} bytes, expected 4 per feature (little-endian float32)",
                                         field="xb")
                    if d is None:
                        d = size // 4
                    elif size != 4 * d:
                        raise BatchError(f"xb: has {size // 4} features, {whose} expects {d}", field="xb")
                    kinds[i] = 2
                    rows[i] = xb_raw
                    labels[i] = label
                    continue
                fields = dict(zip(fields[::2], fields[1::2]))
            if not fields.keys() <= _STREAM_FIELDS_B:
                unknown = sorted(_text(k) for k in fields if k not in _STREAM_FIELDS_B)
                raise BatchError(f"entry: unknown field {unknown[0]!r}; allowed fields are {sorted(STREAM_FIELDS)}",
                                 field=unknown[0])
            get = fields.get
            y_raw = get(b"y")
            if y_raw is None:
                y_raw = get("y")
                if y_raw is None:
                    raise BatchError("y: field required", field="y")
            x_raw = get(b"x")
            xb_raw = get(b"xb")
            if x_raw is None and xb_raw is None:
                x_raw = get("x")
                xb_raw = get("xb")
            if x_raw is not None and xb_raw is not None:
                raise BatchError("entry: give the features as 'x' or as 'xb', not both", field="xb")
            if x_raw is None and xb_raw is None:
                raise BatchError("x: field required (features as JSON 'x' or float32 bytes 'xb')", field="x")
            label = label_cache.get(y_raw, _UNSEEN)
            if label is _UNSEEN:
                label = label_cache[y_raw] = _label_or_error(y_raw)
            if label.__class__ is BatchError:
                raise label
            if xb_raw is not None:
                if isinstance(xb_raw, str):
                    xb_raw = xb_raw.encode("latin-1", "replace")
                size = len(xb_raw)
                if size == 0 or size % 4:
                    raise BatchError(f"xb: has {size} bytes, expected 4 per feature (little-endian float32)", field="xb")
                width = size // 4
                if d is None:
                    d = width
                elif width != d:
                    raise BatchError(f"xb: has {width} features, {whose} expects {d}", field="xb")
                kinds[i] = 2
                rows[i] = xb_raw
            else:
                value = _decode_x(x_raw)
                if isinstance(value, list):
                    if not value:
                        raise BatchError("x: an example needs at least one feature", field="x")
                    if d is None:
                        d = len(value)
                    elif len(value) != d:
                        raise BatchError(f"x: has {len(value)} features, {whose} expects {d}", field="x")
                    if (b"true" in x_raw or b"false" in x_raw) if isinstance(x_raw, bytes) else True:
                        for j, v in enumerate(value):
                            if not _is_number(v):
                                raise BatchError(f"x[{j}]: expected a number, got {_describe(v)}", field=f"x[{j}]")
                    kinds[i] = 1
                elif isinstance(value, dict):
                    kinds[i] = 3
                else:
                    raise BatchError(f"x: expected a list of numbers or an {{index: value}} object, got {_describe(value)}",
                                     field="x")
                rows[i] = value
            labels[i] = label
        except BatchError as exc:
            rejected[i] = exc.message
            kinds[i] = 0

    # dense JSON rows: one conversion, then per-row finiteness
    dense_pos = np.flatnonzero(kinds == 1)
    dense = np.empty((0, d or 0))
    if dense_pos.size:
        try:
            dense = np.asarray([rows[i] for i in dense_pos])
        except (ValueError, TypeError):
            dense = None
        if dense is not None and dense.ndim == 2 and dense.dtype.kind in "iuf":
            dense = dense.astype(np.float64, copy=False)
        else:  # strings, nulls, nested lists: find them row by row
            good_rows = []
            for i in dense_pos:
                bad = next((j for j, v in enumerate(rows[i]) if not _is_number(v)), None)
                if bad is None:
                    good_rows.append(rows[i])
                else:
                    rejected[int(i)] = f"x[{bad}]: expected a number, got {_describe(rows[i][bad])}"
                    kinds[i] = 0
            dense_pos = np.flatnonzero(kinds == 1)
            dense = np.array(good_rows, dtype=np.float64).reshape(len(good_rows), d or 0)
    # float32 bytes rows: one buffer
    xb_pos = np.flatnonzero(kinds == 2)
    xb = np.frombuffer(b"".join(rows[i] for i in xb_pos), dtype="<f4").reshape(xb_pos.size, d or 0) \
        if xb_pos.size else np.empty((0, d or 0), dtype=np.float32)
    for pos, arr, field in ((dense_pos, dense, "x"), (xb_pos, xb, "xb")):
        if pos.size:
            finite = np.isfinite(arr)
            if not finite.all():
                for r in np.flatnonzero(~finite.all(axis=1)):
                    j = int(np.flatnonzero(~finite[r])[0])
                    rejected[int(pos[r])] = f"{field}[{j}]: {float(arr[r, j])!r} is not a finite number"
                    kinds[pos[r]] = 0
    # sparse rows, one by one
    sparse: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for i in np.flatnonzero(kinds == 3):
        try:
            sparse[int(i)] = _sparse_row(rows[i], d)
        except BatchError as exc:
            rejected[int(i)] = exc.message
            kinds[i] = 0
    # labels of the entries still good
    cand = np.flatnonzero(kinds > 0)
    y = None
    if cand.size:
        idx, bad = codec.encode_each([labels[i] for i in cand])
        for k, message in bad:
            rejected[int(cand[k])] = message
            kinds[cand[k]] = 0
        keep = np.ones(cand.size, dtype=bool)
        keep[[k for k, _ in bad]] = False
        y = idx[keep]
    good = np.flatnonzero(kinds > 0).astype(np.int64)
    if good.size == 0:
        return EntryBatch(None, None, good, sorted(rejected.items()))
    if d is None:  # an all-sparse batch of a model without d yet
        d = max((int(ix[-1]) + 1 for ix, _ in (sparse[int(i)] for i in good) if ix.size), default=1)
    row_of = np.full(n, -1, dtype=np.int64)
    row_of[good] = np.arange(good.size)
    if not sparse or d <= DENSIFY_MAX_FEATURES and good.size * d <= DENSIFY_MAX_ELEMENTS:
        X = np.empty((good.size, d), dtype=np.float64)
        sel = kinds[dense_pos] == 1
        X[row_of[dense_pos[sel]]] = dense[sel]
        sel = kinds[xb_pos] == 2
        X[row_of[xb_pos[sel]]] = xb[sel]
        if sparse:
            for i in good:
                if kinds[i] == 3:
                    ix, val = sparse[int(i)]
                    r = row_of[i]
                    X[r] = 0.0
                    X[r, ix] = val
        return EntryBatch(X, y, good, sorted(rejected.items()))
    # wide sparse: one CSR matrix
    dense_rows = {int(i): r for i, r in zip(dense_pos, dense)}
    dense_rows.update({int(i): r.astype(np.float64) for i, r in zip(xb_pos, xb)})
    indptr = [0]
    all_idx: list[np.ndarray] = []
    all_val: list[np.ndarray] = []
    for i in good:
        i = int(i)
        if kinds[i] == 3:
            ix, val = sparse[i]
        else:
            row = dense_rows[i]
            ix = np.flatnonzero(row)
            val = row[ix]
        all_idx.append(ix)
        all_val.append(val)
        indptr.append(indptr[-1] + ix.size)
    X = sp.csr_matrix((np.concatenate(all_val), np.concatenate(all_idx), np.asarray(indptr, dtype=np.int64)),
                      shape=(good.size, d))
    return EntryBatch(X, y, good, sorted(rejected.items()))
