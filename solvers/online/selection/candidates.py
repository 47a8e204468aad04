"""The candidates of the selector: the default set, their checks and settings, the probe that
reads the scaling and the plain \"scale\" γ from the held rows, how many race within a byte
bound, and their start (:class:`Candidates`, a mixin of :class:`~.classifier.SelectionClassifier`)."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp

from ..._params import DEFAULT_REHEARSAL_MEMORY, SPARSE_MIN_FEATURES
from ...budgeted import BudgetedSCAClassifier, BudgetedSGDClassifier, model_bytes, window_bytes
from ..pipeline import StreamingClassifier
from .wide import wide_race

DEFAULT_CANDIDATES = (
    {"gamma_factor": 1.0},
    {"gamma_factor": 0.25},
    {"gamma_factor": 4.0},
    {"gamma_factor": 4.0, "C": 0.1, "short": True},
    {"gamma_factor": 1.0, "C": 1.0, "solver": "bsca", "window": True},
)
#: What a candidate may set.
CANDIDATE_KEYS = {
    "gamma_factor": Real,
    "C": Real,
    "rehearsal": Integral,
    "short": bool,
    "window": bool,
    "solver": str,
}
#: The engines a candidate may name (``solver``): the plain estimator's kind, or BSCA.
SOLVERS = ("bsgd", "bsca")
#: Passes a window candidate takes over a stream that ended inside the warm-up window (the
#: pipeline's ``window_epochs``; 20: within 0.93 pp of ``SVC()`` on HouseVotes84 and Soybean,
#: 10 passes up to 0.59 pp below, docs/selection.md "Streams that end inside the window").
WINDOW_EPOCHS = 20
#: The window candidate's passes after the first are bounded so that rows × binary models (one
#: per class beyond two) × features × passes stays within this (Soybean, 513 × 19 × 133 × 19 =
#: 2.5e7: 0.7-0.8 s of CPU; a flush of 999 rows of 1,000 classes takes one pass).
WINDOW_WORK = 5 * 10**7


def window_epochs(n_rows: int, n_classes: int, n_features: int) -> int:
    """Passes of the window candidate over ``n_rows`` held rows: :data:`WINDOW_EPOCHS`, fewer
    where the passes after the first would exceed :data:`WINDOW_WORK` (at least 1)."""
    per_pass = max(1, int(n_rows)) * (1 if int(n_classes) <= 2 else int(n_classes)) * max(1, int(n_features))
    return int(max(1, min(WINDOW_EPOCHS, 1 + WINDOW_WORK // per_pass)))


def race_size(n_candidates, candidate_bytes, window, max_bytes):
    """How many candidates race within ``max_bytes``: the first ``k`` (at least one) such that
    the warm-up window (``window`` bytes) and ``k`` candidates of ``candidate_bytes`` each fit
    (:func:`~svmstream.solvers.model_bytes`, :func:`~svmstream.solvers.window_bytes`);
    ``max_bytes`` None: all ``n_candidates``.  Returns an int in ``[1, n_candidates]``."""
    if max_bytes is None:
        return int(n_candidates)
    room = (int(max_bytes) - int(window)) // max(1, int(candidate_bytes))
    return int(max(1, min(int(n_candidates), room)))


def _probe_gamma(batches, warmup, scaling):
    """``(scaling, gamma)`` the stages choose from the held rows: a :class:`StreamingClassifier`
    with ``gamma="scale"`` learns them with two alternating stand-in labels (two classes: the
    plain "scale" rule, with no multi-class factor) and a budget of 2 (cheap)."""
    probe = StreamingClassifier(
        BudgetedSGDClassifier(budget=2, random_state=0),
        scaling=scaling,
        warmup=warmup,
        shuffle_buffer=0,
        run_guard=False,
        rehearsal=0,
        on_drift="none",
    )
    seen = 0
    for X, _, w in batches:  # weighted rows: the rows of weight 0 do not enter the window
        stand_in = (np.arange(seen, seen + X.shape[0]) % 2).astype(np.int64)
        probe.partial_fit(X, stand_in, classes=[0, 1], sample_weight=w)
        seen += X.shape[0]
    if probe.warming_up_:
        probe.flush()
    return probe.scaling_, float(probe.gamma_)


def checked_candidates(raw, keys: dict | None = None) -> list[dict]:
    """``raw`` (a race's ``candidates``) as a list of dicts, each key checked against its kind in
    ``keys`` (default :data:`CANDIDATE_KEYS`; a str kind: one of :data:`SOLVERS`).

    Raises
    ------
    ValueError
        Naming the candidate and key (``candidates[2].C must be a positive number, ...``).
    """
    keys = CANDIDATE_KEYS if keys is None else keys
    if len(raw) == 0:
        raise ValueError("candidates: give at least one candidate (or None for the defaults)")
    out = []
    for i, cand in enumerate(raw):
        if not isinstance(cand, dict):
            raise ValueError(f"candidates[{i}] must be a dict, got {type(cand).__name__}")
        unknown = sorted(set(cand) - set(keys))
        if unknown:
            raise ValueError(f"candidates[{i}]: unknown key(s) {unknown}; use {sorted(keys)}")
        for key, kind in keys.items():
            _check_candidate_value(f"candidates[{i}].{key}", key, kind, cand.get(key))
        out.append(dict(cand))
    return out


def _check_candidate_value(where: str, key: str, kind, value) -> None:
    if value is None:
        return
    if kind is str:
        if value not in SOLVERS:
            raise ValueError(f"{where} must be one of {list(SOLVERS)}, got {value!r}")
    elif kind is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{where} must be true or false, got {value!r}")
    elif (
        not isinstance(value, kind)
        or isinstance(value, bool)
        or value < 0
        or (key != "rehearsal" and value == 0)
    ):
        raise ValueError(f"{where} must be a positive number, got {value!r}")


class Candidates:
    """Mixin: the candidates' list, settings, pipelines, size and start."""

    def _candidate_list(self):
        """The candidates as dicts, checked (ValueError naming the candidate and key)."""
        return checked_candidates(DEFAULT_CANDIDATES if self.candidates is None else self.candidates)

    def _settings(self, scaling, gamma):
        plain = self._plain()
        settings = []
        for cand in self._candidate_list():
            settings.append(
                {
                    "gamma": float(cand.get("gamma_factor", 1.0)) * gamma,
                    "gamma_factor": float(cand.get("gamma_factor", 1.0)),
                    "C": float(cand.get("C", plain.C)),
                    "rehearsal": int(cand.get("rehearsal", self.rehearsal)),
                    "early_rehearsal": int(cand.get("rehearsal", self.early_rehearsal)),
                    "short": bool(cand.get("short", False) or cand.get("window", False)),
                    "window": bool(cand.get("window", False)),
                    "solver": str(cand.get("solver", "bsgd")),
                    "early": True,
                    "scaling": scaling,
                }
            )
        return settings

    def _pipeline(self, setting):
        plain = self._plain()
        params = {**plain.get_params(), "gamma": setting["gamma"], "C": setting["C"]}
        engine = type(plain)
        if setting.get("solver", "bsgd") == "bsca":  # the plain estimator's settings that apply to BSCA
            engine = BudgetedSCAClassifier
            params = {k: v for k, v in params.items() if k in engine().get_params()}
        window = bool(setting.get("window", False))
        return StreamingClassifier(
            engine(**params),
            **{**(self.pipeline_params or {}), "scaling": setting["scaling"]},
            warmup=setting.get("warmup", self.warmup),
            shuffle_buffer=setting.get("shuffle_buffer", self.shuffle_buffer),
            rehearsal=setting["early_rehearsal"] if setting["early"] else setting["rehearsal"],
            window_epochs=setting.get("window_epochs", WINDOW_EPOCHS) if window else 1,
        )

    def _n_streaming(self):
        """Candidates that race on any stream (not ``window`` ones, which start only when a
        flush closes the window; window candidates come last): what sizes count."""
        return sum(not cand.get("window", False) for cand in self._candidate_list())

    def candidate_bytes(self, n_features):
        """Estimated bytes of one candidate of dimension ``n_features`` with two classes
        (:func:`~svmstream.solvers.model_bytes`: SVs, shuffle buffer, run guard, rehearsal
        memory), the figure :func:`race_size` divides ``max_bytes`` by."""
        plain, pp = self._plain(), self.pipeline_params or {}
        return model_bytes(
            plain.budget, n_features, self.shuffle_buffer, pp.get("run_guard", True), 2,
            plain.maintenance, "rbf", plain.sv_storage, self._pipeline_rehearsal_memory(),
        )  # fmt: skip

    def _pipeline_rehearsal_memory(self):
        """Rows each candidate remembers for rehearsal (0 when none rehearses)."""
        if not (self.rehearsal or self.early_rehearsal):
            return 0
        return (self.pipeline_params or {}).get("rehearsal_memory", DEFAULT_REHEARSAL_MEMORY)

    def _race_size(self, n_candidates):
        d = self.n_features_in_
        return race_size(n_candidates, self.candidate_bytes(d), window_bytes(self.warmup, d), self.max_bytes)

    def _start_candidates(self, at_flush=False):
        """Close the selector's window: resolve scaling and γ, start every candidate and pass it
        the held rows; a window candidate only when a flush closes it (``at_flush``: the stream
        ended inside the window)."""
        scaling, gamma = _probe_gamma(
            self._held, self._window_rows(), (self.pipeline_params or {}).get("scaling", "auto")
        )
        self.gamma_scale_ = gamma
        self.settings_ = self._settings(scaling, gamma)
        wide = self._wide_dense()
        if wide:
            self.race_size_, buffer, rows = wide_race(  # no window candidate in a wide race
                self, self._n_streaming(), self.n_features_in_, self.max_bytes
            )
            for s in self.settings_:
                if buffer is not None:
                    s["shuffle_buffer"] = buffer
                if rows is not None:
                    s["warmup"] = rows
        else:  # the window candidates (last) count only when a flush starts them
            self.race_size_ = self._race_size(len(self.settings_) if at_flush else self._n_streaming())
        for s in self.settings_:  # a window candidate's passes, bounded by the work (saved with it)
            if s["window"]:
                s["window_epochs"] = window_epochs(self._n_held(), len(self.classes_), self.n_features_in_)
        models = [
            self._pipeline(s) if i < self.race_size_ and (at_flush or not s["window"]) else None
            for i, s in enumerate(self.settings_)
        ]
        self._new_race(models, before=int(self.n_received_))  # position 0: the grid starts here
        held, self._held = self._held, []
        if wide:  # one candidate's window open at a time; the last one takes the held rows
            self._feed_one_by_one(held)
            return
        for X, y, w in held:
            for i in self._alive():
                self.candidates_[i].partial_fit(X, y, classes=self.classes_, sample_weight=w)
                self._record(i)

    def _fix_window(self, X):
        """At the first rows: the window's rows of a wide dense race (``window_rows_``, fewer
        than ``warmup`` where the race does not fit otherwise: :func:`~.wide.wide_race`)."""
        if X.shape[1] > SPARSE_MIN_FEATURES and not sp.issparse(X):
            rows = wide_race(self, self._n_streaming(), X.shape[1], self.max_bytes)[2]
            if rows is not None:
                self.window_rows_ = int(rows)

    def _window_rows(self):
        """Rows the selector's window holds: ``warmup``, or a wide race's ``window_rows_``."""
        return int(self.__dict__.get("window_rows_", self.warmup))

    def _wide_dense(self):
        """Dense held rows wider than 256 features (``wide.py``: counted as stored)."""
        return self.n_features_in_ > SPARSE_MIN_FEATURES and not any(sp.issparse(X) for X, _, _ in self._held)

    def _feed_one_by_one(self, held):
        """Give the held rows to each candidate in turn (each candidate's calls and scores are
        its own, so the order between candidates changes nothing it learns); the last frees
        each batch once it has learned it."""
        alive = self._alive()
        for i in alive[:-1]:
            for X, y, w in held:
                self.candidates_[i].partial_fit(X, y, classes=self.classes_, sample_weight=w)
                self._record(i)
        while held:
            X, y, w = held.pop(0)
            self.candidates_[alive[-1]].partial_fit(X, y, classes=self.classes_, sample_weight=w)
            self._record(alive[-1])
            del X, y, w
