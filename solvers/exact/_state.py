"""Saved state of :class:`._classes.DCSVMClassifier` (:mod:`svmstream.solvers.persistence`):
plain arrays and JSON metadata, the exact model's support vectors or each early-prediction
model's clusters and support vectors, dense or CSR, and the calibrator's state."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_is_fitted

from ..calibration import MarginCalibrator
from ._dcsvm import EarlyModel
from ._kernel_kmeans import KernelClusters
from ._kernels import KernelData, KernelSpec

__all__ = ["DCSVMState"]


def _kd_arrays(prefix: str, kd: KernelData) -> dict:
    if kd.is_sparse:
        return {
            f"{prefix}_data": kd.data.copy(),
            f"{prefix}_indices": kd.indices.copy(),
            f"{prefix}_indptr": kd.indptr.copy(),
        }
    return {f"{prefix}_dense": kd.dense.copy()}


def _kd_from(prefix: str, arrays: dict, n_features: int) -> KernelData:
    if f"{prefix}_dense" in arrays:
        return KernelData(np.asarray(arrays[f"{prefix}_dense"], dtype=np.float64))
    data = np.asarray(arrays[f"{prefix}_data"])
    indptr = np.asarray(arrays[f"{prefix}_indptr"])
    X = sp.csr_matrix(
        (data, np.asarray(arrays[f"{prefix}_indices"]), indptr), shape=(indptr.shape[0] - 1, n_features)
    )
    return KernelData(X)


class DCSVMState:
    """``get_state``/``from_state`` of DC-SVM (a mixin of :class:`._classes.DCSVMClassifier`)."""

    def get_state(self):
        """Plain arrays + JSON metadata for :mod:`solvers.persistence` (no pickling).

        Returns
        -------
        arrays : dict of str -> ndarray (copies, numeric dtypes); a calibrator's are prefixed
            ``cal__``
        meta : dict (JSON-serialisable), ``meta["estimator"] == "DCSVMClassifier"``; with a
            calibrator ``meta["calibration"]`` (its meta and split).  States without it (saved
            before calibration existed) load with ``calibrator_ = None``.
        """
        check_is_fitted(self)
        params = {
            k: v for k, v in self.get_params().items() if v is None or isinstance(v, (bool, int, float, str))
        }
        classes = self.classes_
        if classes.dtype.kind in "iub":
            cls_list = [int(c) for c in classes]
        elif classes.dtype.kind == "f":
            cls_list = [float(c) for c in classes]
        else:
            cls_list = [str(c) for c in classes]
        meta = {
            "estimator": type(self).__name__,
            "params": params,
            "classes": cls_list,
            "classes_kind": classes.dtype.kind,
            "n_features_in": int(self.n_features_in_),
            "kernel": self.kernel_spec_.to_dict(),
            "mode": "early" if self.early_models_ is not None else "exact",
            "dual_objective": [float(v) for v in self.dual_objective_],
            "n_iter": [int(v) for v in self.n_iter_],
        }
        arrays = {"intercept": self.intercept_.copy()}
        if getattr(self, "calibrator_", None) is not None:
            cal_arrays, cal_meta = self.calibrator_.get_state()
            arrays.update({f"cal__{k}": v for k, v in cal_arrays.items()})
            meta["calibration"] = {"state": cal_meta, "split": self.calibration_}
        if self.early_models_ is None:
            arrays.update(_kd_arrays("sv", self._sv_kd))
            arrays["dual_coef"] = self.dual_coef_.copy()
            arrays["support"] = self.support_.copy()
        else:
            meta["early_level"] = int(self.early_models_[0].level)
            meta["n_problems"] = len(self.early_models_)
            for p, m in enumerate(self.early_models_):
                arrays.update(_kd_arrays(f"e{p}_samples", m.clusters.samples))
                arrays[f"e{p}_sample_labels"] = m.clusters.sample_labels.copy()
                arrays[f"e{p}_sizes"] = m.clusters.sizes.copy()
                arrays[f"e{p}_S"] = m.clusters.S.copy()
                arrays.update(_kd_arrays(f"e{p}_sv", m.sv))
                arrays[f"e{p}_coef"] = m.coef.copy()
                arrays[f"e{p}_sv_ptr"] = m.sv_ptr.copy()
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta):
        """Rebuild a fitted estimator from :meth:`get_state` output.

        Raises
        ------
        ValueError
            If ``meta`` names another estimator or lacks required fields.
        """
        if meta.get("estimator") != cls.__name__:
            raise ValueError(f"state is for {meta.get('estimator')!r}, not {cls.__name__}")
        est = cls(**meta["params"])
        kind = meta["classes_kind"]
        dtype = {"i": np.int64, "u": np.uint64, "b": np.bool_, "f": np.float64}.get(kind)
        est.classes_ = np.array(meta["classes"], dtype=dtype if dtype else None)
        if dtype is None and kind == "O":
            est.classes_ = np.array(meta["classes"], dtype=object)
        nf = int(meta["n_features_in"])
        est.n_features_in_ = nf
        est.kernel_spec_ = KernelSpec(**meta["kernel"])
        est.dual_objective_ = np.asarray(meta["dual_objective"], dtype=np.float64)
        est.fit_history_ = []
        est.n_iter_ = np.asarray(meta.get("n_iter", [1]), dtype=np.int64)
        est.intercept_ = np.asarray(arrays["intercept"], dtype=np.float64).copy()
        est.calibrator_ = est.calibration_ = None  # states saved before calibration: none
        if "calibration" in meta:
            cal = {k[5:]: v for k, v in arrays.items() if k.startswith("cal__")}
            est.calibrator_ = MarginCalibrator.from_state(cal, meta["calibration"]["state"])
            est.calibration_ = meta["calibration"]["split"]
        if meta["mode"] == "exact":
            est.early_models_ = None
            est._sv_kd = _kd_from("sv", arrays, nf)
            est._sparse_fit = est._sv_kd.is_sparse
            est.support_vectors_ = est._sv_kd.matrix()
            est.dual_coef_ = np.asarray(arrays["dual_coef"], dtype=np.float64).copy()
            est.support_ = np.asarray(arrays["support"], dtype=np.int64).copy()
        else:
            models = []
            for p in range(int(meta["n_problems"])):
                clusters = KernelClusters(
                    samples=_kd_from(f"e{p}_samples", arrays, nf),
                    sample_labels=np.asarray(arrays[f"e{p}_sample_labels"], dtype=np.int64).copy(),
                    sizes=np.asarray(arrays[f"e{p}_sizes"], dtype=np.float64).copy(),
                    S=np.asarray(arrays[f"e{p}_S"], dtype=np.float64).copy(),
                )
                models.append(
                    EarlyModel(
                        level=int(meta["early_level"]),
                        clusters=clusters,
                        sv=_kd_from(f"e{p}_sv", arrays, nf),
                        coef=np.asarray(arrays[f"e{p}_coef"], dtype=np.float64).copy(),
                        sv_ptr=np.asarray(arrays[f"e{p}_sv_ptr"], dtype=np.int64).copy(),
                    )
                )
            est.early_models_ = models
            est._sparse_fit = models[0].sv.is_sparse
            est.support_ = np.zeros(0, dtype=np.int64)
            est.dual_coef_ = np.zeros((len(models), 0))
            est.support_vectors_ = None
        return est
