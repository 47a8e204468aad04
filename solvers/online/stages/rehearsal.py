"""The rehearsal stage: extra learning steps on remembered examples.

After each example the estimator learns, ``rehearsal`` more steps on examples drawn uniformly
from a reservoir of the stream so far (:class:`~svmstream.solvers.budgeted._rehearsal.RehearsalMemory`:
the reservoir, the hash-drawn plan of steps and BSCA's dual variables; ``docs/online.md``).
The pipeline hands this stage to the estimator's engine, which calls :meth:`RehearsalStage.learn`
on each block of rows the order stage (:mod:`.order`) releases: rehearsal sits between the
order stage and the step, which plans extra steps among the rows of that block.
A one-vs-rest BSCA model gives each binary model a stage of its own (:meth:`RehearsalStage.child`).

Saved state: ``{"memory": …, "children": […]}`` under ``stages.rehearsal``, the rows under
``reh_*`` (binary model ``k`` of one-vs-rest: ``ovr{k}__reh_*``), the names engines used.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np
import scipy.sparse as sp

from ...budgeted import RehearsalMemory, memory_capacity


class RehearsalStage:
    """Rehearsal of a streaming pipeline (one estimator, or one binary model of one-vs-rest).

    Parameters
    ----------
    rehearsal : int >= 0 — extra steps per learned example
    rehearsal_memory : int >= 0 — rows remembered (at most 16 MiB, :func:`memory_capacity`)
    seed : int >= 0 — hash seed of the draws

    Attributes
    ----------
    memory : RehearsalMemory or None — made at the first rows learned (its capacity depends on
        the width then)
    children : list of RehearsalStage — one-vs-rest: the binary models' stages
    """

    def __init__(self, rehearsal: int, rehearsal_memory: int, seed: int = 0):
        self.rehearsal = int(rehearsal)
        self.rehearsal_memory = int(rehearsal_memory)
        self.seed = int(seed)
        self.memory = None
        self.children: list[RehearsalStage] = []

    @staticmethod
    def seed_of(random_state) -> int:
        """The hash seed of an estimator's ``random_state`` (0 for None or a generator)."""
        return abs(int(random_state)) if isinstance(random_state, Integral) else 0

    def child(self, k: int, n_classes: int, random_state) -> RehearsalStage:
        """The stage of binary model ``k`` of ``n_classes`` (one-vs-rest): the memory bound is
        shared by the K models; registered in :attr:`children` at index ``k``."""
        stage = RehearsalStage(self.rehearsal, max(1, self.rehearsal_memory // max(1, n_classes)), 0)
        stage.seed = self.seed_of(random_state)
        while len(self.children) <= k:
            self.children.append(None)
        self.children[k] = stage
        return stage

    @property
    def steps(self) -> int:
        """Rehearsal steps taken (each one a learning step counted in the estimator's ``t_``)."""
        return self.memory.steps if self.memory is not None else 0

    def applies(self, estimator, X) -> bool:
        """Whether rows ``X`` are rehearsed: rehearsal on, a kernel model (``docs/online.md``),
        rows to learn, and a memory of at least 1,000 rows within its byte bound."""
        if self.rehearsal <= 0 or estimator._linear() or X.shape[0] == 0:
            return False
        if self.memory is None:
            capacity = memory_capacity(self.rehearsal_memory, estimator.n_features_in_)
            self.memory = RehearsalMemory(capacity, estimator.n_features_in_, self.seed)
        return self.memory.capacity > 0

    def learn(self, estimator, X, labels, weights) -> np.ndarray:
        """Each new row's step, then ``rehearsal`` steps on rows drawn from the memory
        (:func:`..budgeted._rehearsal.plan_rehearsal`), learned by ``estimator._learn_plan``;
        ``weights`` (n,) float64 are the rows' importance weights (a remembered row keeps its
        own); returns the new rows' margins (f before their own step), (n,) or (n, K) float64."""
        memory = self.memory
        order, new_pos, gather = memory.extend(X, self.rehearsal)
        X_ext, y_ext, w_ext = memory.rows(X, labels, weights, gather)
        if not sp.issparse(X_ext):
            X_ext = np.ascontiguousarray(X_ext)
        margins, alpha_ext = estimator._learn_plan(X_ext, y_ext, w_ext, order, memory, gather)
        memory.commit(X, labels, weights, alpha_ext)
        return margins[new_pos]

    def clear(self) -> None:
        """Forget every row (after a detected drift: they hold the old concept)."""
        if self.memory is not None:
            self.memory.clear()

    def widen(self, n_features: int) -> None:
        """Remembered rows get zeros in new features."""
        if self.memory is not None:
            self.memory.widen(n_features)

    def attach(self, estimator) -> None:
        """Hand this stage to ``estimator`` (and, one-vs-rest, each binary model its child
        stage, made for those that have none)."""
        estimator._rehearsal = self
        for k, binary in enumerate(getattr(estimator, "estimators_", None) or []):
            stage = self.children[k] if k < len(self.children) else None
            if stage is None:
                stage = self.child(k, estimator.classes_.shape[0], binary.random_state)
            binary._rehearsal = stage

    # ------------------------------------------------------------------ persistence
    def _meta(self):
        return {"rehearsal": self.rehearsal, "rehearsal_memory": self.rehearsal_memory, "seed": self.seed}

    def get_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """``(arrays, meta)``: this memory's rows under ``reh_*``, child ``k``'s under
        ``ovr{k}__reh_*``; the meta holds each child's settings and seed."""
        arrays, meta = {}, {"memory": None, "children": []}
        if self.memory is not None:
            arrays, meta["memory"] = self.memory.get_state()
        for k, child in enumerate(self.children):
            if child is None:
                meta["children"].append(None)
                continue
            entry = {**child._meta(), "memory": None}
            if child.memory is not None:
                child_arrays, entry["memory"] = child.memory.get_state()
                arrays.update({f"ovr{k}__{name}": value for name, value in child_arrays.items()})
            meta["children"].append(entry)
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta, rehearsal, rehearsal_memory, seed, n_features) -> RehearsalStage:
        """Rebuild from :meth:`get_state` (``meta`` None: nothing remembered yet) with this
        pipeline's settings.  Raises ValueError if the arrays do not fit."""
        stage = cls(rehearsal, rehearsal_memory, seed)
        meta = meta or {}
        if meta.get("memory") is not None:
            stage.memory = RehearsalMemory.from_state(arrays, meta["memory"], n_features)
            stage.seed = stage.memory.seed
        for k, entry in enumerate(meta.get("children") or []):
            if entry is None:
                stage.children.append(None)
                continue
            child = cls(entry["rehearsal"], entry["rehearsal_memory"], entry["seed"])
            if entry.get("memory") is not None:
                prefix = f"ovr{k}__"
                own = {name[len(prefix) :]: v for name, v in arrays.items() if name.startswith(prefix)}
                child.memory = RehearsalMemory.from_state(own, entry["memory"], n_features)
            stage.children.append(child)
        return stage
