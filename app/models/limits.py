"""The size guards of online models: budget, input dimension and estimated bytes; the
server-wide model count and sum of estimates (:func:`check_capacity`).

Checked before anything is allocated -- at ``PUT /models`` (budget; size when ``n_features``
is declared) and when a batch fixes or widens the model's dimension (the first ``/learn``
batch or stream read, a sparse row with a larger index).  Limits are the settings
``max_budget``, ``max_features`` and ``max_model_bytes`` (``docs/defaults.md``); the size
estimate is the warm-up window (:func:`warmup_bytes`: ``warmup`` x (d + 1) x 8 bytes, which the
solver's estimate leaves out) plus :func:`svmstream.solvers.model_bytes` (SVs (B + 1) x d x 8 bytes, the shuffle
buffer of at most 64 MiB, the run guard's reservoirs, K^-1 for projection; a linear model:
its weights d x K x 8 bytes -- K = 1 binary, else the number of classes -- plus the buffer and
guard, sparse rows counted at their bound twice for the arena's free half).  Sparse support
vectors (``sv_storage="sparse"``, or ``"auto"`` at d > 256 unless the batch that fixes the
dimension is dense or too dense for sparse SVs) are counted by their nonzeros: 3 x (B + 1) x
min(d, 2,048) x 12 bytes (:func:`svmstream.solvers.model_bytes`, ``docs/defaults.md``).

A model with challengers (``docs/challengers.md``) is bounded as a whole: ``extra`` -- the
configurations :meth:`~svmstream.app.models.challengers.ChallengerSet.counted_configs` gives,
its running challengers -- counts beside the champion in
``max_model_bytes`` (:func:`max_width`, :func:`size_message`, :func:`label_refusal`) and in
``max_total_model_bytes`` (:func:`held_bytes`, :func:`check_capacity`, :func:`check_growth`).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from svmstream.app.errors import InvalidInput
from svmstream.app.models.config import LAMBDA_MIN, ModelConfig
from svmstream.app.models.factory import make_estimator
from svmstream.app.settings import MIB, Settings
from svmstream.solvers import resolve_sv_storage, window_bytes

LABEL_BYTES = 160
"""Bytes a label costs besides a string's UTF-8 length: the string object's header (49) and
its entries in the label codec (~90 per label, ``tracemalloc`` over 50,000 labels)."""


def label_bytes(labels: Sequence[Any] | None) -> int:
    """Bytes of a model's labels: :data:`LABEL_BYTES` each, plus a string label's UTF-8 length."""
    if not labels:
        return 0
    return sum(LABEL_BYTES + (len(v.encode("utf-8")) if isinstance(v, str) else 0) for v in labels)


def estimate_bytes(
    config: ModelConfig, n_features: int, n_classes: int | None = None, labels: Sequence[Any] | None = None
) -> int:
    """Estimated bytes of an online model of dimension ``n_features``: its arrays with
    ``n_classes`` classes (default: ``len(labels)``, else the declared classes, else 2), as the
    model of ``config`` estimates them (the contract's ``estimate_bytes``: a ``selection``
    model counts as many candidates as race at that dimension), and its ``labels`` (default:
    the declared classes; :func:`label_bytes`)."""
    if labels is None:
        labels = config.classes
    if n_classes is None:
        n_classes = 2 if not labels else len(labels)
    return label_bytes(labels) + _estimator(config).estimate_bytes(int(n_features), int(n_classes))


#: The unfitted models of the last configurations estimated, by ``id``: ``(config, model)``
#: (a model is built once per configuration, not once per estimate: :func:`max_width` searches).
_ESTIMATORS: dict[int, tuple[ModelConfig, Any]] = {}


def _estimator(config: ModelConfig):
    """An unfitted model of ``config`` (the factory's), kept for the next estimates of it."""
    kept = _ESTIMATORS.get(id(config))
    if kept is not None and kept[0] is config:
        return kept[1]
    if len(_ESTIMATORS) >= 256:
        _ESTIMATORS.clear()
    model = make_estimator(config)
    _ESTIMATORS[id(config)] = (config, model)
    return model


def race_bound(settings: Settings, max_classes: int | None) -> int:
    """The default ``selection_bytes``: ``max_model_bytes`` less room for ``max_classes``
    labels of ``max_label_length`` characters (4 UTF-8 bytes each), so that the race, its
    window and the labels stay within ``max_model_bytes``."""
    labels = int(max_classes or 2) * (LABEL_BYTES + 4 * settings.max_label_length)
    return max(0, int(settings.max_model_bytes) - labels)


def set_bytes(
    configs: Sequence[ModelConfig],
    n_features: int,
    n_classes: int | None = None,
    labels: Sequence[Any] | None = None,
) -> int:
    """:func:`estimate_bytes` summed over ``configs`` (a champion and its challengers): they
    learn the same rows, so they share the dimension and classes; the labels (the model's
    codec) are counted once."""
    if not configs:
        return 0
    shared = label_bytes(labels if labels is not None else configs[0].classes)
    total = sum(estimate_bytes(c, n_features, n_classes, labels) for c in configs)
    return total - shared * (len(configs) - 1)


def warmup_bytes(config: ModelConfig, n_features: int) -> int:
    """Bytes of the warm-up window when full (:func:`svmstream.solvers.window_bytes`): the
    solver's estimate does not count it; the window holds the raw rows as received until it
    closes."""
    return window_bytes(config.warmup, n_features)


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def size_message(
    config: ModelConfig, n_features: int, settings: Settings, extra: Sequence[ModelConfig] = ()
) -> str | None:
    """Why a model of dimension ``n_features`` (with its challengers' ``extra``
    configurations) is refused (None if it is not)."""
    if n_features > settings.max_features:
        return f"{n_features} features exceed max_features = {settings.max_features}"
    size = estimate_bytes(config, n_features)
    total = size + set_bytes(extra, n_features)
    if size <= settings.max_model_bytes < total:
        return (
            f"a model of {n_features} features with its {len(extra)} challengers needs "
            f"an estimated {_mb(total)} ({_mb(size)} for the champion), over max_model_bytes = "
            f"{settings.max_model_bytes / MIB:g} MiB"
        )
    if size > settings.max_model_bytes and config.kernel == "linear":
        k = 1 if config.classes is None or len(config.classes) == 2 else len(config.classes)
        return (
            f"a linear model of {n_features} features needs an estimated {_mb(size)} ({n_features} x {k} x 8 "
            "bytes of weights, plus the warm-up window, shuffle buffer and run guard), over max_model_bytes = "
            f"{settings.max_model_bytes / MIB:g} MiB"
        )
    if size > settings.max_model_bytes and sparse_svs(config, n_features):
        return (
            f"a model of {n_features} features with budget {config.budget} needs an estimated {_mb(size)} "
            f"(sparse support vectors: 3 x {config.budget + 1} x {min(n_features, 2048)} nonzeros x 12 bytes, "
            "plus the warm-up window, shuffle buffer and run guard), over max_model_bytes = "
            f"{settings.max_model_bytes / MIB:g} MiB"
        )
    if size > settings.max_model_bytes:
        return (
            f"a model of {n_features} features with budget {config.budget} needs an estimated "
            f"{_mb(size)} ({config.budget + 1} x {n_features} x 8 bytes of support vectors, plus the "
            f"shuffle buffer and run guard), over max_model_bytes = {settings.max_model_bytes / MIB:g} MiB"
        )
    return None


def sparse_svs(config: ModelConfig, n_features: int) -> bool:
    """True when the size estimate counts sparse support vectors (see the module docstring)."""
    return config.kernel == "rbf" and (
        config.sv_storage == "sparse" or (config.sv_storage == "auto" and n_features > 256)
    )


def check_config_limits(config: ModelConfig, settings: Settings) -> None:
    """Raises :class:`InvalidInput` naming ``budget`` or ``n_features`` for a model over a limit."""
    if not config.learns_online:
        return
    if config.lambda_ is None and config.C is not None:
        n = config.n_samples if config.n_samples is not None else config.reference_n
        lam = 1.0 / (config.C * n)
        if lam < LAMBDA_MIN:
            raise InvalidInput(
                f"C: C = {config.C:g} with n = {n} gives lambda = 1/(C n) = {lam:.3g} < {LAMBDA_MIN:g}, "
                "which overflows the step size 1/(lambda t); lower C, or give n_samples or lambda",
                field="C",
            )
    long = [v for v in config.classes or () if isinstance(v, str) and len(v) > settings.max_label_length]
    if long:
        raise InvalidInput(
            f"classes: a label of {len(long[0])} characters exceeds max_label_length = "
            f"{settings.max_label_length} (SVMSTREAM_MAX_LABEL_LENGTH)",
            field="classes",
        )
    if config.budget > settings.max_budget:
        raise InvalidInput(
            f"budget: {config.budget} exceeds max_budget = {settings.max_budget}", field="budget"
        )
    d = config.n_features or 1
    window = warmup_bytes(config, d)
    if (
        window > settings.max_model_bytes
        and d <= settings.max_features
        and 2 * window >= estimate_bytes(config, d)
    ):
        raise InvalidInput(
            f"warmup: a warm-up window of {config.warmup} rows x {config.n_features or 1} features needs an "
            f"estimated {_mb(window)} (rows x (features + 1) x 8 bytes), over max_model_bytes = "
            f"{settings.max_model_bytes / MIB:g} MiB",
            field="warmup",
        )
    if config.n_features is not None:
        reason = size_message(config, config.n_features, settings)
        if reason is not None:
            raise InvalidInput(f"n_features: {reason}", field="n_features")


def max_width(
    config: ModelConfig, settings: Settings, extra: Sequence[ModelConfig] = (), reserved: int = 0
) -> int:
    """The largest dimension a model of ``config`` (with the challengers' ``extra``
    configurations) may have (``max_features`` and the size bound, less ``reserved`` bytes: a
    schema of named fields)."""
    configs = [config, *extra]
    limit = settings.max_model_bytes - reserved
    lo, hi = 1, settings.max_features
    if set_bytes(configs, hi) <= limit:
        return hi
    while lo < hi:  # the estimate grows with d
        mid = (lo + hi + 1) // 2
        if set_bytes(configs, mid) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


def check_width(
    X,
    config: ModelConfig,
    settings: Settings,
    sparse: bool,
    extra: Sequence[ModelConfig] = (),
    reserved: int = 0,
) -> None:
    """Refuse a batch that would make the model (with its challengers' ``extra``
    configurations, and ``reserved`` bytes of a schema of named fields) wider than
    :func:`max_width` allows.

    Raises
    ------
    InvalidInput
        ``X[i]`` (the first sparse row with a too large index, or ``X[0]`` of dense rows)
        with the limit and the size estimate.
    """
    if config.sv_storage == "auto" and config.kernel == "rbf":
        # the batch that fixes the dimension also fixes the storage: dense rows get dense SVs
        storage = resolve_sv_storage("auto", X if sparse else np.zeros((0, 0)), config.scaling)
        config = config.model_copy(update={"sv_storage": storage})
        extra = [c.model_copy(update={"sv_storage": storage}) if c.sv_storage == "auto" else c for c in extra]
    limit = max_width(config, settings, extra, reserved)
    if X.shape[1] <= limit:
        return
    if reserved:  # named fields: the schema's columns (the batch's new fields and categories) are the width
        raise InvalidInput(
            f"X: this batch would widen the model to {X.shape[1]} columns of named fields; with the schema's "
            f"{_mb(reserved)} the model would exceed max_model_bytes = {settings.max_model_bytes / MIB:g} MiB "
            f"(at most {limit} columns; fewer fields or categories, or a larger max_model_bytes)",
            field="X",
            status=413,
        )
    if sparse and sp.issparse(X):
        pos = int(np.flatnonzero(X.indices >= limit)[0]) if X.nnz and X.indices.max() >= limit else None
        if pos is not None:
            i = int(np.searchsorted(X.indptr, pos, side="right") - 1)
            index = int(X.indices[pos])
            reason = size_message(config, index + 1, settings, extra)
            raise InvalidInput(
                f"X[{i}]: feature index {index} is out of range: {reason}", field=f"X[{i}]", index=i
            )
    reason = size_message(config, int(X.shape[1]), settings, extra)
    raise InvalidInput(f"X[0]: has {X.shape[1]} features: {reason}", field="X[0]", index=0)


def held_bytes(
    config: ModelConfig,
    n_features: int | None,
    labels: Sequence[Any] | None = None,
    extra: Sequence[ModelConfig] = (),
) -> int:
    """What :func:`check_capacity` counts for a model: its estimate (and its challengers'
    ``extra``) at its dimension (1 while unknown) with its ``labels`` (default: the declared
    ones); 0 for a batch-trained model (its arrays are its support vectors, already built)."""
    if not config.learns_online:
        return 0
    return set_bytes([config, *extra], n_features or 1, labels=labels or config.classes)


_HELD: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Each handle's last :func:`held_bytes` and what it was computed from (the configurations are
frozen, so their identities say whether they changed): a learner gaining 500 models checks each
against the sum over all the others, which must not recompute a thousand estimates each time."""


def _held(handle: Any) -> int:
    extra = handle.counted_configs()
    classes = handle.codec.classes
    key = (id(handle.config), handle.n_features, tuple(classes or ()), tuple(id(c) for c in extra))
    cached = _HELD.get(handle)
    if cached is not None and cached[0] == key:
        return cached[1]
    value = held_bytes(handle.config, handle.n_features, classes, extra)
    _HELD[handle] = (key, value)
    return value


def label_refusal(
    config: ModelConfig,
    settings: Settings,
    n_features: int | None,
    classes: Sequence[Any],
    added: Sequence[Any],
    extra: Sequence[ModelConfig] = (),
) -> tuple[str, Any] | None:
    """Why a model with ``classes`` may not add the labels ``added``, and the label that is
    refused first (None: it may).  The bounds: ``max_label_length`` (each string label),
    ``max_classes`` (the configuration's), ``max_model_bytes`` (the estimate with every label,
    the challengers' ``extra`` configurations included)."""
    for label in added:
        if isinstance(label, str) and len(label) > settings.max_label_length:
            return (
                f"a label of {len(label)} characters exceeds max_label_length = {settings.max_label_length} "
                "(SVMSTREAM_MAX_LABEL_LENGTH)",
                label,
            )
    n_classes = len(classes) + len(added)
    if n_classes > config.max_classes:
        return (
            f"a new class would exceed max_classes = {config.max_classes} (the model has {len(classes)})",
            added[config.max_classes - len(classes)] if config.max_classes >= len(classes) else added[0],
        )
    if n_features is not None:
        size = set_bytes([config, *extra], n_features, labels=[*classes, *added])
        if size > settings.max_model_bytes:
            return (
                f"{n_classes} classes need an estimated {_mb(size)} (their weights and labels), over "
                f"max_model_bytes = {settings.max_model_bytes / MIB:g} MiB",
                added[0],
            )
    return None


def check_growth(
    handles: dict,
    handle: Any,
    X,
    new_labels: Any,
    sparse: bool,
    settings: Settings,
    total: HeldTotal | None = None,
) -> None:
    """Refuse a batch that would take the sum of all models' estimates (:func:`held_bytes`)
    over ``max_total_model_bytes`` by growing ``handle``'s model: fixing or widening its
    dimension, or adding classes (``new_labels``: :class:`~svmstream.app.ingest.labels.NewLabels`);
    ``total``: the registry's :class:`HeldTotal` (else the sum is taken now).
    Checked before the batch is queued; nothing else is counted, so a batch that grows
    nothing is never refused.

    Raises
    ------
    InvalidInput
        (413) naming ``X[0]`` (a wider dimension) or ``y`` (new classes) and the setting.
    """
    if not handle.config.learns_online:
        return
    d0 = handle.n_features
    wider = d0 is None or (sparse and not handle.n_features_fixed and X.shape[1] > d0)
    if not wider and new_labels is None:
        return
    d1 = max(int(X.shape[1]), d0 or 0) if wider else d0
    labels = [*handle.codec.classes, *(new_labels.labels if new_labels is not None else ())]
    new = held_bytes(handle.config, d1, labels, handle.counted_configs())
    held = _held(handle)
    if new <= held:
        return
    others = _others(handles, handle, total, settings.max_total_model_bytes, new)
    if others + new > settings.max_total_model_bytes:
        field = "X[0]" if wider else "y"
        raise InvalidInput(
            f"{field}: this batch would grow model {handle.name!r} to an estimated {_mb(new)}; with the other "
            f"models' {_mb(others)} that exceeds max_total_model_bytes = {settings.max_total_model_bytes / MIB:g} "
            "MiB (SVMSTREAM_MAX_TOTAL_MODEL_BYTES)",
            field=field,
            status=413,
        )
    if total is not None:
        total.add(new - held)


#: Seconds a sum of the models' estimates is reused by :class:`HeldTotal` (a change no check
#: sees, a drift challenger starting, is counted at most this late).
TOTAL_MAX_AGE_S = 1.0


class HeldTotal:
    """The sum of every model's estimate (:func:`held_bytes`) as the capacity checks read it:
    summed over all models at most every :data:`TOTAL_MAX_AGE_S`, with what each check that
    passes adds in between, and summed anew before any refusal, so a refusal is always exact.
    Summing costs 1.4 ms at 1,000 models; a learner gaining 500 models, or 500 models' first
    batches, summed it each time before (quadratic, ``docs/cluster.md``)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._value: int | None = None
        self._at = 0.0

    def of_others(self, handles: dict, handle: Any = None, exact: bool = False) -> int:
        """The sum over ``handles`` less ``handle``'s estimate (``exact``: summed now)."""
        now = time.monotonic()
        with self._lock:
            if exact or self._value is None or now - self._at > TOTAL_MAX_AGE_S:
                self._value, self._at = sum(_held(h) for h in list(handles.values())), now
            value = self._value
        return value - (_held(handle) if handle is not None else 0)

    def add(self, delta: int) -> None:
        """A check passed that grows the sum by ``delta`` bytes."""
        with self._lock:
            if self._value is not None:
                self._value += delta


def _others(handles: dict, handle: Any, total: HeldTotal | None, limit: int, new: int) -> int:
    """The other models' estimates: from ``total`` (summed anew when they would refuse ``new``
    under ``limit``), else summed now."""
    if total is None:
        return sum(_held(h) for h in list(handles.values()) if h is not handle)
    others = total.of_others(handles, handle)
    return others if others + new <= limit else total.of_others(handles, handle, exact=True)


def check_capacity(
    handles: dict,
    name: str,
    config: ModelConfig,
    settings: Settings,
    extra: Sequence[ModelConfig] = (),
    total: HeldTotal | None = None,
) -> None:
    """Refuse a new model beyond ``max_models``, or one whose estimate (with its challengers'
    ``extra`` configurations) would take the sum of all models' estimates (:func:`held_bytes`)
    over ``max_total_model_bytes``; replacing a model counts its new configuration instead of
    the old one.  ``total``: the registry's :class:`HeldTotal` (else the sum is taken now).

    Raises
    ------
    InvalidInput
        (422) naming ``name`` (the count), ``challengers`` (the total, when the champion alone
        would fit) or ``n_features`` (the total) and the setting.
    """
    old = handles.get(name)
    n_others = len(handles) - (old is not None)
    if n_others >= settings.max_models:
        raise InvalidInput(
            f"name: the server holds {n_others} models, max_models = {settings.max_models} "
            "(SVMSTREAM_MAX_MODELS); delete one first",
            field="name",
        )
    new = held_bytes(config, config.n_features, extra=extra)
    if not new:
        return
    limit = settings.max_total_model_bytes
    others = _others(handles, old, total, limit, new)
    if others + new > limit:
        alone = others + held_bytes(config, config.n_features) <= limit
        field, what = ("challengers", "with its challengers ") if alone else ("n_features", "")
        raise InvalidInput(
            f"{field}: this model's estimated {_mb(new)} {what}with the {n_others} others' {_mb(others)} exceeds "
            f"max_total_model_bytes = {limit / MIB:g} MiB (SVMSTREAM_MAX_TOTAL_MODEL_BYTES)",
            field=field,
        )
    if total is not None:
        total.add(new - (_held(old) if old is not None else 0))
