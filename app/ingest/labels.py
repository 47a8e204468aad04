"""Labels: a model's JSON labels <-> class indices, and the label of a stream entry.

Labels are numbers or strings from the model's class set; numeric labels compare
numerically (``1.0 == 1``).  They are encoded as class indices ``0..K-1`` (``int64``)
into the model's sorted class list (:func:`svmstream.app.models.config.normalise_classes`).

One lookup (:meth:`LabelCodec.lookup`) serves both inputs: a request's ``y`` is
rejected as a whole at its first unknown label (:meth:`LabelCodec.encode`, field
``y[i]``), a batch of stream entries rejects each entry with an unknown label on its own
(:meth:`LabelCodec.encode_each`, field ``y``).

A model without declared ``classes`` learns them (``learn=True``): its class indices are
in order of first appearance (:attr:`LabelCodec.classes`: the estimator's classes, never
renumbered), and a label it has not seen gets a *provisional* index ``len(classes) + j``
(:class:`NewLabels`).  Users see the labels sorted (:attr:`LabelCodec.public_classes`, as
declared classes are), so the scikit-learn binary convention holds for learned labels too:
a positive decision means the larger label; :attr:`LabelCodec.public_order` maps between
the two orders.  The codec is never changed by a lookup: the
model's learner thread commits new labels when it applies the batch
(:meth:`svmstream.app.models.handle.ModelHandle.submit`), so a refused batch adds nothing.
Labels of the wrong kind (a string for a model whose labels are numbers, or the reverse)
are refused in both modes.
"""

from __future__ import annotations

import json
import math
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from svmstream.app.errors import InvalidInput
from svmstream.app.ingest.decode import describe


@dataclass(frozen=True)
class NewLabels:
    """Labels a batch brings to a model that learns its classes.

    ``labels[j]`` has the provisional index ``base + j`` in the batch's encoded ``y``
    (``base``: the number of classes the codec had at encoding time)."""

    base: int
    labels: tuple[Any, ...]


def _normalise(v: Any) -> Any:
    """A label as a model stores it: integral floats become ``int`` (``1.0 -> 1``)."""
    return int(v) if isinstance(v, float) and v.is_integer() else v


