"""What the standard-protocol routes share: the body read, the auth check, one prediction.

The Open Inference Protocol routes (:mod:`svmstream.app.api.routes.v2`) and MLflow's
``POST /invocations`` (:mod:`svmstream.app.api.routes.invocations`) answer errors in their
protocol's shape, not the service's ``{"detail", "field", "index"}``; so they run their checks
inside the route (see :func:`guarded`) instead of as FastAPI dependencies, whose errors the
app-wide handler would render.  Predictions go through :meth:`Registry.predict
<svmstream.app.models.registry.Registry.predict>` and the published view, exactly as
``POST /predict`` (:mod:`svmstream.app.api.routes.predict`): the same rows give the same
labels, decisions and probabilities whichever route asked.
"""

from __future__ import annotations

import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from fastapi import Request
from fastapi.responses import Response

from svmstream.app.api.auth import require_read
from svmstream.app.api.http import read_body
from svmstream.app.errors import InvalidInput, PayloadTooLarge, ServiceError, naming_the_learner
from svmstream.app.models.registry import Registry
from svmstream.app.models.task_outputs import output_of

#: ``Content-Encoding`` values accepted on protocol requests (``tritonclient``'s
#: ``request_compression_algorithm``), with zlib's ``wbits`` for each.
_ENCODINGS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


async def read_protocol_body(
    request: Request, limit: int, media_types: frozenset[str], setting: str = "SVMSTREAM_MAX_BODY_BYTES"
) -> bytes:
    """The request body: content type checked, size-limited, decompressed within the same limit.

    Parameters
    ----------
    request : Request
    limit : int
        Both the body as sent and the decompressed body are bounded by it.
    media_types : frozenset of str
        Accepted ``Content-Type`` media types (a missing header is accepted: ``tritonclient``
        sends none).
    setting : str
        The environment variable that sets ``limit`` (named by a 413).

    Raises
    ------
    InvalidInput
        (415) another content type or content encoding; (400) a corrupt compressed body.
    PayloadTooLarge
        (413) a body, or its decompressed form, over ``limit`` bytes.
    """
    content_type = request.headers.get("content-type")
    if content_type is not None:
        media = content_type.split(";", 1)[0].strip().lower()
        if media not in media_types:
            raise InvalidInput(
                f"content-type: {media!r} is not accepted here; send {sorted(media_types)}",
                field="content-type",
                status=415,
            )
    body = await read_body(request, limit, setting)
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in _ENCODINGS:
        raise InvalidInput(
            f"content-encoding: {encoding!r} is not supported (gzip, deflate or identity)",
            field="content-encoding",
            status=415,
        )
    return _decompress(body, encoding, limit, setting)


def _decompress(body: bytes, encoding: str, limit: int, setting: str) -> bytes:
    """Inflate at most ``limit`` bytes (a small compressed body may expand enormously)."""
    inflater = zlib.decompressobj(_ENCODINGS[encoding])
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise InvalidInput(f"body: not valid {encoding} data ({exc})", field="body", status=400) from None
    if len(out) > limit:
        raise PayloadTooLarge(f"body: decompressed request body exceeds {setting}={limit}", field="body")
    if not inflater.eof:
        raise InvalidInput(f"body: truncated {encoding} data", field="body", status=400)
    return out


async def authorize_read(request: Request, credentials: Any) -> None:
    """The check of :func:`svmstream.app.api.auth.require_read` (token with ``PROTECT_READS``),
    called inside a protocol route so that its 401 is rendered in the protocol's shape.

    Raises :class:`~svmstream.app.errors.Unauthorized`."""
    await require_read(request, credentials)


async def guarded(
    work: Callable[[], Awaitable[Response]],
    render: Callable[[ServiceError], Response],
    request: Request | None = None,
) -> Response:
    """Run a protocol route's ``work``; a :class:`ServiceError` becomes ``render(error)`` (a
    replica's 409 for what only the learner answers names the learner, ``request``'s app)."""
    try:
        return await work()
    except ServiceError as exc:
        return render(naming_the_learner(exc, request.app) if request is not None else exc)


