"""Decoding JSON input and checking the envelope of a learn/predict request.

:func:`decode_json` is the one JSON decoder of the service's inputs: HTTP bodies
(:func:`decode_body`, status 400 when the body is not JSON) and the ``x`` field of
stream entries.  It reads with orjson and falls back to the standard library parser,
which also reads ``NaN``/``Infinity`` literals, so that such values are rejected later
by field (``"X[0][1]: nan is not a finite number"``) rather than as bad JSON.  Before
either parser runs, :func:`check_depth` bounds the nesting to :data:`MAX_JSON_DEPTH`
(the standard library parser recurses once per level: 5,000 levels were a
``RecursionError``, a 500 and a traceback per request).

:func:`describe` and :func:`is_number` name and classify decoded JSON values in the
messages of every input check (:mod:`.features`, :mod:`.labels`).
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import orjson

from svmstream.app.errors import InvalidInput

MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays/objects accepted in any JSON input.  The service's bodies
need 3 (``{"X": [[...]]}``); job ``params`` a few more."""

# the depth scan: structural bytes kept by bytes.translate, strings cut by a regex, then
# +1 / -1 per bracket summed by numpy
_NOT_STRUCTURAL = bytes(b for b in range(256) if b not in b'[]{}"')
_STRING = re.compile(rb'"[^"]*"')  # no backslash in the text: a string ends at the next quote
_STRING_ESCAPED = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_STEP = np.zeros(256, dtype=np.int64)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1

LEARN_FIELDS = frozenset({"model", "X", "x", "y", "w", "n_features"})
PREDICT_FIELDS = frozenset({"model", "X", "x", "n_features", "proba", "version", "remember", "interval"})


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


def json_depth(raw: bytes | str) -> int:
    """Deepest nesting of ``[``/``{`` in JSON text, brackets inside strings not counted.

    ``bytes.translate`` keeps the structural bytes (brackets and quotes: 2 per dense row);
    with no more opening brackets than :data:`MAX_JSON_DEPTH` among them the count is
    returned, else a regex drops the strings (with their escapes, cut from the whole text
    when it has a backslash) and numpy sums the brackets.  About a third of orjson's time
    to parse the same body: 0.36 ms for 430 kB of 1,000 dense rows of 22 numbers.  Malformed text gets some number; the parser
    rejects it afterwards.
    """
    if isinstance(raw, str):  # stream entries' x may come decoded: count before encoding
        opening = raw.count("[") + raw.count("{")
        if opening <= MAX_JSON_DEPTH:
            return opening
        raw = raw.encode("utf-8", "surrogatepass")
    if b"\\" in raw:  # escaped quotes: cut the strings on the whole text first
        raw = _STRING_ESCAPED.sub(b"", raw)
    structural = raw.translate(None, _NOT_STRUCTURAL)
    opening = structural.count(b"[") + structural.count(b"{")
    if opening <= MAX_JSON_DEPTH:
        return opening
    # two adjacent quotes change no bracket's in-string parity: dropping them first (C speed)
    # leaves the regex only the strings with brackets inside (sparse rows have 2 quotes per value)
    brackets = _STRING.sub(b"", structural.replace(b'""', b""))
    steps = _STEP[np.frombuffer(brackets, dtype=np.uint8)]
    return int(np.cumsum(steps).max(initial=0))


def check_depth(raw: bytes | str, field: str) -> None:
    """Refuse JSON nested deeper than :data:`MAX_JSON_DEPTH`, before it is parsed.

    Raises
    ------
    InvalidInput
        (422) ``"<field>: JSON nested deeper than 64 levels (...)"``.
    """
    depth = json_depth(raw)
    if depth > MAX_JSON_DEPTH:
        raise InvalidInput(
            f"{field}: JSON nested deeper than {MAX_JSON_DEPTH} levels ({depth} found); "
            "send flat rows of numbers",
            field=field,
        )


def decode_json(raw: bytes | str, field: str, status: int = 422) -> Any:
    """Decode JSON text with orjson, falling back to the standard library parser.

    Raises
    ------
    InvalidInput
        ``"<field>: invalid JSON: <orjson's reason>"`` with ``status``; 422 for JSON nested
        deeper than :data:`MAX_JSON_DEPTH` (:func:`check_depth`).
    """
    check_depth(raw, field)
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
