"""Feature rows -> a finite float64 matrix (dense ndarray or CSR), or an error naming the value.

The checks of this module serve both inputs of the service: the ``X`` list of an HTTP
body (:func:`parse_features`) and the ``x`` field of a stream entry
(:mod:`.stream_entries`).  Messages start with the locator of the offending value, which
each caller chooses: ``X[3]`` / ``X[3][5]`` for row 3 of a request, ``x`` / ``x[5]`` for
an entry (see :data:`RowLocator`).

Rows are given as
    * dense lists: ``[x0, x1, ...]``, all of one length, read with one ``np.asarray`` call
      (fast path);
    * sparse objects: ``{"0": 1.5, "7": -2.0}`` with 0-based integer keys, turned into a
      CSR matrix (a request may mix both forms).

:func:`conform` checks a parsed batch against a model's dimension and applies the
densify rule (:func:`densify_if_small`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from svmstream.app.errors import InvalidInput
from svmstream.app.ingest.decode import describe, is_number

RowLocator = Callable[[int], "tuple[str, int | None]"]
"""``i -> (field, index)`` naming row ``i`` in messages: ``("X[3]", 3)`` for a request row,
``("x", None)`` for the single row of a stream entry."""

# The densify rule (should_densify): a densified batch is faster for both kernels up to d = 256 and
# a loss for linear models above (their CSR path is O(nnz) per step); so dense for d <= 256, CSR
# above, and never more than 4M elements (32 MB) per densified batch.  Measurements:
# docs/service.md, "The densify rule".
DENSIFY_MAX_FEATURES = 256
DENSIFY_MAX_ELEMENTS = 1 << 22


def request_row(i: int) -> tuple[str, int | None]:
    """Row ``i`` of a request's ``X``: field ``X[i]``, example index ``i``."""
    return f"X[{i}]", i


# ----------------------------------------------------------------------------- messages


def not_a_number(field: str, value: Any, index: int | None = None) -> InvalidInput:
    return InvalidInput(f"{field}: expected a number, got {describe(value)}", field=field, index=index)


def not_finite(field: str, value: float, index: int | None = None) -> InvalidInput:
    return InvalidInput(f"{field}: {float(value)!r} is not a finite number", field=field, index=index)


def not_a_row(field: str, value: Any, index: int | None = None) -> InvalidInput:
    return InvalidInput(
        f"{field}: expected a list of numbers or an {{index: value}} object, got {describe(value)}",
        field=field,
        index=index,
    )


def no_features(field: str, index: int | None = None) -> InvalidInput:
    return InvalidInput(f"{field}: an example needs at least one feature", field=field, index=index)


def wrong_width(field: str, width: int, whose: str, d: int, index: int | None = None) -> InvalidInput:
    """``"<field>: has <width> features, <whose> expects <d>"``."""
    return InvalidInput(f"{field}: has {width} features, {whose} expects {d}", field=field, index=index)


# ----------------------------------------------------------------------------- dense rows


def first_non_number(row: Sequence[Any]) -> int | None:
    """Position of the first value of ``row`` that is not a JSON number, or None."""
    return next((j for j, v in enumerate(row) if not is_number(v)), None)


def number_error(row: Sequence[Any], field: str, index: int | None = None) -> InvalidInput | None:
    """:func:`not_a_number` for the first value of ``row`` that is not a number (located as
    ``field[j]``), or None.  Booleans are not numbers (numpy would read them as 1/0)."""
    j = first_non_number(row)
    return None if j is None else not_a_number(f"{field}[{j}]", row[j], index)


def numeric_matrix(rows: list[Any]) -> np.ndarray | None:
    """``np.asarray(rows)`` when it is a 2-D array of numbers (booleans not excluded), else None."""
    try:
        arr = np.asarray(rows)
    except (ValueError, TypeError):
        return None
    if arr.ndim != 2 or arr.dtype.kind not in "iuf":
        return None
    return arr


def nonfinite_cells(arr: np.ndarray) -> Iterator[tuple[int, int]]:
    """``(row, column)`` of the first non-finite value of each row that has one, in row order."""
    finite = np.isfinite(arr)
    if finite.all():
        return
    for r in np.flatnonzero(~finite.all(axis=1)):
        yield int(r), int(np.flatnonzero(~finite[r])[0])


def _parse_dense(rows: list[Any], check_bools: bool) -> np.ndarray | None:
    """Fast path: all rows are equal-length lists of numbers.  None if not applicable."""
    arr = numeric_matrix(rows)
    if arr is None:
        return None
    if check_bools:
        for i, row in enumerate(rows):
            error = number_error(row, f"X[{i}]", i)
            if error is not None:
                raise error
    if arr.shape[1] == 0:
        raise no_features("X[0]", 0)
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    for i, j in nonfinite_cells(arr):
        raise not_finite(f"X[{i}][{j}]", arr[i, j], i)
    return arr


def _dense_error(rows: Sequence[Any]) -> InvalidInput:
    """Find the first offending value of a dense batch that ``np.asarray`` rejected."""
    width = None
    for i, row in enumerate(rows):
        if not isinstance(row, list):
            return not_a_row(f"X[{i}]", row, i)
        if width is None:
            width = len(row)
        elif len(row) != width:
            return InvalidInput(
                f"X[{i}]: has {len(row)} features but X[0] has {width}", field=f"X[{i}]", index=i
            )
        error = number_error(row, f"X[{i}]", i)
        if error is not None:
            return error
    return InvalidInput("X: could not be read as a matrix of numbers", field="X")


# ----------------------------------------------------------------------------- sparse rows


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


