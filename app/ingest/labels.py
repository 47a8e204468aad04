"""Labels: a model's JSON labels <-> class indices, and the label of a stream entry.

Labels are numbers or strings from the model's class set; numeric labels compare
numerically (``1.0 == 1``).  They are encoded as class indices ``0..K-1`` (``int64``)
into the model's sorted class list (:func:`svmstream.app.models.config.normalise_classes`).

One lookup (:meth:`LabelCodec.lookup`) serves both inputs: a request's ``y`` is
rejected as a whole at its first unknown label (:meth:`LabelCodec.encode`, field
``y[i]``), a batch of stream entries rejects each entry with an unknown label on its own
(:meth:`LabelCodec.encode_each`, field ``y``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

from svmstream.app.errors import InvalidInput
from svmstream.app.ingest.decode import describe


class LabelCodec:
    """Map JSON labels to class indices of a model and back.

    Parameters
    ----------
    classes : list of int/float or list of str
        The model's normalised (sorted) class list, see
        :func:`svmstream.app.models.config.normalise_classes`.
    """

    def __init__(self, classes: Sequence[Any]):
        self.classes = list(classes)
        self.numeric = not isinstance(self.classes[0], str)
        self._values = np.asarray(self.classes, dtype=np.float64) if self.numeric else None
        self._index = {c: k for k, c in enumerate(self.classes)}

    def lookup(self, labels: Sequence[Any]) -> tuple[np.ndarray, list[tuple[int, Any]]]:
        """Class index of every label, and the labels outside the class set.

        Returns
        -------
        idx : ndarray of shape (n,), int64
            Class indices (meaningless at the bad positions).
        bad : list of (int, label)
            Position and value (as looked up: an integral float label that is read one by
            one is compared as an ``int``) of each unknown label or label of the wrong
            type.  When the labels read as one numeric array, booleans come first (a
            request's error names the first boolean), then the others in order; otherwise
            in order.
        """
        if self.numeric:
            found = self._lookup_numbers(labels)
            if found is not None:
                return found
        out = np.zeros(len(labels), dtype=np.int64)
        bad = []
        index = self._index
        for i, v in enumerate(labels):
            if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                bad.append((i, v))
                continue
            if self.numeric and isinstance(v, float) and v.is_integer():
                v = int(v)
            k = index.get(v) if isinstance(v, str) != self.numeric else None
            if k is None:
                bad.append((i, v))
            else:
                out[i] = k
        return out, bad

    def _lookup_numbers(self, labels: Sequence[Any]) -> tuple[np.ndarray, list[tuple[int, Any]]] | None:
        """:meth:`lookup` in one vectorised pass when the labels read as a numeric array."""
        try:
            arr = np.asarray(labels)
        except (ValueError, TypeError):
            return None
        if arr.dtype.kind not in "iuf" or arr.shape != (len(labels),):
            return None
        bools = [i for i, v in enumerate(labels) if v.__class__ is bool]
        arr = arr.astype(np.float64, copy=False)
        idx = np.searchsorted(self._values, arr)
        np.minimum(idx, len(self.classes) - 1, out=idx)
        unknown = np.flatnonzero(self._values[idx] != arr).tolist()
        if bools:
            seen = set(bools)
            unknown = bools + [i for i in unknown if i not in seen]
        return idx.astype(np.int64, copy=False), [(i, labels[i]) for i in unknown]

    def encode(self, labels: Any) -> np.ndarray:
        """Encode a request's JSON list of labels.

        Returns
        -------
        ndarray of shape (n,), int64
            Indices into :attr:`classes`.

        Raises
        ------
        InvalidInput
            ``"y[i]: unknown label ...; model classes are [...]"`` for the first label
            outside the class set (or of the wrong type); also if ``labels`` is not a list.
        """
        if not isinstance(labels, list):
            raise InvalidInput(f"y: expected a list of labels, got {describe(labels)}", field="y")
        idx, bad = self.lookup(labels)
        if bad:
            i, v = bad[0]
            raise InvalidInput(self._unknown(f"y[{i}]", v), field=f"y[{i}]", index=i)
        return idx

    def encode_each(self, labels: Sequence[Any]) -> tuple[np.ndarray, list[tuple[int, str]]]:
        """Encode labels one by one, collecting every unknown one instead of stopping.

        Returns
        -------
        idx : ndarray of shape (n,), int64
            Class indices (meaningless at the rejected positions).
        rejected : list of (int, str)
            ``(position, "y: unknown label ...; model classes are [...]")``, by position.
        """
        idx, bad = self.lookup(labels)
        return idx, [(i, self._unknown("y", labels[i])) for i, _ in sorted(bad, key=lambda b: b[0])]

    def _unknown(self, field: str, v: Any) -> str:
        return f"{field}: unknown label {describe(v)}; model classes are {json.dumps(self.classes)}"

    def decode(self, idx: np.ndarray) -> list[Any]:
        """Class indices -> JSON labels (list of length n)."""
        classes = self.classes
        return [classes[k] for k in idx.tolist()]


def parse_stream_label(raw: Any) -> Any:
    """The label of a stream entry's ``y`` field (bytes or str).

    JSON scalars are decoded (``b"1"`` -> 1, ``b"-1.0"`` -> -1.0, ``b'"cat"'`` -> "cat");
    anything that is not JSON is taken as a string label (``b"cat"`` -> "cat").

    Raises
    ------
    InvalidInput
        If the value decodes to JSON that is not a number or a string, or is not UTF-8.
    """
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            value = raw.decode("utf-8") if isinstance(raw, (bytes, bytearray)) else str(raw)
        except UnicodeDecodeError:
            raise InvalidInput("y: label is not valid UTF-8", field="y") from None
        return value.strip()
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InvalidInput(f"y: expected a number or a string label, got {describe(value)}", field="y")
    return value
