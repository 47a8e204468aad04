"""Decoding JSON input and checking the envelope of a learn/predict request.

:func:`decode_json` is the one JSON decoder of the service's inputs: HTTP bodies
(:func:`decode_body`, status 400 when the body is not JSON) and the ``x`` field of
stream entries.  It reads with orjson and falls back to the standard library parser,
which also reads ``NaN``/``Infinity`` literals, so that such values are rejected later
by field (``"X[0][1]: nan is not a finite number"``) rather than as bad JSON.

:func:`describe` and :func:`is_number` name and classify decoded JSON values in the
messages of every input check (:mod:`.features`, :mod:`.labels`).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from svmstream.app.errors import InvalidInput

LEARN_FIELDS = frozenset({"model", "X", "x", "y", "n_features"})
PREDICT_FIELDS = frozenset({"model", "X", "x", "n_features", "proba"})


def describe(value: Any) -> str:
    """How a decoded JSON value is named in messages (``null``, ``true``, ``a list``, ``'a'``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"
    return repr(value)


def is_number(v: Any) -> bool:
    """A JSON number (``int`` or ``float``, not a boolean)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def may_contain_bools(raw: Any) -> bool:
    """False when the raw JSON text has no ``true``/``false`` token (so no boolean values).

    Only ``bytes`` are scanned; for any other input the answer is True (check the values).
    """
    if isinstance(raw, bytes):
        return b"true" in raw or b"false" in raw
    return True


def decode_json(raw: bytes | str, field: str, status: int = 422) -> Any:
    """Decode JSON text with orjson, falling back to the standard library parser.

    Raises
    ------
    InvalidInput
        ``"<field>: invalid JSON: <orjson's reason>"`` with ``status``.
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise InvalidInput(f"{field}: invalid JSON: {exc}", field=field, status=status) from None


def decode_body(body: bytes) -> Any:
    """Decode a JSON request body (see :func:`decode_json`).

    Raises
    ------
    InvalidInput
        status 400 if the body is not JSON.
    """
    return decode_json(body, "body", status=400)


def check_envelope(obj: Any, allowed: frozenset[str], require_y: bool) -> None:
    """Check the top-level object of a learn/predict request.

    Raises
    ------
    InvalidInput
        If ``obj`` is not an object, has unknown keys, lacks ``X`` (or ``y``), or has a
        ``model`` that is not a string or an ``n_features`` that is not a positive integer.
    """
    if not isinstance(obj, dict):
        raise InvalidInput(f"body: expected a JSON object, got {describe(obj)}", field="body")
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise InvalidInput(
            f"body: unknown field {unknown[0]!r}; allowed fields are {sorted(allowed)}", field=unknown[0]
        )
    if "X" in obj and "x" in obj:
        raise InvalidInput("body: give the examples as 'X' or as 'x', not both", field="x")
    if "X" not in obj and "x" not in obj:
        raise InvalidInput("X: field required (the examples, key 'X' or 'x')", field="X")
    if require_y and "y" not in obj:
        raise InvalidInput("y: field required", field="y")
    model = obj.get("model")
    if model is not None and not isinstance(model, str):
        raise InvalidInput(f"model: expected a string, got {describe(model)}", field="model")
    nf = obj.get("n_features")
    if nf is not None and (not isinstance(nf, int) or isinstance(nf, bool) or nf < 1):
        raise InvalidInput(f"n_features: expected a positive integer, got {describe(nf)}", field="n_features")
    proba = obj.get("proba", False)
    if not isinstance(proba, bool):
        raise InvalidInput(f"proba: expected true or false, got {describe(proba)}", field="proba")
