"""The rehearsal stage: extra learning steps on remembered examples.

After each example the estimator learns, ``rehearsal`` more steps on examples drawn uniformly
from a reservoir of the stream so far (:class:`~svmstream.solvers.budgeted._rehearsal.RehearsalMemory`:
the reservoir, the hash-drawn plan of steps and BSCA's dual variables; ``docs/online.md``).
The pipeline owns this stage and passes it to each learning call of its engine
(``learn_rows(fed, rehearsal=stage)``, ``grow_features``, ``add_class``); on each block of rows
the order stage (:mod:`.order`) releases the engine calls :meth:`RehearsalStage.learn` with its
own step: rehearsal sits between the order stage and the step, which plans extra steps among
the rows of that block.  A one-vs-rest BSCA engine hands each binary model its own stage, held
by this one at the model's index (:attr:`RehearsalStage.children`, made by
:meth:`RehearsalStage.child` when the engine makes the binary model).  The pipeline reads the
counts here (:attr:`RehearsalStage.steps`, :meth:`RehearsalStage.account`) and empties the
memory after a schedule restart (:meth:`RehearsalStage.clear`).

Saved state: ``{"memory": …, "children": […]}`` under ``stages.rehearsal``, the rows under
``reh_*`` (binary model ``k`` of one-vs-rest: ``ovr{k}__reh_*``), the names engines used.
"""

from __future__ import annotations

import contextlib
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
        self.sweeps = 0  # extra passes of the next learn (:meth:`sweeping`), not saved

    @staticmethod
    def seed_of(random_state) -> int:
        """The hash seed of an estimator's ``random_state`` (0 for None or a generator)."""
        return abs(int(random_state)) if isinstance(random_state, Integral) else 0

    def child(self, k: int, n_classes: int, random_state) -> RehearsalStage:
        """The stage of binary model ``k`` of ``n_classes`` (one-vs-rest): the memory bound is
        shared by the K models; registered in :attr:`children` at index ``k``."""
        stage = RehearsalStage(self.rehearsal, max(1, self.rehearsal_memory // max(1, n_classes)), 0)
        stage.seed = self.seed_of(random_state)
        stage.sweeps = self.sweeps
        while len(self.children) <= k:
            self.children.append(None)
        self.children[k] = stage
        return stage

    def of_binary(self, k: int) -> RehearsalStage | None:
        """The stage of binary model ``k`` (one-vs-rest; None: it has none)."""
        return self.children[k] if k < len(self.children) else None

    def bind(self, estimator) -> None:
        """Give each binary model of a one-vs-rest ``estimator`` (its ``estimators_``) that has
        no stage one, its bound shared by the estimator's classes now (a restored pipeline)."""
        n_classes = estimator.classes_.shape[0]
        for k, binary in enumerate(getattr(estimator, "estimators_", None) or []):
            if self.of_binary(k) is None:
                self.child(k, n_classes, binary.random_state)

    @property
    def own_steps(self) -> int:
        """Rehearsal steps taken on this stage's memory."""
        return self.memory.steps if self.memory is not None else 0

    @property
    def steps(self) -> int:
        """Rehearsal steps taken (each one a learning step counted in the estimator's ``t_``):
        one-vs-rest, binary model 0's (every binary model learns the same rows with the same
        rehearsal) plus this stage's own from before a binary model split into one-vs-rest
        (binary models 0 and 1 are copies of it and their ``t_`` holds those steps)."""
        first = self.of_binary(0)
        return first.own_steps + self.own_steps if first is not None else self.own_steps

    def account(self, statistics: dict) -> dict:
        """An engine's :meth:`statistics` with this stage's rehearsal steps: ``rehearsal_steps``
        (one-vs-rest: the sum of the binary models'), each binary model's (``per_class[k]``)
        with its ``examples_seen`` less them (the engine counts its steps only).  Returns it."""
        parts = statistics.get("per_class")
        if not parts:
            statistics["rehearsal_steps"] = self.own_steps
            return statistics
        for k, part in enumerate(parts):
            child = self.of_binary(k)
            carried = self.own_steps if k < 2 else 0  # copies of the binary model it was
            part["rehearsal_steps"] = (child.own_steps if child is not None else 0) + carried
            part["examples_seen"] -= part["rehearsal_steps"]
        statistics["rehearsal_steps"] = sum(part["rehearsal_steps"] for part in parts)
        return statistics

    def applies(self, X, n_features: int) -> bool:
        """Whether rows ``X`` of a kernel model (a linear one never rehearses,
        ``docs/online.md``) ``n_features`` wide are rehearsed: rehearsal on, rows to learn, and
        a memory of at least 1,000 rows within its byte bound (made at the first rows)."""
        if self.rehearsal <= 0 or X.shape[0] == 0:
            return False
        if self.memory is None:
            capacity = memory_capacity(self.rehearsal_memory, n_features)
            self.memory = RehearsalMemory(capacity, n_features, self.seed)
        return self.memory.capacity > 0

    def learn(self, X, labels, weights, learn_plan) -> np.ndarray:
        """Each new row's step, then ``rehearsal`` steps on rows drawn from the memory
        (:func:`..budgeted._rehearsal.plan_rehearsal`), learned by the engine's
        ``learn_plan(X_ext, y_ext, w_ext, order, memory, gather) -> (margins, alpha_ext)``;
        ``weights`` (n,) float64 are the rows' importance weights (a remembered row keeps its
        own); returns the new rows' margins (f before their own step), (n,) or (n, K) float64."""
        memory = self.memory
        if self.sweeps and memory.sweeps_fit(X.shape[0]):
            order, new_pos, gather = memory.extend_sweeps(X, self.sweeps)
        else:
            order, new_pos, gather = memory.extend(X, self.rehearsal)
        X_ext, y_ext, w_ext = memory.rows(X, labels, weights, gather)
        if not sp.issparse(X_ext):
            X_ext = np.ascontiguousarray(X_ext)
        margins, alpha_ext = learn_plan(X_ext, y_ext, w_ext, order, memory, gather)
        memory.commit(X, labels, weights, alpha_ext)
        return margins[new_pos]

    @contextlib.contextmanager
    def sweeping(self, sweeps: int):
        """Within: a learn whose rows are the whole stream so far (an empty memory with room for
        them) takes each row's own step, then ``sweeps`` passes over those rows in fresh random
        orders instead of ``rehearsal`` draws (:meth:`RehearsalMemory.extend_sweeps`); this
        stage's binary models' too (one-vs-rest).  Otherwise the plan is the usual one."""
        stages = lambda: [self, *(c for c in self.children if c is not None)]  # noqa: E731
        for stage in stages():
            stage.sweeps = int(sweeps)
        try:
            yield self
        finally:
            for stage in stages():
                stage.sweeps = 0

    def clear(self) -> None:
        """Forget every row of this stage's memory (after a detected drift and a warm copy's
        schedule restart: they hold the old concept; the binary models' memories are kept)."""
        if self.memory is not None:
            self.memory.clear()

    def widen(self, n_features: int) -> None:
        """Remembered rows get zeros in new features (one-vs-rest: the binary models' too)."""
        if self.memory is not None:
            self.memory.widen(n_features)
        for child in self.children:
            if child is not None:
                child.widen(n_features)

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
