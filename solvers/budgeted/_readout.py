"""What a budgeted kernel model answers (a mixin of :class:`._base.BudgetedKernelModel`):
decision values, labels, probabilities, the published copy, the counters as attributes and
the statistics."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_is_fitted

from ._decision import dense_decision, rbf_decision_batch
from ._publish import published_copy
from ._sizes import DENSE_CHUNK_ELEMENTS, iter_dense_rows
from ._state import (
    C_MAINTENANCE,
    C_MERGES,
    C_N_SV,
    C_STEPS,
    C_VIOLATIONS,
    R_MERGE_SECONDS,
    R_SCALE,
    R_WD_SUM,
)


class Readout:
    """Prediction, counters and statistics of :class:`._base.BudgetedKernelModel`."""

    def decision_function(self, X):
        """f(x) = Σ_j α_j k(sv_j, x) (+ b): (n,) float64 for binary models (positive side =
        ``classes_[1]``), (n, n_classes) float64 for multi-class models."""
        check_is_fitted(self, "classes_")
        X = self._validate_X(X, reset=False)
        out = np.empty((X.shape[0], self._coef.shape[1]), dtype=np.float64)
        row_buf = np.empty_like(self._row_buf)  # own scratch: concurrent predictions are safe
        if self._sparse_svs():
            pool = self._pool(np.zeros(self.n_features_in_))  # own scatter vector, likewise
            args = (self._sv_sq, self._coef, self._bias, self.n_support_vectors_, self.gamma_)
            rbf_decision_batch(self._csr_input(X), pool, *args, float(self._reals[R_SCALE]), out, row_buf)
            return out[:, 0] if out.shape[1] == 1 else out
        chunk_rows = max(1, DENSE_CHUNK_ELEMENTS // max(1, X.shape[1]))
        order = np.arange(X.shape[0], dtype=np.int64)
        done = 0
        for X_part, local_order in iter_dense_rows(X, order, chunk_rows):
            part = out[done : done + local_order.shape[0]]
            dense_decision(  # per-row kernel for small batches, BLAS blocks and threads for large
                X_part,
                self._sv_t,
                self._sv_sq,
                self._coef,
                self._bias,
                self.n_support_vectors_,
                self.gamma_,
                float(self._reals[R_SCALE]),
                part,
                row_buf,
            )
            done += local_order.shape[0]
        return out[:, 0] if out.shape[1] == 1 else out

    def predict(self, X):
        """Predicted labels (n,) from ``classes_``."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(np.intp)]
        return self.classes_[np.argmax(scores, axis=1)]

    def predict_proba(self, X):
        """Calibrated class probabilities, (n, n_classes) float64, columns in ``classes_``
        order, rows summing to 1; ``argmax`` of a row is always the label :meth:`predict`
        gives.

        The calibration (:class:`~svmstream.solvers.calibration.MarginCalibrator`: a
        slope/temperature on the decision values) is learned online from the margins the
        learner computes before each step (prequential), refitted on a sliding window;
        :meth:`fit` calibrates on its last epoch's margins.  Raises like :meth:`decision_function`.
        """
        decision = self.decision_function(X)  # raises NotFittedError before fit
        return self.calibrator_.predict_proba(decision)

    def published_copy(self):
        """A read-only copy for predictions that shares what the learner never rewrites
        (O(d · n_sv) dense, O(B) sparse; not the buffers): :func:`._publish.published_copy`."""
        return published_copy(self)

    # ------------------------------------------------------------------ statistics
    @property
    def n_support_vectors_(self):
        return int(self._counters[C_N_SV])

    @property
    def t_(self):
        """Learning steps taken, including the run guard's replayed examples (``n_replayed_``)."""
        return int(self._counters[C_STEPS])

    #: The run guard and drops at drifts are the pipeline's (its order stage counts them).
    n_replayed_ = 0
    n_discarded_ = 0

    @property
    def n_seen_(self):
        """Examples learned: ``t_`` − ``n_rehearsed_`` (inside a pipeline the run guard's replayed
        rows and the rehearsal stage's steps are steps too; the pipeline counts what it
        received)."""
        return int(self._counters[C_STEPS]) - self.n_rehearsed_

    #: Rehearsal is the pipeline's too (its rehearsal stage counts its steps, which are steps
    #: in ``t_``): an estimator alone takes none.
    n_rehearsed_ = 0

    @property
    def n_merges_(self):
        return int(self._counters[C_MERGES])

    @property
    def n_violations_(self):
        return int(self._counters[C_VIOLATIONS])

    @property
    def n_maintenance_(self):
        return int(self._counters[C_MAINTENANCE])

    @property
    def weight_degradation_total_(self):
        return float(self._reals[R_WD_SUM])

    @property
    def maintenance_seconds_(self):
        """Wall time spent in budget maintenance (only measured with ``profile=True``); for
        projection it includes the O(B²) update of K⁻¹ when an SV is added."""
        return float(self._reals[R_MERGE_SECONDS])

    @property
    def support_vectors_(self):
        """(n_sv, d) float64: a dense array, or a ``scipy.sparse.csr_matrix`` for sparse storage."""
        n = self.n_support_vectors_
        if self._sparse_svs():
            data, idx, lens = self._compact_svs()
            indptr = np.concatenate([[0], np.cumsum(lens)])
            return sp.csr_matrix((data, idx, indptr), shape=(n, self.n_features_in_))
        return self._sv_t[:, :n].T.copy()

    def _compact_svs(self):
        """The live sparse SVs as compact CSR pieces ``(data, indices int32, lengths int64)``."""
        n = self.n_support_vectors_
        starts, lens = self._sv_start[:n], self._sv_len[:n]
        pick = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens) + np.arange(lens.sum())
        return self._sv_data[pick], self._sv_idx[pick], lens.copy()

    @property
    def dual_coef_(self):
        """Effective coefficients α: (n_sv,) for binary, (n_sv, n_classes) for multi-class."""
        coef = self._coef[: self.n_support_vectors_] * self._reals[R_SCALE]
        return coef[:, 0] if coef.shape[1] == 1 else coef

    @property
    def intercept_(self):
        return self._bias.copy()

    def statistics(self):
        """Budget statistics (the BSGD paper's Table 6 quantities) as a JSON-able dict."""
        steps = max(self.t_, 1)
        maint = self.n_maintenance_
        return {
            "n_support_vectors": self.n_support_vectors_,
            "budget": int(self.budget),
            "steps": self.t_,
            "examples_seen": self.n_seen_,
            "violations": self.n_violations_,
            "maintenance_events": maint,
            "merges": self.n_merges_,
            "merging_frequency": maint / steps,
            "average_weight_degradation": self.weight_degradation_total_ / maint if maint else 0.0,
            "sv_storage": getattr(self, "sv_storage_", None),
            "sv_nonzeros": self.sv_nonzeros_ if hasattr(self, "_sv_t") else 0,
            "rehearsal_steps": self.n_rehearsed_,
        }
