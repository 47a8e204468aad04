"""Saved state of the task pipelines (:mod:`.tasks`): :class:`TaskState`, pickle-free arrays and
a JSON meta (:mod:`svmstream.solvers.persistence`).

The arrays are the pipeline's own (``_ARRAYS``: the scaling, the rehearsal reservoir), the held
warm-up window (``window_X``/``window_y``/``window_w``), each stage's (``<part>/...``: drift, the
target scaler, the growing scales, the intervals or the threshold) and the engine's
(``engine/...``).  A state saved by an earlier version loads: an array or a part it lacks keeps
the fresh pipeline's value (weights of 1, scales that have not grown, no reservoir scores).
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..persistence import estimator_from_state


class TaskState:
    """``get_state`` / ``from_state`` of :class:`.tasks._StreamingTask`."""

    _ARRAYS = ("_offset", "_factor", "_mem_X", "_mem_y", "_mem_a", "_mem_n", "_mem_w", "_mem_s")

    def get_state(self):
        """(arrays, meta), pickle-free (:mod:`svmstream.solvers.persistence`)."""
        check_is_fitted(self, "engine_")
        arrays = {name: getattr(self, name).copy() for name in self._ARRAYS}
        arrays["window_X"] = (
            np.concatenate(self._window_X) if self._window_X else np.zeros((0, self.n_features_in_))
        )
        arrays["window_y"] = np.concatenate(self._window_y) if self._window_y else np.zeros(0)
        arrays["window_w"] = np.concatenate(self._window_w) if self._window_w else np.zeros(0)
        meta = {
            "estimator": type(self).__name__,
            "params": {k: v for k, v in self.get_params(deep=False).items() if k != "estimator"},
            "counts": [self.n_received_, self.n_learned_],
            "weights": self.weight_figures(),
            "warming_up": self.warming_up_,
            "rng": self._rng.bit_generator.state,
        }
        for key, part in self._parts().items():
            part_arrays, part_meta = part.get_state()
            arrays.update({f"{key}/{k}": v for k, v in part_arrays.items()})
            meta[key] = part_meta
        if self._learned():
            engine_arrays, meta["engine"] = self.engine_.get_state()
            arrays.update({f"engine/{k}": v for k, v in engine_arrays.items()})
        meta["engine_params"] = {"name": type(self.engine_).__name__, "params": self.engine_.get_params()}
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta):
        est = cls(**meta["params"])
        from ..persistence import _ESTIMATORS

        engine_cls = _ESTIMATORS[meta["engine_params"]["name"]]
        est.estimator = engine_cls(**meta["engine_params"]["params"])
        est._setup(arrays["_offset"].shape[0])
        for name in cls._ARRAYS:
            if name in arrays:  # a state saved before weights has no _mem_w: its rows weigh 1
                getattr(est, name)[...] = arrays[name]
        held = arrays["window_X"].shape[0]
        if held:
            ww = arrays["window_w"].copy() if "window_w" in arrays else np.ones(held)
            est._window_X, est._window_y = [arrays["window_X"].copy()], [arrays["window_y"].copy()]
            est._window_w = [ww]
        est.n_received_, est.n_learned_ = (int(v) for v in meta["counts"])
        est._load_weights(meta.get("weights"))
        est.warming_up_ = bool(meta["warming_up"])
        est._rng.bit_generator.state = meta["rng"]
        for key, part in est._parts().items():
            if key not in meta:  # a part newer than the state: as fresh
                continue
            own = {k[len(key) + 1 :]: v for k, v in arrays.items() if k.startswith(key + "/")}
            setattr(est, *est._restore_part(key, type(part).from_state(own, meta[key])))
        if "engine" in meta:
            own = {k[7:]: v for k, v in arrays.items() if k.startswith("engine/")}
            est.engine_ = estimator_from_state(own, meta["engine"])
        return est

    def _restore_part(self, key, part):
        return {"drift": "drift_", "target": "_target"}.get(key, "_" + key), part
