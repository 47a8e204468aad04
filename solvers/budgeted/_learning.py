"""How a budgeted kernel model learns (a mixin of :class:`._base.BudgetedKernelModel`): the
steps over rows chunk by chunk, :meth:`fit`'s epochs, :meth:`partial_fit`, the rows a pipeline
releases (:meth:`learn_rows`), widening, rehearsal plans, the schedule restart and new classes.

Rehearsal is a stage of the streaming pipeline (:mod:`svmstream.solvers.online.stages.rehearsal`):
the pipeline passes it to the calls that learn or reshape (``learn_rows(fed, rehearsal=stage)``,
``grow_features``, ``add_class``); an estimator alone (``rehearsal=None``) never rehearses."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._params import (
    REFERENCE_N,
)
from ._sizes import DENSE_CHUNK_ELEMENTS, iter_dense_rows
from ._state import (
    C_SCHED_SHIFT,
    C_STEPS,
    R_NORM2,
)
from ._weights import checked_weights, fed_weights, unit_weights

#: :meth:`BudgetedKernelModel.restart_schedule` (the drift stage's reset,
#: :mod:`svmstream.solvers.online.stages.drift`): the schedule restarts at this t (Pegasos: η = 1/(λ t0)), so
#: the old model weighs like t0 examples and fades as t0 / (t0 + m) over the next m steps; a
#: detection before t0 steps leaves the schedule alone.  t0 = REFERENCE_N (30,000, the n of the
#: default λ): on the flipped-ijcnn1 benchmark recovery is the same for t0 = 100 … 30,000 (it is
#: the detection delay and the dropped shuffle buffer that matter), while on ijcnn1 in file order
#: without a buffer, where the error rate rises in places and ADWIN fires 4 times before t =
#: 27,000, t0 = 1,000 cost 4.6 pp of test accuracy, 10,000 cost 1.9 pp and 30,000 nothing
#: (``benchmarks/bench_drift_t0.py``).
DRIFT_RESET_T0 = REFERENCE_N


class Learning:
    """Learning of :class:`._base.BudgetedKernelModel` (see the module docstring)."""

    def _learn(self, X, labels, order, weights=None):
        """Run the learning step over ``X[order]`` chunk by chunk (sparse SVs: CSR rows, in one
        piece); ``weights`` (n,) float64 importance weights of X's rows (None: ones); returns f
        before each step."""
        self._ensure_pool()
        weights = unit_weights(labels.shape[0]) if weights is None else weights
        margins = np.empty((order.shape[0], self._coef.shape[1]), dtype=np.float64)
        if self._sparse_svs():
            self._apply(self._csr_input(X), labels, weights, order, margins)
            self.last_margins_ = margins[:, 0] if margins.shape[1] == 1 else margins
            return self.last_margins_
        chunk_rows = max(1, DENSE_CHUNK_ELEMENTS // max(1, X.shape[1]))
        done = 0
        for X_part, local_order in iter_dense_rows(X, order, chunk_rows):
            if X_part is X:
                y_part, w_part = labels, weights
            else:
                rows = order[done : done + local_order.shape[0]]
                y_part, w_part = labels[rows], weights[rows]
            self._apply(X_part, y_part, w_part, local_order, margins[done : done + local_order.shape[0]])
            done += local_order.shape[0]
        self.last_margins_ = margins[:, 0] if margins.shape[1] == 1 else margins
        return self.last_margins_

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y, callback=None):
        """Train from scratch for ``epochs`` shuffled passes.

        X : (n, d) array-like or scipy sparse; y : (n,) labels, at least two classes.
        ``callback(estimator, epoch)``, if given, is called after each epoch (monitoring).
        Raises ValueError on invalid parameters, non-finite input or mismatched lengths.
        """
        self.check_params()
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, reset=True)
        check_classification_targets(y)
        X = X if sp.issparse(X) else np.ascontiguousarray(X)
        self._resolve_sv_storage(X)
        self._init_state(X.shape[1], np.unique(y), X.shape[0], streaming=False)
        labels = self._encode_labels(y)
        self._resolve_gamma(X)  # fit sees all its data: gamma="scale" from all of X
        self._fit_epochs(X, labels, callback)
        return self

    def _fit_epochs(self, X, labels, callback=None):
        for epoch in range(int(self.epochs)):
            order = self.rng_.permutation(X.shape[0]).astype(np.int64)
            margins = self._learn(X, labels, order)
            if callback is not None:
                callback(self, epoch + 1)
        # probabilities: calibrated on the last epoch's margins, each taken before its step
        if self.calibrator_ is not None:
            self.calibrator_.fit(margins, self._class_index(labels[order]))

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Apply one learning step per row of X, in order.

        ``classes`` (all labels) is required on the first call.  ``sample_weight`` (n,)
        float >= 0, finite (None: ones) scales each example's loss term, as scikit-learn's
        ``sample_weight`` (``docs/weights.md``: the step each algorithm takes; w = 0: no step).
        Raises ValueError on non-finite input, a feature count different from the first call,
        an unknown label or a bad weight (naming ``sample_weight[i]``); the model is unchanged
        in that case.
        """
        return self._partial_fit(X, y, classes, sample_weight)

    def _partial_fit(self, X, y, classes=None, sample_weight=None, rehearsal=None):
        """:meth:`partial_fit`, each row followed by the steps of the rehearsal stage
        ``rehearsal`` (None: none) — a one-vs-rest parent's call of its binary models."""
        first = not hasattr(self, "classes_")
        if first:
            self.check_params()
            if classes is None:
                raise ValueError("classes must be passed on the first call to partial_fit")
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, reset=first)
        weights = checked_weights(sample_weight, X.shape[0])
        X = X if sp.issparse(X) else np.ascontiguousarray(X)
        if first:
            self._resolve_sv_storage(X)
            self._init_state(X.shape[1], classes)
        elif classes is not None and not np.array_equal(np.unique(classes), self.classes_):
            raise ValueError(f"classes {list(classes)} differ from the first call's {self.classes_.tolist()}")
        labels = self._encode_labels(y)
        self._resolve_gamma(X)  # gamma="scale": from the first batch
        self._learn_fed((X, labels, np.ones(labels.shape[0], dtype=bool), weights), rehearsal)
        return self

    def learn_rows(self, fed, rehearsal=None):
        """Learn rows released by a pipeline's order stage: ``fed`` = ``(X, labels, original)``
        or ``(X, labels, original, weights)`` — X (m, d) dense or CSR, already scaled; labels
        (m,) encoded (±1 binary, class index otherwise); original (m,) bool, False for the run
        guard's replayed rows; weights (m,) float64 importance weights (absent or None: ones)
        — or None (nothing released).  ``rehearsal``: the pipeline's rehearsal stage
        (:class:`~svmstream.solvers.online.stages.RehearsalStage`; None: no rehearsal), which
        plans extra steps among these rows.  Returns self."""
        self._learn_fed(fed, rehearsal)
        return self

    def flush(self):
        """Nothing is pending in an estimator (every row given is learned at once); kept for the
        streaming API: ``last_margins_``/``last_y_`` are emptied.  Returns self."""
        check_is_fitted(self, "classes_")
        self._learn_fed((np.zeros((0, self.n_features_in_)), np.zeros(0), np.zeros(0, dtype=bool)))
        return self

    def grow_features(self, n_features, rehearsal=None):
        """Widen the model to ``n_features`` input features (sparse input whose largest index
        grew; a missing feature is a zero).  Returns self.

        Support vectors (and the rows the rehearsal stage ``rehearsal`` remembers, if given)
        get zeros in the new features; everything else
        is kept, so decisions on rows that are zero in the new features do not change.
        ``n_features`` below ``n_features_in_`` raises ValueError.
        """
        check_is_fitted(self, "classes_")
        d_old, d_new = self.n_features_in_, int(n_features)
        if d_new < d_old:
            raise ValueError(f"n_features must be >= the model's {d_old}, got {n_features!r}")
        if d_new == d_old:
            return self
        self._grow_arrays(d_new)
        if rehearsal is not None:
            rehearsal.widen(d_new)
        self._learn_fed(None)
        return self

    def _grow_arrays(self, d_new):
        if self._sparse_svs():  # stored indices stay valid: only the scatter vectors widen
            self._sv_scratch = np.zeros(d_new)
            self._x_buf = np.zeros(d_new)
            self.n_features_in_ = d_new
            return
        sv_t = np.zeros((d_new, self._sv_t.shape[1]))
        sv_t[: self._sv_t.shape[0]] = self._sv_t
        self._sv_t = sv_t
        self._x_buf = np.zeros(d_new)
        self.n_features_in_ = d_new

    def _learn_fed(self, fed, rehearsal=None):
        """Learn the rows the preprocessor released (None: none yet), each followed by the
        steps of the rehearsal stage ``rehearsal`` on remembered examples (None, or a linear
        model: none), record the originals and feed their margins to the calibrator
        (:meth:`_calibrate`)."""
        if fed is None:
            self._learned(None, np.zeros(0))
            return
        X, labels, original = fed[:3]
        weights = fed_weights(fed)
        if rehearsal is not None and not self._linear() and rehearsal.applies(X, self.n_features_in_):
            w = unit_weights(labels.shape[0]) if weights is None else weights
            margins = rehearsal.learn(X, labels, w, self._learn_plan)
        else:
            margins = self._learn(X, labels, np.arange(X.shape[0], dtype=np.int64), weights)
        if weights is not None and not weights.all():  # weight 0: no step, not an example learned
            original = original & (weights > 0)
        self._calibrate(margins[original], labels[original])
        self._learned(margins[original], labels[original])

    # ------------------------------------------------------------------ rehearsal
    def _learn_plan(self, X_ext, y_ext, w_ext, order, memory, gather):
        """Learn ``X_ext[order]`` (importance weights ``w_ext``); returns ``(margins, α of the
        extended rows or None)`` (BSCA overrides it to revisit the remembered rows' dual
        variables)."""
        return self._learn(X_ext, y_ext, order, w_ext), None

    def _class_index(self, labels):
        """Encoded labels (±1 binary, index otherwise) → class indices (n,) int64."""
        if self.classes_.shape[0] == 2:
            return (np.asarray(labels) > 0).astype(np.int64)
        return np.asarray(labels).astype(np.int64)

    def _calibrate(self, margins, labels):
        """Feed the prequential margins of received examples to the calibrator (none inside a
        pipeline or a one-vs-rest parent's binary model)."""
        if margins.shape[0] == 0 or self._ovr_child or self.calibrator_ is None:
            return
        self.calibrator_.update(margins, self._class_index(labels))

    def restart_schedule(self, t0=None):
        """Restart the step-size schedule (:meth:`_reset_schedule`) at t = ``t0`` (None:
        :data:`DRIFT_RESET_T0`; an int >= 1): what the drift stage asks for after a detection
        (:mod:`svmstream.solvers.online.stages.drift`), and a warm-started drift challenger
        (:meth:`svmstream.solvers.online.StreamingClassifier.warm_copy`); the pipeline empties
        its rehearsal memory with it (its rows hold the old concept).  Nothing received is
        dropped.  Returns self."""
        check_is_fitted(self, "classes_")
        self._reset_schedule(DRIFT_RESET_T0 if t0 is None else int(t0))
        return self

    def _reset_schedule(self, t0=DRIFT_RESET_T0):
        """Restart the step-size schedule at t = ``t0`` (the step count ``t_`` is kept; the
        kernels read t − shift)."""
        self._counters[C_SCHED_SHIFT] = max(0, int(self._counters[C_STEPS]) - t0)

    def _learned(self, margins, labels):
        """Record the examples a call learned: ``last_margins_`` (f before each step, None:
        nothing learned) and ``last_y_`` (their labels, from ``classes_``)."""
        if margins is None:
            n_cols = self._coef.shape[1]
            margins = np.zeros((0,) if n_cols == 1 else (0, n_cols))
        self.last_margins_ = margins
        index = (labels > 0).astype(np.intp) if self.classes_.shape[0] == 2 else labels.astype(np.intp)
        self.last_y_ = self.classes_[index]

    def add_class(self, label, rehearsal=None):
        """Add a class learned from the data (a label not seen before); returns self.

        ``label`` must sort after every class in ``classes_``, so existing classes keep
        their indices (the service passes class indices 0, 1, 2, … in order of first
        appearance).  The new class starts with zero coefficients.  A binary model becomes
        a multi-class one: BSGD's single weight vector w becomes the Crammer–Singer
        columns (−w/2, w/2, 0), whose margin f_y − f_r equals the binary margin y·f, so
        its decisions do not change; BSCA becomes one-vs-rest with models (−w, w, 0).
        The calibrator grows with it (a pipeline's stages grow their own state).

        Raises
        ------
        ValueError
            If ``label`` does not sort after ``classes_[-1]``.
        """
        check_is_fitted(self, "classes_")
        if not np.asarray(label) > self.classes_[-1]:
            raise ValueError(
                f"a new class must sort after the model's classes {self.classes_.tolist()}, got {label!r}"
            )
        self._add_class_arrays(rehearsal)
        self.classes_ = np.append(self.classes_, label)
        if self.calibrator_ is not None:
            self.calibrator_.add_class()
        n_cols = self.classes_.shape[0]
        self.last_margins_ = np.zeros((0, n_cols))
        self.last_y_ = self.classes_[:0]
        return self

    def _add_class_arrays(self, rehearsal=None):
        """Grow the coefficient columns by one class (see :meth:`add_class`; ``rehearsal``:
        the pipeline's stage, for BSCA's binary models)."""
        cap, k = self._coef.shape[0], self.classes_.shape[0]
        coef = np.zeros((cap, k + 1))
        bias = np.zeros(k + 1)
        if k == 2:  # binary w → Crammer–Singer (−w/2, w/2, 0): same margins and decisions
            coef[:, 0], coef[:, 1] = -0.5 * self._coef[:, 0], 0.5 * self._coef[:, 0]
            bias[0], bias[1] = -0.5 * self._bias[0], 0.5 * self._bias[0]
            self._reals[R_NORM2] *= 0.5  # ‖w/2‖² twice
        else:
            coef[:, :k] = self._coef
            bias[:k] = self._bias
        self._coef, self._bias = coef, bias
        self._f_buf = np.zeros(k + 1)
