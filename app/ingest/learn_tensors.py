"""``POST /learn`` in the Open Inference Protocol's binary tensor form (Triton's binary data
extension, as ``tritonclient`` sends with ``binary_data=True``): large batches without JSON.

The body is a JSON header of ``Inference-Header-Content-Length`` bytes followed by the raw
little-endian bytes of each tensor that carries the parameter ``binary_data_size``, in the
order of ``inputs``::

    {"model": "digits",
     "inputs": [{"name": "X", "datatype": "FP32", "shape": [n, d],
                 "parameters": {"binary_data_size": 4nd}},
                {"name": "y", "datatype": "INT64", "shape": [n],
                 "parameters": {"binary_data_size": 8n}}]}

``X`` is the ``[n, d]`` features (the datatypes of ``/v2/models/{name}/infer``,
:mod:`svmstream.app.ingest.tensors`); ``y`` the ``[n]`` labels: ``INT64`` (or another integer
type), ``FP64``/``FP32``, or ``BYTES`` (strings: each a 4-byte little-endian length and its
UTF-8 bytes), in binary or as JSON ``data``.  The labels then meet the model exactly as a JSON
``/learn`` body's ``y`` (:meth:`~svmstream.app.ingest.labels.LabelCodec.encode_with_new`).
Errors are 422 naming the field (``inputs[1].shape``), as every ``/learn`` error.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from svmstream.app.errors import InvalidInput
from svmstream.app.ingest.decode import decode_json, describe, may_contain_bools
from svmstream.app.ingest.tensors import DATATYPES, _parse_input, split_body

LEARN_TENSOR_FIELDS = frozenset({"model", "n_features", "inputs"})
LABEL_TENSOR_FIELDS = frozenset({"name", "shape", "datatype", "parameters", "data"})
LABEL_DATATYPES = frozenset(DATATYPES) | {"BYTES"}


@dataclass(frozen=True)
class LearnTensors:
    """A decoded binary ``/learn`` body: ``X`` (n, d) float64 finite, ``labels`` (n values as a
    JSON body would give them: ints, floats or strings), ``model`` and ``n_features`` or None."""

    X: np.ndarray
    labels: list[Any]
    model: str | None
    n_features: int | None


def _bad(field: str, message: str) -> InvalidInput:
    return InvalidInput(f"{field}: {message}", field=field)


def parse_learn_tensors(body: bytes, header_length: str | None) -> LearnTensors:
    """Validate a binary ``/learn`` body.  Raises InvalidInput (422; 400 for a header part that
    is not JSON) naming the field."""
    if header_length is None:
        raise _bad(
            "Inference-Header-Content-Length", "required with a binary body (application/octet-stream)"
        )
    try:
        json_part, binary = split_body(body, header_length)
    except InvalidInput as exc:
        raise _bad(exc.field or "Inference-Header-Content-Length", exc.message.split(": ", 1)[-1]) from None
    obj = decode_json(json_part, "body", status=400)
    if not isinstance(obj, dict):
        raise _bad("body", f"expected a JSON object, got {describe(obj)}")
    unknown = sorted(set(obj) - LEARN_TENSOR_FIELDS)
    if unknown:
        raise _bad(unknown[0], f"unknown field; allowed fields are {sorted(LEARN_TENSOR_FIELDS)}")
    model, declared = obj.get("model"), obj.get("n_features")
    if model is not None and not isinstance(model, str):
        raise _bad("model", f"expected a string, got {describe(model)}")
    if declared is not None and (isinstance(declared, bool) or not isinstance(declared, int) or declared < 1):
        raise _bad("n_features", f"expected a positive integer, got {describe(declared)}")
    inputs = obj.get("inputs")
    if not isinstance(inputs, list) or len(inputs) != 2:
        raise _bad("inputs", f"expected two tensors, X [n, d] then y [n]; got {describe(inputs)}")
    try:
        _, X, used = _parse_input(inputs[0], "inputs[0]", binary, may_contain_bools(json_part))
    except InvalidInput as exc:
        raise _bad(exc.field or "inputs[0]", exc.message.split(": ", 1)[-1]) from None
    labels, used_y = _labels(inputs[1], "inputs[1]", binary[used:], X.shape[0])
    if used + used_y != len(binary):
        raise _bad("body", f"{len(binary) - used - used_y} bytes after the binary tensors")
    return LearnTensors(X=X, labels=labels, model=model, n_features=declared)


def _labels(tensor: Any, field: str, binary: bytes, n: int) -> tuple[list[Any], int]:
    """``(labels, bytes of the binary part used)`` of the ``y`` tensor of ``n`` rows."""
    if not isinstance(tensor, dict):
        raise _bad(field, f"expected a tensor object, got {describe(tensor)}")
    unknown = sorted(set(tensor) - LABEL_TENSOR_FIELDS)
    if unknown:
        raise _bad(
            f"{field}.{unknown[0]}", f"unknown field; allowed fields are {sorted(LABEL_TENSOR_FIELDS)}"
        )
    datatype = tensor.get("datatype")
    if datatype not in LABEL_DATATYPES:
        raise _bad(
            f"{field}.datatype", f"expected one of {sorted(LABEL_DATATYPES)}, got {describe(datatype)}"
        )
    shape = tensor.get("shape")
    if shape != [n] or isinstance(shape[0], bool):
        raise _bad(f"{field}.shape", f"expected [{n}] (one label per row of X), got {describe(shape)}")
    params = tensor.get("parameters") or {}
    size = params.get("binary_data_size") if isinstance(params, dict) else None
    if size is None:
        data = tensor.get("data")
        if not isinstance(data, list) or len(data) != n:
            raise _bad(f"{field}.data", f"expected a list of {n} labels (or the parameter binary_data_size)")
        return data, 0
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= len(binary):
        raise _bad(
            f"{field}.parameters.binary_data_size", f"expected 0 to {len(binary)} bytes, got {describe(size)}"
        )
    raw = binary[:size]
    if datatype == "BYTES":
        return _strings(raw, n, f"{field}.parameters.binary_data_size"), size
    dtype = DATATYPES[datatype]
    if size != n * dtype.itemsize:
        raise _bad(
            f"{field}.parameters.binary_data_size",
            f"is {size} bytes; [{n}] of {datatype} needs {n * dtype.itemsize}",
        )
    return np.frombuffer(raw, dtype=dtype, count=n).tolist(), size


def _strings(raw: bytes, n: int, field: str) -> list[str]:
    """``n`` BYTES elements: a 4-byte little-endian length, then that many UTF-8 bytes each."""
    out, at = [], 0
    for i in range(n):
        if at + 4 > len(raw):
            raise _bad(field, f"the binary labels end before element {i}")
        (length,) = struct.unpack_from("<I", raw, at)
        at += 4
        if at + length > len(raw):
            raise _bad(field, f"element {i} is {length} bytes, past the end of the labels")
        try:
            out.append(raw[at : at + length].decode("utf-8"))
        except UnicodeDecodeError:
            raise _bad(f"y[{i}]", "not UTF-8") from None
        at += length
    if at != len(raw):
        raise _bad(field, f"{len(raw) - at} bytes after {n} labels")
    return out
