"""The selector's saved state: every surviving candidate's, the held rows, the scores and the
rungs (:class:`SelectionState`, a mixin of :class:`~.classifier.SelectionClassifier`; no pickle)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_is_fitted

from ...budgeted import BudgetedSGDClassifier
from ...persistence import estimator_from_state


def candidate_states(models, arrays: dict) -> list:
    """Each candidate's ``get_state()`` arrays put in ``arrays`` under ``c{i}.``; returns their
    metas in order (None for a retired candidate)."""
    metas = []
    for i, est in enumerate(models):
        if est is None:
            metas.append(None)
            continue
        sub, meta = est.get_state()
        arrays.update({f"c{i}.{k}": v for k, v in sub.items()})
        metas.append(meta)
    return metas


def candidates_from_states(arrays, metas) -> list:
    """The candidates :func:`candidate_states` saved, rebuilt (None where one was retired)."""
    models = []
    for i, meta in enumerate(metas):
        prefix = f"c{i}."
        sub = {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}
        models.append(None if meta is None else estimator_from_state(sub, meta))
    return models


class SelectionState:
    """Mixin: :meth:`get_state` and :meth:`from_state`."""

    STATE_VERSION = 1

    def get_state(self):
        """``(arrays, meta)``: each surviving candidate's state under ``c{i}.``, the held rows under
        ``held{j}.``, the scores and the rungs."""
        check_is_fitted(self)
        if "_published_report" in self.__dict__:
            raise TypeError("a published copy of a selector holds its leader only: save the selector itself")
        arrays = {"classes": self.classes_, "score": self._score.copy()}
        arrays.update({f"hits{i}": h for i, h in enumerate(self._hits)})
        held_meta = []
        for j, (X, y, w) in enumerate(self._held):
            arrays[f"held{j}.y"] = y
            if w is not None:
                arrays[f"held{j}.w"] = w
            if sp.issparse(X):
                X = X.tocsr()
                arrays.update(
                    {f"held{j}.data": X.data, f"held{j}.indices": X.indices, f"held{j}.indptr": X.indptr}
                )
                held_meta.append({"sparse": True, "shape": list(X.shape)})
            else:
                arrays[f"held{j}.X"] = X
                held_meta.append({"sparse": False})
        cands = candidate_states(self.candidates_, arrays)
        params = {k: v for k, v in self.get_params(deep=False).items() if k != "estimator"}
        plain = self._plain()
        meta = {
            "estimator": type(self).__name__,
            "state_version": self.STATE_VERSION,
            "params": params,
            "plain": plain.get_params(),
            "n_received": int(self.n_received_),
            "n_features": self.__dict__.get("n_features_in_"),
            "past": int(self._past),
            "segment_open": bool(self._segment_open),
            "held": held_meta,
            "candidates": cands,
            "settings": self.settings_,
            "rungs": self.rungs_,
            "gamma_scale": getattr(self, "gamma_scale_", None),
            "race_size": self.__dict__.get("race_size_"),
            "window_rows": self.__dict__.get("window_rows_"),
            "race_end_detections": int(self._race_end_detections),
        }
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta):
        """Rebuild from :meth:`get_state`; the result continues exactly as the saved one would."""
        params = {"leader": "recent", **meta["params"]}  # states saved before the rule existed
        if params.get("candidates") is not None:
            params["candidates"] = [dict(c) for c in params["candidates"]]
        est = cls(BudgetedSGDClassifier(**meta["plain"]), **params)
        est._begin(arrays["classes"])
        if meta.get("n_features") is not None:
            est.n_features_in_ = int(meta["n_features"])
        est.n_received_ = int(meta["n_received"])
        for j, hm in enumerate(meta["held"]):
            if hm["sparse"]:
                parts = (arrays[f"held{j}.data"], arrays[f"held{j}.indices"], arrays[f"held{j}.indptr"])
                X = sp.csr_matrix(parts, shape=tuple(hm["shape"]))
            else:
                X = arrays[f"held{j}.X"]
            est._held.append((X, arrays[f"held{j}.y"], arrays.get(f"held{j}.w")))
        models = candidates_from_states(arrays, meta["candidates"])
        est.settings_ = [{"early": False, **s} for s in meta["settings"]]
        past = int(meta["past"])
        est._new_race(models, before=est.n_received_ - past)
        est._past = past
        est._segment_open = bool(meta["segment_open"])
        est._score = np.array(arrays["score"], dtype=np.int64).reshape(-1, 4)
        est._hits = [np.array(arrays[f"hits{i}"], dtype=np.int8) for i in range(est._score.shape[0])]
        est.rungs_ = [dict(r) for r in meta["rungs"]]
        if meta.get("gamma_scale") is not None:
            est.gamma_scale_ = float(meta["gamma_scale"])
        if meta.get("race_size") is not None:
            est.race_size_ = int(meta["race_size"])
        elif est.settings_:  # saved before race_size: every candidate raced
            est.race_size_ = len(est.settings_)
        est._race_end_detections = int(meta.get("race_end_detections", 0))
        if meta.get("window_rows") is not None:  # a wide race's smaller window (wide.py)
            est.window_rows_ = int(meta["window_rows"])
        return est
