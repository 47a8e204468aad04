"""Published copies of an online model: what predictions read, and nothing else.

The service publishes a read-only copy of a model after every applied batch, and predictions
read it while the learner goes on (``svmstream.app.models.view``).  Copying the whole
estimator for that (its state through ``get_state``/``from_state``) cost 1.17 s at d = 50,000
(a dense (d, B + 1) SV matrix, the shuffle buffer, the run guard's reservoirs — issue 14).  A
published copy instead

* shares every object the learner never mutates in place once it is set — parameters,
  ``classes_``, the frozen scaling arrays (the learner replaces them, see
  ``Preprocessor.grow``), the shuffle buffer and reservoirs (never read by predictions),
  scratch buffers whose shape only is read;
* shallow-copies the small objects whose scalars the learner reassigns (the preprocessor:
  ``ready``/``kind``/``gamma``; the calibrator: ``slope_``);
* copies what the learner writes in place and predictions read: the counters, reals and bias
  (O(K)), the live coefficient rows (O(n_sv · K)), the live SVs of a dense pool
  (O(d · n_sv): 88 KB for ijcnn1 at B = 500), the linear weights (O(d · K)), and for a sparse
  pool only its per-SV slot arrays (O(B)) — the arena of SV entries is append-only (entries
  below its ``used`` mark are never rewritten), so the copy shares it.

A published copy answers ``decision_function``, ``predict`` and ``predict_proba`` exactly as
the estimator did when it was made (``tests/test_publish.py``); it is not meant to learn or
to be saved (snapshots take the learner's own state, ``ModelHandle.capture_state``).
"""

from __future__ import annotations

import copy

#: Arrays written in place by the learner and read by predictions, copied whole (O(K)).
_SMALL_ARRAYS = ("_counters", "_reals", "_bias")
#: Per-slot arrays of an SV pool (first axis: slots), copied up to the live SVs.
_SLOT_ARRAYS = ("_coef", "_sv_sq", "_sv_start", "_sv_len")
#: Arrays the learner writes in place (possibly anywhere), copied whole.
_WHOLE_ARRAYS = ("_W",)


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
    ``kernel="linear"`` — never the buffers, reservoirs or warm-up window.

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
    pp = state.get("_pp")
    if pp is not None:
        state["_pp"] = copy.copy(pp)
    calibrator = state.get("calibrator_")
    if calibrator is not None:
        state["calibrator_"] = copy.copy(calibrator)
    for name in _SMALL_ARRAYS + _WHOLE_ARRAYS:
        if name in state:
            state[name] = state[name].copy()
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