@dataclass(frozen=True)
class Prediction:
    """One batch predicted by a model's current published view.

    Attributes
    ----------
    model : str
    version : int
        The version of the view that answered.
    classes : list
        The model's labels, sorted (the columns of ``decision`` when 2-D and of ``proba``).
    labels : list
        Predicted label of each row (numbers or strings, as the model learned them).
    decision : ndarray of shape (n,) (binary) or (n, K), float64, C-contiguous
    proba : ndarray of shape (n, K), float64, C-contiguous, or None
        Calibrated probabilities, when asked for and available.
    """

    model: str
    version: int
    classes: list[Any]
    labels: list[Any]
    decision: np.ndarray
    proba: np.ndarray | None
    #: a model without classes: its task's outputs, ``name -> (datatype, values)``
    #: (:meth:`~svmstream.app.models.task_outputs.TaskOutput.tensors`), else None
    outputs: dict[str, tuple[str, np.ndarray]] | None = None


def has_proba(view) -> bool:
    """Whether a published view answers probabilities (``POST /predict``'s ``proba``)."""
    return len(view.codec.public_classes) == 1 or hasattr(view.estimator, "predict_proba")


def predict_rows(registry: Registry, name: str, X: np.ndarray, field: str, proba: bool | None) -> Prediction:
    """Labels, decisions and (optionally) probabilities of ``X`` from model ``name``.

    Parameters
    ----------
    registry : Registry
    name : str
    X : ndarray of shape (n, d), float64
        Finite rows (from :mod:`svmstream.app.ingest.tensors` or
        :mod:`svmstream.app.ingest.scoring_payloads`).
    field : str
        Names the rows in a width error (``"inputs[0].shape"``).
    proba : bool or None
        True: probabilities required; None: when the model has them; False: none.

    Returns
    -------
    Prediction

    Raises
    ------
    ModelNotFound
        (404) no such model.
    ModelNotFitted, ModelWarmingUp
        (409) the model cannot predict yet.
    InvalidInput
        (400) ``d`` differs from the model's dimension, or probabilities were required from a
        model without them.
    """
    view = registry.get(name).view
    if not isinstance(X, list) and view.n_features is not None and X.shape[1] != view.n_features:
        raise InvalidInput(
            f"{field}: rows of {X.shape[1]} features; model {name!r} expects {view.n_features}",
            field=field,
            status=400,
        )
    view, X, decision = registry.predict(name, X, with_rows=True)
    outputs = output_of(view.config).tensors(view, X, decision)
    if outputs is not None:  # regression, novelty: no labels, classes or probabilities
        if proba:
            raise InvalidInput(f"proba: model {name!r} has no class probabilities", field="proba", status=400)
        first = next(iter(outputs.values()))[1]
        labels = first.tolist()
        return Prediction(name, view.version, [], labels, np.ascontiguousarray(decision), None, outputs)
    probabilities = None
    if proba or (proba is None and has_proba(view)):
        if not has_proba(view):
            raise InvalidInput(
                f"proba: model {name!r} has no calibrated probabilities", field="proba", status=400
            )
        probabilities = np.ascontiguousarray(view.predict_proba(X, decision)[1])
    return Prediction(
        model=name,
        version=view.version,
        classes=list(view.codec.public_classes),
        labels=view.labels_from_decision(decision),
        decision=np.ascontiguousarray(decision),
        proba=probabilities,
    )


def label_datatype(classes: list[Any]) -> str:
    """The protocol datatype of a model's labels: ``BYTES`` for strings (and while the model
    has no label yet), ``INT64`` for integral numbers, ``FP64`` for other numbers."""
    if not classes or any(isinstance(c, str) for c in classes):
        return "BYTES"
    return "INT64" if all(isinstance(c, int) for c in classes) else "FP64"
