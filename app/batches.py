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
