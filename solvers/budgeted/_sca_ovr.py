"""One-vs-rest BSCA (a mixin of :class:`._sca.BudgetedSCAClassifier`): one binary model per
class, each with its own budget, learning every row the parent is given (``estimators_``);
a binary model becoming one-vs-rest when a class is added (models −w, w, 0)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._state import N_COUNTERS
from ._weights import fed_weights

#: The arrays of a sparse SV pool (``BudgetedKernelModel._alloc_pool``).
_SPARSE_POOL = ("_sv_data", "_sv_idx", "_sv_start", "_sv_len", "_sv_used", "_sv_scratch")


class OneVsRest:
    """The one-vs-rest models of BSCA."""

    def _is_ovr(self):
        return hasattr(self, "classes_") and self.classes_.shape[0] > 2

    def _make_binary(self, k, rehearsal=None):
        """Binary model k of one-vs-rest: it learns the rows the parent is given, with its γ;
        given the pipeline's rehearsal stage, its own stage is made there (at index k, the
        memory bound shared by the classes the parent has now)."""
        params = self.get_params()
        params.update(gamma=self.gamma_, sv_storage=getattr(self, "sv_storage_", "dense"))
        if self.random_state is not None:
            params["random_state"] = int(self.random_state) + k
        child = type(self)(**params)
        child._ovr_child = True
        if rehearsal is not None:  # its own memory; the K binary models share the bound
            rehearsal.child(k, self.classes_.shape[0], params["random_state"])
        return child

    def _start_ovr(self, n_features, classes, streaming, calibrate=True):
        self.classes_ = np.unique(classes)
        self.n_features_in_ = int(n_features)
        self.rng_ = np.random.default_rng(self.random_state)
        self.gamma_ = self._given_gamma()
        self._new_calibrator(calibrate)
        self._counters = np.zeros(N_COUNTERS, dtype=np.int64)  # one-vs-rest: zeros (the children count)
        self.last_margins_ = np.zeros((0, self.classes_.shape[0]))
        self.last_y_ = self.classes_[:0]

    def _ovr_learn(self, fed, rehearsal=None):
        """One streaming step per released row for every binary model (None: nothing released),
        binary model k rehearsing with its stage of ``rehearsal`` (:meth:`_make_binary`);
        records margins and labels of the original (not replayed) rows and calibrates as
        :meth:`BudgetedKernelModel._learn_fed`."""
        if fed is None or fed[0].shape[0] == 0:
            self.last_margins_, self.last_y_ = np.zeros((0, self.classes_.shape[0])), self.classes_[:0]
            return
        X, index, original = fed[:3]
        weights = fed_weights(fed)
        if not hasattr(self, "estimators_"):
            self.estimators_ = [self._fresh_binary(k, rehearsal) for k in range(self.classes_.shape[0])]
        for k, binary in enumerate(self.estimators_):
            own = None if rehearsal is None else rehearsal.of_binary(k)
            signs = np.where(index == k, 1.0, -1.0)
            binary._partial_fit(X, signs, classes=[-1.0, 1.0], sample_weight=weights, rehearsal=own)
        if weights is not None and not weights.all():  # weight 0: no step, not an example learned
            original = original & (weights > 0)
        self.C_eff_ = self.estimators_[0].C_eff_
        self.lambda_eff_ = self.estimators_[0].lambda_eff_
        self.last_margins_ = np.column_stack([b.last_margins_ for b in self.estimators_])[original]
        self._calibrate(self.last_margins_, index[original])
        self.last_y_ = self.classes_[index[original].astype(np.intp)]

    def _fresh_binary(self, k, rehearsal=None):
        """One-vs-rest model k, fitted state allocated, no support vectors yet."""
        binary = self._make_binary(k, rehearsal)
        binary._init_state(self.n_features_in_, np.array([-1.0, 1.0]), streaming=True)
        return binary

    def _binary_copy(self, k, sign, rehearsal=None):
        """One-vs-rest model k holding this binary model's SVs with coefficients × ``sign``."""
        binary = self._fresh_binary(k, rehearsal)
        for name in ("_sv_t", "_sv_sq", "_counters", "_reals", "_k_inv", "merge_diagnostics_"):
            getattr(binary, name)[...] = getattr(self, name)
        if self._sparse_svs():
            for name in _SPARSE_POOL:
                setattr(binary, name, getattr(self, name).copy())
        binary._coef[...] = sign * self._coef
        binary.C_eff_, binary.lambda_eff_ = self.C_eff_, self.lambda_eff_
        return binary

    def _fit_ovr(self, X, y, classes, callback):
        self._resolve_sv_storage(X)
        self._start_ovr(X.shape[1], classes, streaming=False)
        X_raw = X = X if sp.issparse(X) else np.ascontiguousarray(X)
        self._resolve_gamma(X)
        self.estimators_ = []
        for k, label in enumerate(classes):
            binary = self._make_binary(k)
            binary.fit(X, np.where(y == label, 1.0, -1.0))
            self.estimators_.append(binary)
        self.C_eff_ = self.estimators_[0].C_eff_
        self.lambda_eff_ = self.estimators_[0].lambda_eff_
        self.calibrator_.fit(self.decision_function(X_raw), np.searchsorted(classes, y))
        if callback is not None:
            callback(self, int(self.epochs))