def sparse_parts(
    rows: Sequence[Any], locate: RowLocator = request_row, check_bools: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR parts ``(indices int64, data float64, indptr int64)`` of rows given as
    ``{"index": value}`` objects (dense lists allowed in between), in the given key order.

    Raises
    ------
    InvalidInput
        For the first row that is neither a list nor an object, then the first bad key,
        then the first value that is not a number, then the first non-finite value.
    """
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
            field, index = locate(i)
            raise not_a_row(field, row, index)
        indptr.append(len(keys))
    indptr_arr = np.asarray(indptr, dtype=np.int64)

    def where(pos: int) -> tuple[str, int | None]:
        return locate(int(np.searchsorted(indptr_arr, pos, side="right") - 1))

    idx = _keys_to_indices(keys)
    if idx is None:  # find the first bad key for the message
        pos = next(p for p, k in enumerate(keys) if not _is_index_key(k))
        field, index = where(pos)
        raise InvalidInput(
            f"{field}: feature key {keys[pos]!r} is not a non-negative integer (0-based index)",
            field=field,
            index=index,
        )
    try:
        data = np.asarray(values)
    except (ValueError, TypeError):
        data = np.asarray([], dtype=object)
    if data.dtype.kind not in "iuf" or data.shape != (len(values),) or check_bools:
        pos = first_non_number(values)
        if pos is not None:
            field, index = where(pos)
            raise not_a_number(f"{field}[{keys[pos]}]", values[pos], index)
    data = data.astype(np.float64, copy=False)
    bad = ~np.isfinite(data)
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        field, index = where(pos)
        raise not_finite(f"{field}[{keys[pos]}]", data[pos], index)
    return idx, data, indptr_arr


def sparse_row(row: dict, locate: RowLocator) -> tuple[np.ndarray, np.ndarray]:
    """``(indices int64, values float64)`` of one ``{index: value}`` row, sorted by index
    (see :func:`sparse_parts` for the checks)."""
    idx, data, _ = sparse_parts((row,), locate)
    order = np.argsort(idx, kind="stable")
    return idx[order], data[order]


def _parse_sparse(rows: list[Any], check_bools: bool) -> sp.csr_matrix:
    idx, data, indptr = sparse_parts(rows, request_row, check_bools)
    d = int(idx.max()) + 1 if idx.size else 1
    X = sp.csr_matrix((data, idx, indptr), shape=(len(rows), d))
    X.sort_indices()
    return X


# ----------------------------------------------------------------------------- batches


def parse_features(
    rows: Any, n_features: int | None = None, check_bools: bool = True
) -> np.ndarray | sp.csr_matrix:
    """Turn the JSON value of a request's ``X`` into a finite float64 matrix.

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
    InvalidInput
        Naming the field and the first offending example: not a list, empty batch,
        ragged rows, non-numbers, NaN/inf, bad sparse keys, index beyond ``n_features``.
    """
    if not isinstance(rows, list):
        raise InvalidInput(f"X: expected a list of examples, got {describe(rows)}", field="X")
    if not rows:
        raise InvalidInput("X: empty batch; send at least one example", field="X")
    X: np.ndarray | sp.csr_matrix | None = None
    if isinstance(rows[0], list):
        X = _parse_dense(rows, check_bools)
        if X is None and not any(isinstance(r, dict) for r in rows):
            raise _dense_error(rows)
    if X is None:
        X = _parse_sparse(rows, check_bools)
    if n_features is not None:
        X = fit_width(X, n_features, "the request (n_features)")
    return X


def fit_width(X, d: int, whose: str):
    """Check ``X`` against dimension ``d``; widen a sparse matrix to ``d`` columns.

    Raises
    ------
    InvalidInput
        ``X[0]`` for a dense matrix of another width; ``X[i]`` for the first sparse row
        with an index ``>= d``.
    """
    if not sp.issparse(X):
        if X.shape[1] != d:
            raise wrong_width("X[0]", X.shape[1], whose, d, 0)
        return X
    if X.shape[1] > d:
        pos = int(np.flatnonzero(X.indices >= d)[0])
        i = int(np.searchsorted(X.indptr, pos, side="right") - 1)
        raise InvalidInput(
            f"X[{i}]: feature index {int(X.indices[pos])} is out of range: {whose} expects {d} features "
            f"(indices 0..{d - 1})",
            field=f"X[{i}]",
            index=i,
        )
    if X.shape[1] < d:
        X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], d))
    return X


def should_densify(n: int, d: int) -> bool:
    """The densify rule for a sparse batch of ``n`` rows of a model of dimension ``d``:
    ``d <= 256`` and ``n * d <= 4M`` elements (32 MB); see the measurements above
    :data:`DENSIFY_MAX_FEATURES`.  Shared by HTTP batches (:func:`conform`) and stream
    batches (:func:`svmstream.app.ingest.stream_entries.parse_stream_entries`)."""
    return d <= DENSIFY_MAX_FEATURES and n * d <= DENSIFY_MAX_ELEMENTS


def densify_if_small(X):
    """A sparse batch of a low-dimensional model as a dense C-contiguous float64 array.

    Done when :func:`should_densify` (the solvers' dense path is faster there: a9a, d = 123,
    1.2x).  Wider sparse batches are handed over as CSR, all the way to the solver.
    """
    if sp.issparse(X) and should_densify(X.shape[0], X.shape[1]):
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
    InvalidInput
        Wrong dense width, sparse index ``>= d``, or a declared dimension that differs.
    """
    if n_features is None:
        return densify_if_small(X)
    if declared is not None and declared != n_features:
        raise InvalidInput(
            f"n_features: the request declares {declared} features, model {model!r} has {n_features}",
            field="n_features",
        )
    return densify_if_small(fit_width(X, n_features, f"model {model!r}"))
