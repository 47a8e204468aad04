"""Published copies of an online model: what predictions read, and nothing else.

The service publishes a read-only copy of a model after every applied batch, and predictions
read it while the learner goes on (``svmstream.app.models.view``).  Copying the whole
estimator for that (its state through ``get_state``/``from_state``) cost 1.17 s at d = 50,000
(a dense (d, B + 1) SV matrix, the shuffle buffer, the run guard's reservoirs), too slow to publish after every batch.  A
published copy instead

* shares every object the learner never mutates in place once it is set — parameters,
  ``classes_``, scratch buffers whose shape only is read (a pipeline's stages are copied by
  the pipeline, :meth:`svmstream.solvers.online.StreamingClassifier.published_copy`);
* shallow-copies the small objects whose scalars the learner reassigns (the calibrator:
  ``slope_``);
* copies what the learner writes in place and predictions read: the counters, reals and bias
  (O(K)), the live coefficient rows (O(n_sv · K)), the live SVs of a dense pool
  (O(d · n_sv): 88 KB for ijcnn1 at B = 500), and for a sparse pool only its per-SV slot
  arrays (O(B)) — the arena of SV entries is append-only (entries below its ``used`` mark are
  never rewritten), so the copy shares it;
* for ``kernel="linear"``, whose weight matrix W (d, K) is the model (46 MB for sector: d =
  55,197, K = 105), patches only the rows the batches since changed: the learner notes the
  rows each batch may have touched (:func:`note_weight_rows`: the features present in the
  rows it learned — a Pegasos step changes W only there; the scale trick keeps the shrink in
  a scalar) and keeps up to :data:`W_POOL` weight arrays for its published copies; one that
  no view holds any more (its reference count says so) is brought up to date by copying just
  those rows.  A full copy is made when no pooled array is free, after a change of shape
  (a new class, wider input), or when the scale was folded into W.

A published copy answers ``decision_function``, ``predict`` and ``predict_proba`` exactly as
the estimator did when it was made (``tests/test_publish.py``); it is not meant to learn or
to be saved (snapshots take the learner's own state, ``ModelHandle.capture_state``).
"""

from __future__ import annotations

import copy
import sys

import numpy as np

#: Arrays written in place by the learner and read by predictions, copied whole (O(K)).
_SMALL_ARRAYS = ("_counters", "_reals", "_bias", "_sv_used")
#: Per-slot arrays of an SV pool (first axis: slots), copied up to the live SVs.
_SLOT_ARRAYS = ("_coef", "_sv_sq", "_sv_start", "_sv_len")
#: Weight arrays a linear model keeps for its published copies (reused once no view holds one).
W_POOL = 2
#: Batches whose changed rows are remembered; a pooled array older than that is copied whole.
W_HISTORY = 64


def note_weight_rows(est, rows) -> None:
    """Learner side of publishing a linear model: after a batch, the rows of ``est._W`` it may
    have changed — an int array of row indices, or None for all of them."""
    version = est.__dict__.get("_w_version", 0) + 1
    history = est.__dict__.setdefault("_w_history", [])
    history.append((version, rows))
    if len(history) > W_HISTORY:
        del history[0]
    est._w_version = version


def _rows_since(est, version: int):
    """Rows changed by the batches after ``version`` (None: unknown or all)."""
    history = est.__dict__.get("_w_history", [])
    newer = [(v, rows) for v, rows in history if v > version]
    if est.__dict__.get("_w_version", 0) > version and (not newer or newer[0][0] != version + 1):
        return None  # forgotten: older than the history
    if any(rows is None for _, rows in newer):
        return None
    if not newer:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.concatenate([rows for _, rows in newer]))


def _published_weights(est) -> np.ndarray:
    """A copy of ``est._W`` for a published copy: a free pooled array patched, or a new one."""
    W = est._W
    version = est.__dict__.get("_w_version", 0)
    pool = est.__dict__.setdefault("_w_pool", [])
    pool[:] = [entry for entry in pool if entry[0].shape == W.shape]
    for entry in pool:
        # 2 references: the pool's and getrefcount's argument; more: a view still holds it
        if sys.getrefcount(entry[0]) > 2:
            continue
        rows = _rows_since(est, entry[1])
        if rows is None:
            np.copyto(entry[0], W)
        elif rows.shape[0]:
            entry[0][rows] = W[rows]
        entry[1] = version
        return entry[0]
    fresh = W.copy()
    if len(pool) < W_POOL:
        pool.append([fresh, version])
    return fresh


def published_copy(est):
    """A read-only copy of the online estimator ``est`` for predictions (module docstring).

    Parameters
    ----------
    est : BudgetedSGDClassifier or BudgetedSCAClassifier, fitted or warming up

    Returns
    -------
    An instance of ``type(est)`` whose ``decision_function``/``predict``/``predict_proba``
    give what ``est``'s gave when the copy was made, whatever ``est`` learns afterwards.
    Cost: O(d · n_sv) for a dense SV pool, O(B · K) for a sparse one, O(d · K) for
    ``kernel="linear"`` (only the rows changed since a free pooled copy was made, usually)
    — never the buffers, reservoirs or warm-up window.

    Example
    -------
    >>> import numpy as np
    >>> from svmstream.solvers import BudgetedSGDClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 4)); y = (X[:, 0] > 0).astype(int)
    >>> est = BudgetedSGDClassifier(budget=20, warmup=0, scaling="none", gamma=0.5, random_state=0)
    >>> est = est.partial_fit(X[:200], y[:200], classes=[0, 1])
    >>> pub = published_copy(est)
    >>> before = pub.decision_function(X[200:])
    >>> est = est.partial_fit(X[200:], y[200:])
    >>> bool(np.array_equal(pub.decision_function(X[200:]), before))
    True
    """
    pub = object.__new__(type(est))
    state = dict(est.__dict__)
    calibrator = state.get("calibrator_")
    if calibrator is not None:
        state["calibrator_"] = copy.copy(calibrator)
    for name in _SMALL_ARRAYS:
        if name in state:
            state[name] = state[name].copy()
    if "_W" in state:
        state["_W"] = _published_weights(est)
    n_sv = int(est.n_support_vectors_) if "_counters" in state and "_sv_t" in state else 0
    for name in _SLOT_ARRAYS:
        if name in state:
            state[name] = state[name][:n_sv].copy()
    sv_t = state.get("_sv_t")
    if sv_t is not None and sv_t.ndim == 2 and sv_t.shape[1] > 0:  # the dense pool: (d, capacity)
        state["_sv_t"] = sv_t[:, :n_sv].copy()
    children = state.get("estimators_")
    if children is not None:  # BSCA one-vs-rest: one binary model per class
        state["estimators_"] = [published_copy(child) for child in children]
    pub.__dict__.update(state)
    return pub
