"""Values for the JSON header of a snapshot file, and back."""

from __future__ import annotations

import sys

import numpy as np


def jsonable(value):
    """``value`` with numpy scalars as Python numbers and arrays as lists (a JSON header
    takes no numpy); dict keys become strings."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def interned(value):
    """``value`` (decoded JSON) with every dict key and short string interned.  A restored
    model keeps its header's figures (``stats``: ~25 keys in nested dicts) and JSON decoding
    makes new key strings for every file: 10,000 restored models held ~1.5 KB each of copies
    of the same keys."""
    if isinstance(value, dict):
        return {interned(k): interned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [interned(v) for v in value]
    return sys.intern(value) if type(value) is str and len(value) <= 64 else value
