"""Saved state of a budgeted kernel model (a mixin of :class:`._base.BudgetedKernelModel`):
the exact ``get_state``/``from_state`` round trip of the whole learner state (no pickle;
:mod:`svmstream.solvers.persistence`) and which older layouts load."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..calibration import MarginCalibrator
from ._sparse_pool import new_arena


class KernelModelState:
    """``get_state``/``from_state`` of :class:`._base.BudgetedKernelModel`."""

    # ------------------------------------------------------------------ persistence
    def get_state(self):
        """Whole learner state as ``(arrays, meta)``; see :mod:`solvers.persistence`."""
        check_is_fitted(self, "classes_")
        n = self.n_support_vectors_
        arrays = {
            "classes": self.classes_.copy(),
            "sv_sq": self._sv_sq[:n].copy(),
            "coef": self._coef[:n].copy(),
            "bias": self._bias.copy(),
            "counters": self._counters.copy(),
            "reals": self._reals.copy(),
            "merge_diagnostics": self.merge_diagnostics_.copy(),
        }
        if self._sparse_svs():  # only the live SVs' nonzeros (state version 6)
            arrays["sv_data"], arrays["sv_idx"], arrays["sv_len"] = self._compact_svs()
        else:
            arrays["sv_t"] = self._sv_t[:, :n].copy()
        if self._k_inv.shape[0] > 1:
            arrays["k_inv"] = self._k_inv[:n, :n].copy()
        monitors = self._calibrator_state(arrays)
        meta = {
            **monitors,
            "gamma": self.gamma_,
            "pool": not self.__dict__.get("_pool_pending", False),
            "estimator": type(self).__name__,
            "state_version": self.STATE_VERSION,
            "params": self.get_params(),
            "sv_storage": getattr(self, "sv_storage_", "dense"),
            "n_features_in": self.n_features_in_,
            "lambda_eff": self.lambda_eff_,
            "rng_state": self.rng_.bit_generator.state,
        }
        return arrays, meta

    def _load_sparse_svs(self, arrays, n):
        """Sparse SVs of a saved state into a fresh, compact arena (``used`` = their nonzeros;
        where the entries sit does not change the model).  Raises ValueError if they do not fit."""
        data, idx, lens = arrays["sv_data"], arrays["sv_idx"], np.asarray(arrays["sv_len"], dtype=np.int64)
        total = int(lens.sum()) if lens.size else 0
        if (
            n > self.budget
            or lens.shape != (n,)
            or data.shape != (total,)
            or idx.shape != (total,)
            or (total and (idx.min() < 0 or idx.max() >= self.n_features_in_))
        ):
            raise ValueError("saved support vectors do not fit the saved budget/dimension/classes")
        self._sv_data, self._sv_idx = new_arena(2 * total + 16 * self._sv_start.shape[0])
        self._sv_data[:total], self._sv_idx[:total] = data, idx
        self._sv_start[:n] = np.concatenate([[0], np.cumsum(lens)[:-1]]) if n else lens
        self._sv_len[:n] = lens
        self._sv_used[0] = total

    def _calibrator_state(self, arrays):
        """Add the calibrator's arrays (prefixed ``cal__``) to ``arrays``; returns its meta
        (nothing when a pipeline's calibration stage calibrates)."""
        if self.calibrator_ is None:
            return {}
        cal_arrays, cal_meta = self.calibrator_.get_state()
        arrays.update({f"cal__{k}": v for k, v in cal_arrays.items()})
        return {"calibration": cal_meta}

    def _load_calibrator(self, arrays, meta):
        """Restore what :meth:`_calibrator_state` saved (a state without it starts fresh).  A
        drift detector saved by an engine that still carried the drift stage (``"drift"``,
        ``drift__*``) is the pipeline's to load (:mod:`svmstream.solvers.online.pipeline`)."""
        if "calibration" in meta and self.calibrator_ is not None:
            cal = {k[5:]: v for k, v in arrays.items() if k.startswith("cal__")}
            self.calibrator_ = MarginCalibrator.from_state(cal, meta["calibration"])

    @classmethod
    def from_state(cls, arrays, meta):
        """Rebuild an estimator that continues exactly where :meth:`get_state` left off.

        Raises ValueError if the state's version or shapes do not fit."""
        version = meta.get("state_version")
        if version not in cls.STATE_VERSIONS:
            raise ValueError(f"unsupported {cls.__name__} state version {version}")
        est = cls.from_params(dict(meta["params"]))
        est.sv_storage_ = meta.get("sv_storage", "dense")  # version <= 5: dense SVs
        est._init_state(meta["n_features_in"], arrays["classes"], 1, ready=False, calibrate=calibrates(meta))
        est._load_gamma(meta)
        if saved_pool(meta) or arrays["coef"].shape[0]:  # a model still warming up has no pool yet
            est._ensure_pool()
        est.lambda_eff_ = float(meta["lambda_eff"])
        n = arrays["coef"].shape[0]
        if est._sparse_svs():
            est._load_sparse_svs(arrays, n)
        elif n > est.budget or arrays["sv_t"].shape != (est.n_features_in_, n):
            raise ValueError("saved support vectors do not fit the saved budget/dimension/classes")
        else:
            est._sv_t[:, :n] = arrays["sv_t"]
        if arrays["coef"].shape[1:] != est._coef.shape[1:]:
            raise ValueError("saved support vectors do not fit the saved budget/dimension/classes")
        est._sv_sq[:n] = arrays["sv_sq"]
        est._coef[:n] = arrays["coef"]
        est._bias[:] = arrays["bias"]
        est._counters[: arrays["counters"].shape[0]] = arrays["counters"]  # v4 and older: no shift
        est._reals[:] = arrays["reals"]
        est.merge_diagnostics_[:] = arrays["merge_diagnostics"]
        if "k_inv" in arrays:
            est._k_inv[:n, :n] = arrays["k_inv"]
        est.rng_.bit_generator.state = meta["rng_state"]
        est._load_calibrator(arrays, meta)  # a saved rehearsal memory ("rehearsal") is the pipeline's
        return est

    def _load_gamma(self, meta):
        """γ in use from a saved meta: ``gamma`` (version 8), or the preprocessing's (older)."""
        if "gamma" in meta:
            self.gamma_ = meta["gamma"]
        elif meta.get("preprocessing") is not None:
            self.gamma_ = meta["preprocessing"]["gamma"]


def saved_pool(meta) -> bool:
    """Whether a saved model had its SV pool (learning had started): ``pool`` (version 8), or
    its preprocessing was ready (older; version 2: always)."""
    if "pool" in meta:
        return bool(meta["pool"])
    pp = meta.get("preprocessing")
    return True if pp is None else bool(pp["ready"])


def calibrates(meta) -> bool:
    """Whether a model restored from ``meta`` keeps its own probability calibrator: yes, unless
    the meta says ``"calibrates": False`` -- what a streaming pipeline hands with its engine's
    state (its calibration stage calibrates; an engine saves no calibrator then)."""
    return bool(meta.get("calibrates", True))
