"""An HTTP learn/predict body -> a validated :class:`Batch` of arrays, or one precise error.

Every ``POST /learn`` and ``POST /predict`` body goes through :func:`parse_examples`
(after :func:`svmstream.app.ingest.decode.decode_body`); a batch is either turned into
arrays completely or rejected completely with an
:class:`~svmstream.app.errors.InvalidInput` whose message starts with the offending field
and example index (``"X[3][5]: nan is not a finite number"``), so no solver step ever
sees part of a bad batch.  The registry then checks the batch against the model's
dimension (:func:`svmstream.app.ingest.features.conform`).

The examples go under the key ``"X"`` (or ``"x"``; messages always say ``X``): dense rows
``[[x0, x1, ...], ...]`` and/or sparse rows ``[{"0": 1.5, "7": -2.0}, ...]``
(:func:`svmstream.app.ingest.features.parse_features`).  Labels ``y`` are encoded by the
model's :class:`~svmstream.app.ingest.labels.LabelCodec`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from svmstream.app.errors import InvalidInput
from svmstream.app.ingest.decode import LEARN_FIELDS, PREDICT_FIELDS, check_envelope
from svmstream.app.ingest.features import parse_features
from svmstream.app.ingest.labels import LabelCodec, NewLabels
from svmstream.app.ingest.named import named_rows
from svmstream.app.ingest.weights import parse_weights


@dataclass(frozen=True)
class Batch:
    """A validated batch.

    Attributes
    ----------
    X : ndarray of shape (n, d), float64, C-contiguous, or scipy CSR matrix of shape (n, d)
        Finite feature values.  For sparse input ``d`` is the declared ``n_features`` or
        else the largest index + 1 (:func:`~svmstream.app.ingest.features.conform` widens
        it to the model's dimension).
    y : ndarray of shape (n,), int64, or None
        Class indices into the model's sorted class list (``None`` for predict batches).
    n_features : int or None
        Dimension declared by the request (``"n_features"``), if any.
    new_labels : NewLabels or None
        Labels the batch adds to a model that learns its classes (provisional indices in ``y``).
    """

    X: np.ndarray | sp.csr_matrix | None
    y: np.ndarray | None
    n_features: int | None = None
    new_labels: NewLabels | None = None
    #: rows of named fields (then ``X`` is None: the model's schema encodes them)
    rows: list | None = None
    #: (n,) float64 importance weights of a learn batch (``w``; None: every example weighs 1)
    weights: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.rows) if self.rows is not None else self.X.shape[0]


def parse_examples(
    obj: Mapping[str, Any], codec: LabelCodec | None, check_bools: bool = True, has_schema: bool = False
) -> Batch:
    """Validate a decoded learn (``codec`` given) or predict (``codec=None``) request.

    Parameters
    ----------
    obj : dict
        Decoded JSON with keys ``X`` (or ``x``), ``y`` (learn only), optional ``model``,
        ``w`` (learn only: one importance weight per example, :mod:`.weights`) and
        ``n_features``.
    codec : LabelCodec or None
        Label set of the target model; ``None`` for predict requests (no ``y``).
    check_bools : bool
        See :func:`~svmstream.app.ingest.features.parse_features`.
    has_schema : bool
        The model learns named fields: every object row is one (:mod:`.named`).

    Returns
    -------
    Batch

    Raises
    ------
    InvalidInput
        See :func:`~svmstream.app.ingest.decode.check_envelope`,
        :func:`~svmstream.app.ingest.features.parse_features`,
        :meth:`~svmstream.app.ingest.labels.LabelCodec.encode`; also when
        ``len(y) != len(X)``.
    """
    learn = codec is not None
    check_envelope(obj, LEARN_FIELDS if learn else PREDICT_FIELDS, require_y=learn and codec.requires_y)
    declared = obj.get("n_features")
    raw = obj["X"] if "X" in obj else obj["x"]
    named = named_rows(raw, has_schema)
    if named and declared is not None:
        raise InvalidInput("n_features: rows of named fields declare no dimension", field="n_features")
    X = None if named else parse_features(raw, declared, check_bools)
    n = len(raw) if named else X.shape[0]
    rows = raw if named else None
    y = None
    if learn:
        labels = obj.get("y")
        if isinstance(labels, list) and len(labels) != n:
            raise InvalidInput(f"y: has {len(labels)} labels for {n} examples in X", field="y")
        weights = parse_weights(obj.get("w"), n)
        if labels is None and not codec.requires_y:  # a novelty model's rows (targets.py)
            return Batch(X=X, y=codec.absent(n), n_features=declared, rows=rows, weights=weights)
        y, new = codec.encode_with_new(labels)
        return Batch(X=X, y=y, n_features=declared, new_labels=new, rows=rows, weights=weights)
    return Batch(X=X, y=y, n_features=declared, rows=rows)