class LabelCodec:
    """Map JSON labels to class indices of a model and back.

    Parameters
    ----------
    classes : list of int/float or list of str
        The model's class list: declared (normalised and sorted, see
        :func:`svmstream.app.models.config.normalise_classes`) or learned so far (in order
        of first appearance; may be empty).
    learn : bool
        The model learns its classes: unseen labels get provisional indices (see the module
        docstring) instead of being refused.
    """

    #: a label codec: the model has classes and every example a label (the targets of the
    #: other tasks: :mod:`.targets`)
    has_classes = True
    requires_y = True

    def __init__(self, classes: Sequence[Any], learn: bool = False):
        self.classes = list(classes)
        self.learn = bool(learn)
        self.numeric = None if not self.classes else not isinstance(self.classes[0], str)
        values = np.asarray(self.classes if self.numeric else [], dtype=np.float64)
        self._sort = np.argsort(values, kind="stable")
        self._sorted = values[self._sort]
        self._index = {c: k for k, c in enumerate(self.classes)}
        self.public_classes = sorted(self.classes)
        #: ``public_classes[p] == classes[public_order[p]]``
        self.public_order = np.asarray([self._index[c] for c in self.public_classes], dtype=np.int64)
        self.identity = bool(np.array_equal(self.public_order, np.arange(len(self.classes))))

    def public_decision(self, decision: np.ndarray) -> np.ndarray:
        """Estimator decisions in the order of :attr:`public_classes`: binary (n,) negated when
        the estimator's positive class is the smaller label; (n, K) columns reordered."""
        if self.identity:
            return decision
        if decision.ndim == 1:
            return -decision
        return decision[:, self.public_order]

    def public_columns(self, values: np.ndarray) -> np.ndarray:
        """(n, K) per-class values (probabilities) in the order of :attr:`public_classes`."""
        return values if self.identity else values[:, self.public_order]

    def extended(self, labels: Sequence[Any]) -> LabelCodec:
        """A new codec with ``labels`` appended (this one is left as it is: published views
        keep theirs)."""
        return shared_codec(self.classes + list(labels), learn=self.learn)

    def index_of(self, label: Any) -> int | None:
        """Index of a normalised label, or None."""
        return self._index.get(label)

    def lookup(self, labels: Sequence[Any]) -> tuple[np.ndarray, list[tuple[int, Any]], NewLabels | None]:
        """Class index of every label, the labels refused, and the labels it would add.

        Returns
        -------
        idx : ndarray of shape (n,), int64
            Class indices (meaningless at the bad positions); unseen labels of a learning
            codec get provisional indices ``len(classes) + j``.
        bad : list of (int, label)
            Position and value (as looked up: an integral float label that is read one by
            one is compared as an ``int``) of each unknown label (declared classes only)
            or label of the wrong type.  When the labels read as one numeric array,
            booleans come first (a request's error names the first boolean), then the
            others in order; otherwise in order.
        new : NewLabels or None
            The unseen labels, in order of first appearance (learning codec only).
        """
        if self.numeric is not False:
            found = self._lookup_numbers(labels)
            if found is not None:
                return found
        out = np.zeros(len(labels), dtype=np.int64)
        bad = []
        index = dict(self._index)
        numeric = self.numeric
        base = len(self.classes)
        for i, v in enumerate(labels):
            if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                bad.append((i, v))
                continue
            if isinstance(v, float) and not math.isfinite(v):
                bad.append((i, v))
                continue
            v = _normalise(v)
            if numeric is None and self.learn:
                numeric = not isinstance(v, str)
            k = index.get(v) if isinstance(v, str) != numeric else None
            if k is None and self.learn and isinstance(v, str) != numeric:
                k = index[v] = len(index)
            if k is None:
                bad.append((i, v))
            else:
                out[i] = k
        added = tuple(list(index)[base:])
        return out, bad, NewLabels(base, added) if added else None

    def _lookup_numbers(
        self, labels: Sequence[Any]
    ) -> tuple[np.ndarray, list[tuple[int, Any]], NewLabels | None] | None:
        """:meth:`lookup` in one vectorised pass when the labels read as a numeric array."""
        try:
            arr = np.asarray(labels)
        except (ValueError, TypeError):
            return None
        if arr.dtype.kind not in "iuf" or arr.shape != (len(labels),):
            return None
        bools = [i for i, v in enumerate(labels) if v.__class__ is bool]
        arr = arr.astype(np.float64, copy=False)
        bad_values = ~np.isfinite(arr)
        if bools:
            bad_values[bools] = True
        k = len(self.classes)
        if k:
            pos = np.minimum(np.searchsorted(self._sorted, arr), k - 1)
            idx = self._sort[pos]
            unknown = self._sorted[pos] != arr
        else:
            idx = np.zeros(arr.shape[0], dtype=np.int64)
            unknown = np.ones(arr.shape[0], dtype=bool)
        new = None
        if self.learn:
            fresh = unknown & ~bad_values
            if fresh.any():
                values, first, inverse = np.unique(arr[fresh], return_index=True, return_inverse=True)
                rank = np.empty(values.shape[0], dtype=np.int64)
                rank[np.argsort(first, kind="stable")] = np.arange(values.shape[0])
                idx = idx.copy()
                idx[fresh] = k + rank[inverse.ravel()]
                ordered = values[np.argsort(first, kind="stable")]
                new = NewLabels(k, tuple(_normalise(float(v)) for v in ordered))
            unknown = bad_values
        else:
            unknown = unknown | bad_values
        refused = np.flatnonzero(unknown).tolist()
        if bools:
            seen = set(bools)
            refused = bools + [i for i in refused if i not in seen]
        return idx.astype(np.int64, copy=False), [(i, labels[i]) for i in refused], new

    def encode_with_new(self, labels: Any) -> tuple[np.ndarray, NewLabels | None]:
        """:meth:`encode`, and the labels the batch would add to a learning codec."""
        if not isinstance(labels, list):
            raise InvalidInput(f"y: expected a list of labels, got {describe(labels)}", field="y")
        idx, bad, new = self.lookup(labels)
        if bad:
            i, v = bad[0]
            raise InvalidInput(self._unknown(f"y[{i}]", v), field=f"y[{i}]", index=i)
        return idx, new

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
        return self.encode_with_new(labels)[0]

    def encode_each(
        self, labels: Sequence[Any]
    ) -> tuple[np.ndarray, list[tuple[int, str]], NewLabels | None]:
        """Encode labels one by one, collecting every unknown one instead of stopping.

        Returns
        -------
        idx : ndarray of shape (n,), int64
            Class indices (meaningless at the rejected positions).
        rejected : list of (int, str)
            ``(position, "y: unknown label ...; model classes are [...]")``, by position.
        new : NewLabels or None
            Labels the good entries would add (learning codec only).
        """
        idx, bad, new = self.lookup(labels)
        return idx, [(i, self._unknown("y", labels[i])) for i, _ in sorted(bad, key=lambda b: b[0])], new

    def _unknown(self, field: str, v: Any) -> str:
        if self.learn:
            kind = "numbers" if self.numeric else "strings"
            if self.numeric is None:
                return f"{field}: {describe(v)} is not a class label (use numbers or strings, not both)"
            return f"{field}: {describe(v)} is not a valid label; the model's labels are {kind}"
        return f"{field}: unknown label {describe(v)}; model classes are {json.dumps(self.classes)}"

    def decode(self, idx: np.ndarray) -> list[Any]:
        """Class indices -> JSON labels (list of length n).  An index past the labels (a
        model that has seen one class answers with its only label) decodes to the last one."""
        classes = self.classes
        last = len(classes) - 1
        return [classes[min(k, last)] for k in idx.tolist()]


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


_SHARED: weakref.WeakValueDictionary[tuple, LabelCodec] = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()


def shared_codec(classes: Sequence[Any], learn: bool = False) -> LabelCodec:
    """``LabelCodec(classes, learn)``, one object per distinct class list in use: a codec is
    never changed once made, so the models with the same labels share one (~0.8 KB each;
    10,000 models in a service).  Labels are told apart by type too (``1``, ``1.0``, ``True``)."""
    key = (bool(learn), tuple((type(c), c) for c in classes))
    with _SHARED_LOCK:
        codec = _SHARED.get(key)
        if codec is None:
            codec = _SHARED[key] = LabelCodec(classes, learn=learn)
    return codec
