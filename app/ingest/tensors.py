"""Open Inference Protocol v2 inference requests -> a finite float64 matrix, or an error naming the field.

The protocol (KServe / Triton, "V2 inference protocol") sends a JSON object::

    {"id": "42", "parameters": {...},
     "inputs": [{"name": "input", "shape": [n, d], "datatype": "FP64", "data": [...]}],
     "outputs": [{"name": "label"}, {"name": "proba", "parameters": {"binary_data": true}}]}

``data`` is row-major: flat (``n * d`` values) or nested to exactly ``shape``.  With Triton's
binary tensor data extension (what ``tritonclient`` sends by default) the JSON object is
followed by the raw little-endian bytes of each input that carries the parameter
``binary_data_size``; the header ``Inference-Header-Content-Length`` gives the length of the
JSON part.

:func:`parse_infer_request` turns either form into an :class:`InferRequest` or raises one
:class:`~svmstream.app.errors.InvalidInput` (status 400) whose message starts with the
offending field (``"inputs[0].data[7]: nan is not a finite number (row 0, column 7)"``),
so a bad tensor never reaches a model.  Datatypes: ``FP16``/``FP32``/``FP64`` and the
``INT*``/``UINT*`` types (integers are valid feature values: pixel counts, codes); values
are read as the declared type (an ``FP32`` tensor's JSON numbers are rounded to float32,
as the same tensor sent in binary would be) and then widened to float64.  ``BOOL`` and
``BF16`` are refused: features are numbers.

**Named fields** (``docs/fields.md``): a ``BYTES`` tensor of shape ``[n]`` (or ``[n, 1]``) whose
n elements are each one JSON object, ``{"amount": 31.5, "country": "DE"}``, as text (JSON
``data``: strings, or the objects themselves) or in the binary part (Triton's BYTES layout: each
element a 4-byte little-endian length, then its bytes).  The rows go to the model's schema.

Protocol reference: https://kserve.github.io/website/docs/concepts/architecture/data-plane/v2-protocol
and Triton's binary data extension
(https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_binary_data.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from svmstream.app.errors import InvalidInput
from svmstream.app.ingest.decode import decode_json, describe, is_number, may_contain_bools

#: Datatypes accepted for the input tensor, with the (little-endian) dtype their values are read as.
DATATYPES: dict[str, np.dtype] = {
    name: np.dtype(code)
    for name, code in {
        "FP16": "<f2",
        "FP32": "<f4",
        "FP64": "<f8",
        "INT8": "i1",
        "INT16": "<i2",
        "INT32": "<i4",
        "INT64": "<i8",
        "UINT8": "u1",
        "UINT16": "<u2",
        "UINT32": "<u4",
        "UINT64": "<u8",
    }.items()
}
#: Protocol datatypes refused with a reason (features are numbers).
REFUSED_DATATYPES = frozenset({"BOOL", "BF16"})

REQUEST_FIELDS = frozenset({"id", "parameters", "inputs", "outputs"})
INPUT_FIELDS = frozenset({"name", "shape", "datatype", "parameters", "data"})
OUTPUT_FIELDS = frozenset({"name", "parameters"})


@dataclass(frozen=True)
class RequestedOutput:
    """One entry of a request's ``outputs``: the output's name and whether it goes in the
    binary part of the answer (``None``: the request's ``binary_data_output``)."""

    name: str
    binary: bool | None = None


@dataclass(frozen=True)
class InferRequest:
    """A validated inference request.

    Attributes
    ----------
    X : ndarray of shape (n, d), float64, C-contiguous, or list of n dicts
        Finite feature values of the single input tensor; rows of named fields (a ``BYTES``
        tensor of JSON objects) as a list.
    input_name : str
        The input tensor's name (any name is accepted: a model has one input).
    id : str or None
        The request's ``id``, echoed in the answer.
    outputs : tuple of RequestedOutput or None
        The outputs asked for by name (in request order); ``None``: every output.
    binary_output : bool
        The request parameter ``binary_data_output`` (default false).
    """

    X: np.ndarray
    input_name: str
    id: str | None
    outputs: tuple[RequestedOutput, ...] | None
    binary_output: bool


def _bad(field: str, message: str) -> InvalidInput:
    return InvalidInput(f"{field}: {message}", field=field, status=400)


def _check_keys(obj: dict, allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        field = f"{where}.{unknown[0]}" if where else unknown[0]
        raise _bad(field, f"unknown field; allowed fields are {sorted(allowed)}")


def _parameters(value: Any, field: str) -> dict[str, Any]:
    """A protocol ``parameters`` object: values are booleans, numbers or strings."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _bad(field, f"expected an object, got {describe(value)}")
    for key, v in value.items():
        if not isinstance(v, (bool, int, float, str)):
            raise _bad(f"{field}.{key}", f"a parameter is a boolean, number or string, got {describe(v)}")
    return value


def _flag(params: dict[str, Any], key: str, field: str) -> bool | None:
    value = params.get(key)
    if value is not None and not isinstance(value, bool):
        raise _bad(f"{field}.{key}", f"expected true or false, got {describe(value)}")
    return value


def split_body(body: bytes, header_length: str | None) -> tuple[bytes, bytes]:
    """``(json part, binary part)`` of a request body, split at ``Inference-Header-Content-Length``.

    Raises
    ------
    InvalidInput
        (400) when the header is not an integer between 0 and the body's length.
    """
    if header_length is None:
        return body, b""
    field = "Inference-Header-Content-Length"
    try:
        n = int(header_length)
    except ValueError:
        raise _bad(field, f"expected an integer, got {header_length!r}") from None
    if not 0 <= n <= len(body):
        raise _bad(field, f"{n} is outside the body's {len(body)} bytes")
    return body[:n], body[n:]


def parse_infer_request(body: bytes, header_length: str | None = None) -> InferRequest:
    """Validate an inference request body (JSON, or JSON + binary tensors).

    Parameters
    ----------
    body : bytes
        The whole request body (already size-limited by the caller).
    header_length : str, optional
        The ``Inference-Header-Content-Length`` header: the JSON part's length in bytes.

    Returns
    -------
    InferRequest

    Raises
    ------
    InvalidInput
        (400) naming the field: not JSON, not an object, unknown fields, not exactly one
        input, a bad ``id``/``parameters``/``outputs``, an unsupported datatype, a shape
        other than ``[n, d]`` with ``n, d >= 1``, data whose length or nesting does not
        match the shape, values that are not numbers of the datatype (booleans, strings,
        fractions for an ``INT`` type, out of the type's range), NaN or infinity, or a
        binary part whose size does not match.
    """
    json_part, binary = split_body(body, header_length)
    try:
        obj = decode_json(json_part, "body", status=400)
    except RecursionError:
        raise _bad("body", "JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise _bad("body", f"expected a JSON object, got {describe(obj)}")
    _check_keys(obj, REQUEST_FIELDS, "")
    request_id = obj.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise _bad("id", f"expected a string, got {describe(request_id)}")
    params = _parameters(obj.get("parameters"), "parameters")
    binary_output = bool(_flag(params, "binary_data_output", "parameters"))
    inputs = obj.get("inputs")
    if not isinstance(inputs, list):
        raise _bad("inputs", f"expected a list with one input tensor, got {describe(inputs)}")
    if len(inputs) != 1:
        raise _bad("inputs", f"a model has one input tensor (shape [n, d]); got {len(inputs)}")
    name, X, used = _parse_input(inputs[0], "inputs[0]", binary, may_contain_bools(json_part))
    if used != len(binary):
        raise _bad("body", f"{len(binary) - used} bytes after the binary input tensor")
    return InferRequest(
        X=X,
        input_name=name,
        id=request_id,
        outputs=_parse_outputs(obj.get("outputs")),
        binary_output=binary_output,
    )


def _parse_outputs(value: Any) -> tuple[RequestedOutput, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise _bad("outputs", f"expected a non-empty list (omit it for every output), got {describe(value)}")
    seen: set[str] = set()
    outputs = []
    for k, item in enumerate(value):
        field = f"outputs[{k}]"
        if not isinstance(item, dict):
            raise _bad(field, f"expected an object with a 'name', got {describe(item)}")
        _check_keys(item, OUTPUT_FIELDS, field)
        name = item.get("name")
        if not isinstance(name, str):
            raise _bad(f"{field}.name", f"expected a string, got {describe(name)}")
        if name in seen:
            raise _bad(f"{field}.name", f"output {name!r} is requested twice")
        seen.add(name)
        params = _parameters(item.get("parameters"), f"{field}.parameters")
        if "classification" in params:
            raise _bad(f"{field}.parameters.classification", "the classification extension is not served")
        if "shared_memory_region" in params:
            raise _bad(f"{field}.parameters.shared_memory_region", "shared memory is not served")
        outputs.append(RequestedOutput(name, _flag(params, "binary_data", f"{field}.parameters")))
    return tuple(outputs)


def _parse_shape(value: Any, field: str) -> tuple[int, int]:
    if not isinstance(value, list) or not all(is_number(v) and int(v) == v for v in value):
        raise _bad(field, f"expected a list of integers [n, d], got {describe(value)}")
    if len(value) != 2:
        raise _bad(
            field,
            f"{value} has {len(value)} dimension{'' if len(value) == 1 else 's'}; the input is a matrix of shape [n, d]",
        )
    n, d = (int(v) for v in value)
    if n < 1 or d < 1:
        raise _bad(field, f"{value}: need n >= 1 rows and d >= 1 features")
    return n, d


def _parse_input(tensor: Any, field: str, binary: bytes, check_bools: bool) -> tuple[str, np.ndarray, int]:
    """``(name, X, bytes of the binary part used)`` of one input tensor."""
    if not isinstance(tensor, dict):
        raise _bad(field, f"expected an input tensor object, got {describe(tensor)}")
    _check_keys(tensor, INPUT_FIELDS, field)
    for key in ("name", "shape", "datatype"):
        if key not in tensor:
            raise _bad(f"{field}.{key}", "field required")
    name = tensor["name"]
    if not isinstance(name, str):
        raise _bad(f"{field}.name", f"expected a string, got {describe(name)}")
    datatype = tensor["datatype"]
    if datatype == "BYTES":
        return name, *_named_rows(tensor, field, binary)
    if datatype in REFUSED_DATATYPES:
        raise _bad(
            f"{field}.datatype", f"{datatype} is not supported: features are numbers (send FP32 or FP64)"
        )
    if datatype not in DATATYPES:
        raise _bad(
            f"{field}.datatype", f"unknown datatype {describe(datatype)}; supported: {sorted(DATATYPES)}"
        )
    n, d = _parse_shape(tensor["shape"], f"{field}.shape")
    params = _parameters(tensor.get("parameters"), f"{field}.parameters")
    if "shared_memory_region" in params:
        raise _bad(f"{field}.parameters.shared_memory_region", "shared memory is not served")
    size = params.get("binary_data_size")
    dtype = DATATYPES[datatype]
    if size is None:
        if "data" not in tensor:
            raise _bad(f"{field}.data", "field required (or the parameter binary_data_size)")
        values = _json_values(tensor["data"], f"{field}.data", n, d, datatype, check_bools)
        used = 0
    else:
        if "data" in tensor:
            raise _bad(f"{field}.data", "give 'data' or the parameter binary_data_size, not both")
        values = _binary_values(binary, size, f"{field}.parameters.binary_data_size", n, d, datatype)
        used = size
    return name, _to_float64(values, dtype, f"{field}.data", d, datatype), used


def _named_rows(tensor: dict, field: str, binary: bytes) -> tuple[list[dict], int]:
    """``(rows, bytes of the binary part used)`` of a ``BYTES`` tensor of JSON objects."""
    shape = tensor["shape"]
    if not (
        isinstance(shape, list) and 1 <= len(shape) <= 2 and all(is_number(v) and int(v) == v for v in shape)
    ):
        raise _bad(
            f"{field}.shape", f"a BYTES input of named fields has shape [n] or [n, 1], got {describe(shape)}"
        )
    n = int(shape[0])
    if n < 1 or (len(shape) == 2 and int(shape[1]) != 1):
        raise _bad(
            f"{field}.shape", f"{shape}: a BYTES input of named fields has shape [n] or [n, 1], n >= 1"
        )
    size = _parameters(tensor.get("parameters"), f"{field}.parameters").get("binary_data_size")
    if size is None:
        data = tensor.get("data")
        if isinstance(data, list) and len(shape) == 2:
            data = [v[0] if isinstance(v, list) and len(v) == 1 else v for v in data]
        if not isinstance(data, list) or len(data) != n:
            raise _bad(f"{field}.data", f"expected {n} JSON objects (shape {shape}), got {describe(data)}")
        elements, used = data, 0
    else:
        if not is_number(size) or int(size) != size or not 0 <= size <= len(binary):
            raise _bad(f"{field}.parameters.binary_data_size", f"{describe(size)} bytes do not fit the body")
        elements, used = (
            _bytes_elements(binary[: int(size)], n, f"{field}.parameters.binary_data_size"),
            int(size),
        )
    rows = []
    for i, value in enumerate(elements):
        if isinstance(value, (str, bytes)):
            value = decode_json(
                value if isinstance(value, bytes) else value.encode(), f"{field}.data[{i}]", status=400
            )
        if not isinstance(value, dict):
            raise _bad(f"{field}.data[{i}]", f"expected a JSON object of named fields, got {describe(value)}")
        rows.append(value)
    return rows, used


def _bytes_elements(raw: bytes, n: int, field: str) -> list[bytes]:
    """The n elements of a binary BYTES tensor (each a 4-byte little-endian length, then its bytes)."""
    out, pos = [], 0
    for _ in range(n):
        if pos + 4 > len(raw):
            raise _bad(field, f"the binary BYTES tensor ends after {len(out)} of {n} elements")
        length = int.from_bytes(raw[pos : pos + 4], "little")
        out.append(raw[pos + 4 : pos + 4 + length])
        pos += 4 + length
    if pos != len(raw):
        raise _bad(field, f"the binary BYTES tensor has {len(raw) - pos} bytes after its {n} elements")
    return out


def _binary_values(binary: bytes, size: Any, field: str, n: int, d: int, datatype: str) -> np.ndarray:
    dtype = DATATYPES[datatype]
    if not is_number(size) or int(size) != size or size < 0:
        raise _bad(field, f"expected a non-negative integer, got {describe(size)}")
    need = n * d * dtype.itemsize
    if size != need:
        raise _bad(field, f"is {size} bytes; shape [{n}, {d}] of {datatype} needs {need}")
    if len(binary) < size:
        raise _bad(field, f"is {size} bytes but the body's binary part has {len(binary)}")
    return np.frombuffer(binary, dtype=dtype, count=n * d)


def _json_values(data: Any, field: str, n: int, d: int, datatype: str, check_bools: bool) -> np.ndarray:
    """The flat values of a JSON ``data`` field, as a numeric array (dtype of numpy's choosing)."""
    if not isinstance(data, list):
        raise _bad(field, f"expected a list of numbers (flat or nested to the shape), got {describe(data)}")
    try:
        arr = np.asarray(data)
    except (ValueError, TypeError, OverflowError):
        raise _bad(
            field, f"nested lists of unequal lengths (or nested deeper than the shape [{n}, {d}])"
        ) from None
    if arr.ndim > 1 and arr.shape != (n, d):
        raise _bad(field, f"nested data has shape {list(arr.shape)}, the declared shape is [{n}, {d}]")
    flat = arr.reshape(-1)
    if flat.size != n * d:
        raise _bad(field, f"has {flat.size} values; shape [{n}, {d}] needs {n * d}")
    integral = datatype[0] in "IU"
    # numpy reads booleans among numbers as 1/0: scan the values when the JSON text has a boolean token
    if flat.dtype.kind not in "iuf" or check_bools:
        objects = np.asarray(data, dtype=object).reshape(-1)
        for k, v in enumerate(objects.tolist()):
            if not is_number(v):
                raise _bad(f"{field}[{k}]", f"expected a number, got {describe(v)}{_cell(k, d)}")
    if flat.dtype.kind not in "iuf":  # e.g. integers beyond 64 bits
        raise _bad(field, f"values out of the range of {datatype}")
    if integral and flat.dtype.kind == "f":
        fractional = np.flatnonzero(~np.isfinite(flat) | (flat != np.round(flat)))
        if fractional.size:
            k = int(fractional[0])
            raise _bad(
                f"{field}[{k}]", f"{datatype} data must be integers, got {flat[k].item()!r}{_cell(k, d)}"
            )
    return flat


def _cell(k: int, d: int) -> str:
    return f" (row {k // d}, column {k % d})"


def _to_float64(values: np.ndarray, dtype: np.dtype, field: str, d: int, datatype: str) -> np.ndarray:
    """Read ``values`` as ``dtype`` (range-checked), then widen to a C-contiguous float64 (n, d) matrix."""
    if dtype.kind == "f":
        if values.dtype.kind == "f":
            bad = np.flatnonzero(~np.isfinite(values))
            if bad.size:
                k = int(bad[0])
                raise _bad(f"{field}[{k}]", f"{float(values[k])!r} is not a finite number{_cell(k, d)}")
        with np.errstate(over="ignore"):
            typed = values.astype(dtype, copy=False)
        bad = np.flatnonzero(~np.isfinite(typed))
        if bad.size:
            k = int(bad[0])
            raise _bad(f"{field}[{k}]", f"{values[k].item()!r} overflows {datatype}{_cell(k, d)}")
    else:
        info = np.iinfo(dtype)
        if values.dtype != dtype and values.size:
            outside = np.flatnonzero((values < info.min) | (values > info.max))
            if outside.size:
                k = int(outside[0])
                raise _bad(
                    f"{field}[{k}]", f"{values[k].item()!r} is out of the range of {datatype}{_cell(k, d)}"
                )
        typed = values.astype(dtype, copy=False)
    return np.ascontiguousarray(typed, dtype=np.float64).reshape(-1, d)
