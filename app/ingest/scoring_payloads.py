"""MLflow scoring payloads (``POST /invocations``) -> a finite float64 matrix, or an error naming the field.

MLflow's scoring protocol (``mlflow.pyfunc.scoring_server``, MLflow >= 2) sends a JSON object
with exactly one of four input fields and optional ``params``:

===================== ====================================================================
field                 rows
===================== ====================================================================
``dataframe_split``   ``{"columns": [...], "data": [[...], ...], "index": [...]}`` (pandas
                      ``DataFrame.to_dict(orient="split")``; ``index`` is ignored)
``dataframe_records`` ``[{"col": value, ...}, ...]`` (pandas ``orient="records"``)
``instances``         rows ``[[...], ...]`` or records ``[{"col": value}, ...]`` (TF serving)
``inputs``            rows ``[[...], ...]``, named columns ``{"col": [v0, v1, ...], ...}``, or
                      one named matrix ``{"name": [[...], ...]}`` (TF serving, columnar)
===================== ====================================================================

Columns are taken in the order given (the order of ``columns``, of the first record's keys,
of the ``inputs`` object's keys), as pandas builds the DataFrame: the service keeps no column
names, so a client must send the features in the order the model learned them.  Every
record must have the same columns.  Values must be numbers (no strings, booleans or nulls),
finite.  The exception: records for a model that learns named fields are its schema's rows
(strings, booleans, nulls and any column order allowed; ``docs/fields.md``).

:func:`parse_scoring_payload` returns a :class:`ScoringRequest` or raises one
:class:`~svmstream.app.errors.InvalidInput` (status 400) whose message starts with the
offending cell (``'dataframe_records[3]["mean radius"]: expected a number, got null'``).

``params``: ``model`` (which model; default: the service's default model) and ``output``
(``label``, the default; ``decision``; ``proba``).

Reference: https://mlflow.org/docs/latest/deployment/deploy-model-locally (scoring payloads).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from svmstream.app.errors import InvalidInput
from svmstream.app.ingest.decode import describe
from svmstream.app.ingest.features import first_non_number, nonfinite_cells, numeric_matrix

INPUT_FORMATS = ("dataframe_split", "dataframe_records", "instances", "inputs")
PARAMS = frozenset({"model", "output", "version"})
OUTPUTS = ("label", "decision", "proba")
SPLIT_FIELDS = frozenset({"columns", "data", "index"})

#: ``(row, column) -> locator`` of a cell in messages.
CellLocator = Callable[[int, int], str]


@dataclass(frozen=True)
class ScoringRequest:
    """A validated scoring request.

    Attributes
    ----------
    X : ndarray of shape (n, d), float64, C-contiguous
        Finite feature values; or the list of records of a model that learns named fields.
    input_format : str
        Which of :data:`INPUT_FORMATS` carried the rows (names the field in messages).
    model : str or None
        ``params.model``; None: the default model.
    output : str
        ``params.output``: one of :data:`OUTPUTS`.
    version : int or None
        ``params.version``: a version of the model's history (``docs/versions.md``); None: live.
    """

    X: np.ndarray | list
    input_format: str
    model: str | None
    output: str
    version: int | None = None


def _bad(field: str, message: str) -> InvalidInput:
    return InvalidInput(f"{field}: {message}", field=field, status=400)


def _key(name: str) -> str:
    """A column name as a JSON string inside a locator: ``["mean radius"]``."""
    return f"[{orjson.dumps(name).decode()}]"


def parse_scoring_payload(
    obj: Any, check_bools: bool = True, named: Callable[[str | None], bool] | None = None
) -> ScoringRequest:
    """Validate a decoded MLflow scoring payload.

    Parameters
    ----------
    obj : Any
        The decoded JSON body.
    check_bools : bool
        Scan the values for JSON booleans (refused); callers that know the raw body has no
        ``true``/``false`` token skip the scan (:func:`~svmstream.app.ingest.decode.may_contain_bools`).
    named : callable, optional
        ``named(params.model)``: the model learns named fields (``docs/fields.md``); then records
        (``dataframe_records``, record ``instances``) stay a list of objects for its schema.

    Returns
    -------
    ScoringRequest

    Raises
    ------
    InvalidInput
        (400) naming the field: not an object, not exactly one input field, unknown
        fields or ``params``, rows that are not lists (or records that are not objects),
        columns that differ between records, ragged rows, a width that differs from
        ``columns``, values that are not numbers, NaN or infinity, no rows, no features.
    """
    if not isinstance(obj, dict):
        raise _bad("body", f"expected a JSON object with one of {list(INPUT_FORMATS)}, got {describe(obj)}")
    unknown = sorted(set(obj) - set(INPUT_FORMATS) - {"params"})
    if unknown:
        raise _bad(
            unknown[0], f"unknown field; the input goes in one of {list(INPUT_FORMATS)}, plus 'params'"
        )
    given = [f for f in INPUT_FORMATS if f in obj]
    if len(given) != 1:
        raise _bad("body", f"expected exactly one of {list(INPUT_FORMATS)}, got {given or 'none'}")
    fmt = given[0]
    model, output, version = _parse_params(obj.get("params"))
    value = obj[fmt]
    records = fmt in ("dataframe_records", "instances") and isinstance(value, list) and value
    if records and isinstance(value[0], dict) and named is not None and named(model):
        return ScoringRequest(X=value, input_format=fmt, model=model, output=output, version=version)
    X = _PARSERS[fmt](value, fmt, check_bools)
    return ScoringRequest(X=X, input_format=fmt, model=model, output=output, version=version)


def _parse_params(params: Any) -> tuple[str | None, str, int | None]:
    if params is None:
        return None, "label", None
    if not isinstance(params, dict):
        raise _bad("params", f"expected an object, got {describe(params)}")
    unknown = sorted(set(params) - PARAMS)
    if unknown:
        raise _bad(f"params.{unknown[0]}", f"unknown parameter; known: {sorted(PARAMS)}")
    model = params.get("model")
    if model is not None and not isinstance(model, str):
        raise _bad("params.model", f"expected a model name (string), got {describe(model)}")
    output = params.get("output", "label")
    if output not in OUTPUTS:
        raise _bad("params.output", f"expected one of {list(OUTPUTS)}, got {describe(output)}")
    version = params.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
        raise _bad("params.version", f"expected a version number (an integer >= 0), got {describe(version)}")
    return model, output, version


# ----------------------------------------------------------------------------- the four forms


def _split(value: Any, field: str, check_bools: bool) -> np.ndarray:
    if not isinstance(value, dict):
        raise _bad(field, f"expected an object with 'data' (and 'columns'), got {describe(value)}")
    unknown = sorted(set(value) - SPLIT_FIELDS)
    if unknown:
        raise _bad(f"{field}.{unknown[0]}", f"unknown field; allowed: {sorted(SPLIT_FIELDS)}")
    if "data" not in value:
        raise _bad(f"{field}.data", "field required")
    columns = value.get("columns")
    if columns is not None and not isinstance(columns, list):
        raise _bad(f"{field}.columns", f"expected a list of column names, got {describe(columns)}")
    X = _rows(value["data"], f"{field}.data", check_bools)
    if columns is not None and len(columns) != X.shape[1]:
        raise _bad(f"{field}.data[0]", f"has {X.shape[1]} values but 'columns' names {len(columns)}")
    return X


def _records_or_rows(value: Any, field: str, check_bools: bool) -> np.ndarray:
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return _records(value, field, check_bools)
    return _rows(value, field, check_bools)


def _inputs(value: Any, field: str, check_bools: bool) -> np.ndarray:
    if not isinstance(value, dict):
        return _rows(value, field, check_bools)
    if not value:
        raise _bad(field, "empty object; send named columns or rows")
    if len(value) == 1:
        ((name, only),) = value.items()
        if isinstance(only, list) and only and isinstance(only[0], list):
            return _rows(only, f"{field}{_key(name)}", check_bools)  # one named matrix
    return _columns(value, field, check_bools)


def _columns(value: dict, field: str, check_bools: bool) -> np.ndarray:
    names = list(value)
    n = None
    for name in names:
        column = value[name]
        if not isinstance(column, list):
            raise _bad(
                f"{field}{_key(name)}", f"expected a list of values (one per row), got {describe(column)}"
            )
        if n is None:
            n = len(column)
        elif len(column) != n:
            raise _bad(f"{field}{_key(name)}", f"has {len(column)} values, {field}{_key(names[0])} has {n}")
    rows = [list(row) for row in zip(*(value[name] for name in names))]
    return _matrix(rows, lambda i, j: f"{field}{_key(names[j])}[{i}]", field, check_bools)


def _records(value: Any, field: str, check_bools: bool) -> np.ndarray:
    if not isinstance(value, list) or not value:
        raise _bad(
            field, f"expected a non-empty list of records (objects of named values), got {describe(value)}"
        )
    names: list[str] = []
    rows = []
    for i, record in enumerate(value):
        if not isinstance(record, dict):
            raise _bad(f"{field}[{i}]", f"expected a record (object of named values), got {describe(record)}")
        if i == 0:
            names = list(record)
            columns = set(names)
            if not names:
                raise _bad(f"{field}[0]", "empty record: a record names its feature values")
        elif record.keys() != columns:
            missing = [c for c in names if c not in record]
            if missing:
                raise _bad(
                    f"{field}[{i}]",
                    f"missing column {missing[0]!r} (every record needs the columns of the first)",
                )
            extra = next(c for c in record if c not in columns)
            raise _bad(f"{field}[{i}]{_key(extra)}", "a column the first record does not have")
        rows.append([record[c] for c in names])
    return _matrix(rows, lambda i, j: f"{field}[{i}]{_key(names[j])}", field, check_bools)


def _rows(value: Any, field: str, check_bools: bool) -> np.ndarray:
    if not isinstance(value, list):
        raise _bad(field, f"expected a list of rows, got {describe(value)}")
    for i, row in enumerate(value):
        if not isinstance(row, list):
            raise _bad(f"{field}[{i}]", f"expected a row (a list of numbers), got {describe(row)}")
    return _matrix(value, lambda i, j: f"{field}[{i}][{j}]", field, check_bools)


def _matrix(rows: list[list[Any]], locate: CellLocator, field: str, check_bools: bool) -> np.ndarray:
    """The finite float64 matrix of equal-length rows of numbers (the helpers of
    :mod:`svmstream.app.ingest.features`, with this payload's locators)."""
    if not rows:
        raise _bad(field, "no rows; send at least one")
    arr = numeric_matrix(rows)
    # numpy gives no 2-D numeric array for ragged rows or non-numbers, and reads booleans as 1/0:
    # then (or when the JSON text has a boolean token) look for the first offending cell
    if arr is None or check_bools:
        width = len(rows[0])
        for i, row in enumerate(rows):
            if len(row) != width:
                where = _row_name(locate, i)
                raise _bad(where, f"has {len(row)} values, the first row has {width}")
            j = first_non_number(row)
            if j is not None:
                raise _bad(locate(i, j), f"expected a number, got {describe(row[j])}")
    if arr is None:
        raise _bad(field, "could not be read as a matrix of numbers")
    if arr.shape[1] == 0:
        raise _bad(_row_name(locate, 0), "a row needs at least one feature")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    for i, j in nonfinite_cells(arr):
        raise _bad(locate(i, j), f"{float(arr[i, j])!r} is not a finite number")
    return arr


def _row_name(locate: CellLocator, i: int) -> str:
    """The locator of row ``i``: the locator of its first cell without the last subscript."""
    cell = locate(i, 0)
    return cell[: cell.rindex("[")]


_PARSERS: dict[str, Callable[[Any, str, bool], np.ndarray]] = {
    "dataframe_split": _split,
    "dataframe_records": _records,
    "instances": _records_or_rows,
    "inputs": _inputs,
}
