"""Rollback of a failed batch for a :class:`~svmstream.app.models.handle.ModelHandle`.

Publishing does not copy the model (a full copy per batch would cost as much as the model
itself): the view holds the estimator's ``published_copy()`` — what predictions read,
sharing what the learner never rewrites (``svmstream.solvers.budgeted._publish``).  So the
learner keeps no full copy per batch for rollback either: a failed batch is undone by
rebuilding the estimator from the last *checkpoint* (its full state, detached) and replaying
the batches applied since (the *journal*; models are deterministic, so the replay gives the
same estimator).  A checkpoint is taken at every snapshot (:meth:`Rollback.capture_state`,
which snapshots use: the learner's state and the view of the same version, under the
learner's lock) and whenever the journal holds more than :func:`journal_limit` of input
(:data:`JOURNAL_MAX_BYTES`, at most a sixteenth of ``max_model_bytes``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from svmstream.app.models.challengers import split_state
from svmstream.app.models.copies import as_path, detached_state
from svmstream.app.models.factory import estimator_from_state, make_estimator
from svmstream.app.models.snapshots import decode_snapshot
from svmstream.app.models.view import ModelView

log = logging.getLogger("svmstream.registry")

#: Input bytes (X and y) of the batches the rollback journal keeps before a checkpoint (a
#: detached copy of the learner's full state) replaces them, at most; a model's journal keeps
#: at most ``max_model_bytes / JOURNAL_SHARE`` (:func:`journal_limit`).
JOURNAL_MAX_BYTES = 64 << 20
#: The share of ``max_model_bytes`` a model's journal may hold (16 MiB at the default 256 MiB).
JOURNAL_SHARE = 16


def journal_limit(max_model_bytes: int) -> int:
    """Input bytes a model's rollback journal holds before a checkpoint replaces it:
    :data:`JOURNAL_MAX_BYTES`, at most ``max_model_bytes / JOURNAL_SHARE``.  The journal is
    the model's memory (``docs/fields.md``, "Memory"): it must not grow with the stream beyond
    a share of the model's own bound."""
    return int(min(JOURNAL_MAX_BYTES, max(0, int(max_model_bytes)) // JOURNAL_SHARE))


def input_bytes(*arrays) -> int:
    """Bytes of the input arrays (dense or CSR) a journal step replays."""
    total = 0
    for a in arrays:
        if sp.issparse(a):
            total += a.data.nbytes + a.indices.nbytes + a.indptr.nbytes
        else:
            total += getattr(a, "nbytes", 0)
    return int(total)


def first_checkpoint(est, checkpoint_path) -> tuple | Path:
    """A new handle's checkpoint: the snapshot file it was decoded from, else a detached state."""
    return as_path(checkpoint_path) if checkpoint_path is not None else detached_state(est)


class Rollback:
    """The checkpoint-and-journal methods of :class:`~svmstream.app.models.handle.ModelHandle`
    (which declares the slots they use: ``_checkpoint``, ``_journal``, ``_journal_bytes``,
    ``_est``, ``_est_lock``, ``view``, ``config``, ``settings``)."""

    __slots__ = ()

    def _journal_add(self, step, n_bytes: int) -> None:
        """Learner thread, after a published step: remember it for a rollback; past
        :func:`journal_limit` of input, take a checkpoint instead."""
        self._journal.append(step)
        self._journal_bytes += max(0, int(n_bytes))
        if self._journal_bytes > journal_limit(self.settings.max_model_bytes):
            self._checkpoint = detached_state(self._est)
            self._journal, self._journal_bytes = [], 0

    def _rebuild(self):
        """The estimator as the current view published it: the checkpoint's state with the
        journal's steps replayed (None if nothing was learned)."""
        est = None
        if isinstance(self._checkpoint, Path):
            est = decode_snapshot(self._checkpoint.read_bytes(), self._checkpoint).estimator
        elif self._checkpoint is not None:
            est = estimator_from_state(*split_state(*self._checkpoint))
        try:
            for step in self._journal:
                est = est if est is not None else make_estimator(self.config)
                step(est)
        except Exception:  # replaying steps that succeeded before: only a bug gets here
            log.exception("model %r: replaying the journal after a failed batch failed", self.name)
            raise
        return est

    def capture_state(self) -> tuple[ModelView, tuple[dict[str, np.ndarray], dict[str, Any]] | None]:
        """``(view, state)``: the current view and the learner's full state at that view's
        version — ``get_state()`` detached (independent arrays), or None before the first
        batch — taken together under the learner's lock (snapshots; the stream acknowledges
        the view's entries once that state is saved).  The state also becomes the rollback
        checkpoint.  Blocks while a batch is being applied.  A lazily restored model is decoded
        first (:meth:`ensure_loaded`)."""
        self.ensure_loaded()
        with self._est_lock:
            view = self.view
            challengers = self.challengers
            if view.estimator is None or self._est is None:
                return view, (challengers.attach(None) if challengers is not None else None)
            if not self.config.learns_online:
                return view, view.estimator.get_state()
            state = detached_state(self._est)
            if challengers is not None:  # champion and challengers at the same version
                state = challengers.attach(state)
            self._checkpoint, self._journal, self._journal_bytes = state, [], 0
            return view, state

    def checkpoint_saved(self, state, path) -> None:
        """After ``state`` (from :meth:`capture_state`) was written to ``path``: if it is still
        the checkpoint, keep the file instead of the arrays (a rollback reads it back)."""
        with self._est_lock:
            if self._checkpoint is state and state is not None:
                self._checkpoint = as_path(path)
