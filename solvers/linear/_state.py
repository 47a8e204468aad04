"""Saved state of :class:`._classes.LinearDualCDClassifier` (:mod:`svmstream.solvers.persistence`):
plain arrays and JSON metadata, no pickling; the calibrator's state under ``cal__``."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..calibration import MarginCalibrator

__all__ = ["LinearState"]


class LinearState:
    """``get_state``/``from_state`` of the linear dual CD estimator (a mixin)."""

    def get_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Plain-data state for :mod:`solvers.persistence` (no pickling).

        Returns
        -------
        arrays : dict
            ``coef`` (n_problems, n_features) float64, for numeric labels ``classes``, and
            with a calibrator its arrays prefixed ``cal__``.
        meta : dict
            JSON-serialisable: ``estimator``, ``params``, ``n_features_in``, labels (when
            not numeric), optional ``feature_names_in``, the reporting attributes, and with
            a calibrator ``calibration`` (its meta and split).  States without it (saved
            before calibration existed) load with ``calibrator_ = None``.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        TypeError
            If the class labels are neither numeric nor strings.
        """
        check_is_fitted(self, "coef_")
        arrays: dict[str, np.ndarray] = {"coef": np.array(self.coef_, dtype=np.float64)}
        meta: dict[str, Any] = {
            "estimator": type(self).__name__,
            "params": {
                "selection": self.selection,
                "C": float(self.C),
                "tol": float(self.tol),
                "max_iter": int(self.max_iter),
                "random_state": (
                    int(self.random_state) if isinstance(self.random_state, numbers.Integral) else None
                ),
                "probability": bool(self.probability),
            },
            "n_features_in": int(self.n_features_in_),
            "n_iter": self.n_iter_.tolist(),
            "n_steps": self.n_steps_.tolist(),
            "n_updates": self.n_updates_.tolist(),
            "converged": self.converged_.tolist(),
            "dual_objective": self.dual_objective_.tolist(),
            "primal_objective": self.primal_objective_.tolist(),
            "fit_time": float(self.fit_time_),
        }
        classes = self.classes_
        if classes.dtype.kind in "biuf":
            arrays["classes"] = classes.copy()
        elif all(isinstance(c, str) for c in classes.tolist()):
            meta["classes"] = [str(c) for c in classes.tolist()]
            meta["classes_dtype"] = "object" if classes.dtype == object else "str"
        else:
            raise TypeError("only numeric or string class labels can be saved")
        if hasattr(self, "feature_names_in_"):
            meta["feature_names_in"] = [str(f) for f in self.feature_names_in_]
        if getattr(self, "calibrator_", None) is not None:
            cal_arrays, cal_meta = self.calibrator_.get_state()
            arrays.update({f"cal__{k}": v for k, v in cal_arrays.items()})
            meta["calibration"] = {"state": cal_meta, "split": self.calibration_}
        return arrays, meta

    @classmethod
    def from_state(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any]):
        """Rebuild an estimator that predicts identically to the one that was saved.

        Parameters
        ----------
        arrays, meta
            As returned by :meth:`get_state`.

        Returns
        -------
        LinearDualCDClassifier

        Raises
        ------
        ValueError
            If ``meta`` names another estimator or the arrays have inconsistent shapes.
        """
        if meta.get("estimator") != cls.__name__:
            raise ValueError(f"state is for {meta.get('estimator')!r}, not {cls.__name__}")
        est = cls(**meta["params"])
        coef = np.array(arrays["coef"], dtype=np.float64)
        if "classes" in arrays:
            classes = np.array(arrays["classes"])
        elif meta.get("classes_dtype") == "object":
            classes = np.array(meta["classes"], dtype=object)
        else:
            classes = np.array(meta["classes"])
        n_problems = 1 if classes.shape[0] == 2 else classes.shape[0]
        if coef.ndim != 2 or coef.shape != (n_problems, meta["n_features_in"]):
            raise ValueError(f"coef has shape {coef.shape}, expected ({n_problems}, {meta['n_features_in']})")
        est.classes_ = classes
        est.coef_ = coef
        est.intercept_ = np.zeros(n_problems, dtype=np.float64)
        est.n_features_in_ = int(meta["n_features_in"])
        if "feature_names_in" in meta:
            est.feature_names_in_ = np.array(meta["feature_names_in"], dtype=object)
        est.n_iter_ = np.array(meta["n_iter"], dtype=np.int64)
        est.n_steps_ = np.array(meta["n_steps"], dtype=np.int64)
        est.n_updates_ = np.array(meta["n_updates"], dtype=np.int64)
        est.converged_ = np.array(meta["converged"], dtype=bool)
        est.dual_objective_ = np.array(meta["dual_objective"], dtype=np.float64)
        est.primal_objective_ = np.array(meta["primal_objective"], dtype=np.float64)
        est.fit_time_ = float(meta["fit_time"])
        est.calibrator_ = est.calibration_ = None  # states saved before calibration: none
        if "calibration" in meta:
            cal = {k[5:]: v for k, v in arrays.items() if k.startswith("cal__")}
            est.calibrator_ = MarginCalibrator.from_state(cal, meta["calibration"]["state"])
            est.calibration_ = meta["calibration"]["split"]
        return est
