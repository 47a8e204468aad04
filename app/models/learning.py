"""What a :class:`~svmstream.app.models.handle.ModelHandle`'s learner thread does with a
queued batch or flush: commit the batch's new labels, one ``partial_fit`` (or ``flush``), a
finiteness check (:func:`svmstream.app.models.view.check_finite`; a non-finite model is
rolled back: 422 "numerical overflow"), the meters (prequential accuracy from
``last_margins_`` and ``last_y_``, rate, label runs, drift detections), then a published
copy.  On any error the estimator is rebuilt as it was (:mod:`.rollback`)."""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

import numpy as np

from svmstream.app.errors import InvalidInput, NumericalOverflow
from svmstream.app.ingest.labels import LabelCodec, NewLabels
from svmstream.app.ingest.weights import class_weights
from svmstream.app.models.contest import Contest
from svmstream.app.models.copies import published
from svmstream.app.models.factory import make_estimator
from svmstream.app.models.limits import label_refusal
from svmstream.app.models.rollback import input_bytes
from svmstream.app.models.rows import learn_rows
from svmstream.app.models.view import ModelView, check_finite, estimator_stats
from svmstream.app.models.warmup import wait_for_warm_up

log = logging.getLogger("svmstream.registry")


class Learning:
    """The learner-thread methods of :class:`~svmstream.app.models.handle.ModelHandle`
    (which declares the slots they use: ``_est``, ``_est_lock``, ``_lock``, ``_pending``,
    ``codec``, ``view``, the meters, ...)."""

    __slots__ = ()

    def _commit_labels(self, y: np.ndarray, new: NewLabels | None) -> tuple[np.ndarray, LabelCodec]:
        """Learner thread: map provisional label indices to final ones and extend the codec.

        A label another batch added since this one was encoded keeps its index; the others
        are appended in order of first appearance.  Returns ``(y, codec)``; the handle's codec
        is replaced only once the batch is applied.

        Raises
        ------
        InvalidInput
            ``y[i]`` for the first example whose label would exceed ``max_classes`` or the
            size bound ``max_model_bytes``; nothing is changed.
        """
        codec = self.codec
        if new is None:
            return y, codec
        mapping = np.arange(new.base + len(new.labels), dtype=np.int64)
        added: list[Any] = []
        for j, label in enumerate(new.labels):
            k = codec.index_of(label)
            if k is None:
                k = len(codec.classes) + len(added)
                added.append(label)
            mapping[new.base + j] = k
        y = mapping[y]
        if not added:
            return y, codec
        refusal = label_refusal(
            self.config, self.settings, self._n_features, codec.classes, added, self.counted_configs()
        )
        if refusal is not None:
            reason, label = refusal
            i = int(np.flatnonzero(y == len(codec.classes) + added.index(label))[0])
            shown = f"{label[:40]!r}..." if isinstance(label, str) and len(label) > 40 else repr(label)
            raise InvalidInput(f"y[{i}]: label {shown}: {reason}", field=f"y[{i}]", index=i)
        n_classes = len(codec.classes) + len(added)
        log.info("model %r: new class(es) %s learned from the data (%d classes)", self.name, added, n_classes)
        return y, codec.extended(added)

    def _apply(
        self, X, y: np.ndarray, extra: dict | None, new: NewLabels | None = None, weights=None
    ) -> ModelView:
        """Learner thread: commit new labels, one ``partial_fit`` call (after widening the
        model if a sparse batch grew ``d``, and adding learned classes; ``weights``: the
        examples' importance weights, None: ones), then publish a copy."""
        try:
            y, codec = self._commit_labels(y, new)
        except InvalidInput:
            with self._lock:
                self._pending -= 1
            raise

        weights = class_weights(self.config.class_weight, codec.classes, y, weights)

        def step(est):
            learn_rows(est, X, y, max(2, len(codec.classes)), weights)  # one label seen: binary
            return X

        n_classes = max(2, len(codec.classes))
        contest = functools.partial(
            Contest, X=X, y=y, n_classes=n_classes, weights=weights, labelled=codec.has_classes
        )
        view = self._learn_step(step, extra, int(X.shape[0]), codec, input_bytes(X, y), contest)
        if codec.has_classes and self.label_runs.add(y):
            log.warning(
                "model %r: the last %d examples received all have label %r: the source looks sorted by "
                "label; the shuffle buffer and the run guard compensate, but shuffling the source is better",
                self.name,
                self.label_runs.window,
                self.codec.classes[self.label_runs.label],
            )
        return view

    def _load_for_task(self) -> None:
        """Learner thread: :meth:`ensure_loaded` before a queued task; if decoding fails the
        task ends, so its pending slot is released before the error propagates."""
        try:
            self.ensure_loaded()
        except BaseException:
            with self._lock:
                self._pending -= 1
            raise

    def _flush(self) -> ModelView:
        """Learner thread: ``flush()`` the estimator (nothing to do before the first batch)."""
        self._load_for_task()
        held = self.challengers is not None and self.challengers.n_held() > 0
        if self._est is None and not held:
            with self._lock:
                self._pending -= 1
            return self.view
        contest = functools.partial(Contest, flush=True, labelled=self.codec.has_classes)
        return self._learn_step(lambda est: est.flush() and None, None, 0, None, 0, contest)

    def _learn_step(
        self,
        step,
        extra: dict | None,
        n_received: int,
        codec: LabelCodec | None = None,
        n_bytes: int = 0,
        contest=None,
    ) -> ModelView:
        """Run ``step(estimator)`` on the private estimator, check it stayed finite, update the
        meters and publish (with ``codec`` as the model's labels, when given); on any error
        rebuild the estimator as it was before the step (:meth:`_rebuild`).  ``contest``: makes
        the :class:`~svmstream.app.models.contest.Contest` of the batch when the model has
        challengers (its champion step replaces ``step``).  Waits for a running solver
        warm-up first (:func:`~svmstream.app.models.warmup.wait_for_warm_up`)."""
        wait_for_warm_up(f"learning a batch of model {self.name!r}")
        self._load_for_task()
        with self._est_lock:
            return self._learn_step_locked(step, extra, n_received, codec, n_bytes, contest)

    def _learn_step_locked(self, step, extra, n_received, codec, n_bytes, contest=None) -> ModelView:
        codec = self.codec if codec is None else codec
        try:
            est = self._est if self._est is not None else make_estimator(self.config)
            game = contest(self.challengers) if contest is not None and self.challengers is not None else None
            step = game.champion_step if game is not None else step
            probe = step(est)
            self._est = est
            check_finite(est, probe)
            promoted = None
            if game is not None:
                est, promoted = self._finish_contest(game, est)
                pairs = zip(game.margins, game.learned_y)
            else:
                last = est.last_learned()
                pairs = [] if last is None else [(last.outputs, last.targets)]
            for margins, learned in pairs:
                if margins is not None and learned is not None and len(margins) == len(learned):
                    self.prequential.add(margins, learned, est)  # the task's meter (task_outputs.py)
            self.rate.add(n_received)
            self._count_drift(est)
            view = self._publish(est, codec, extra)
            self._journal_add(game.replay_step() if game is not None else step, n_bytes)
            if promoted is not None:
                self._after_promotion(est)
            return view
        except BaseException as exc:
            if isinstance(exc, NumericalOverflow):
                self.overflows += 1
                log.error("model %r: %s; model rolled back", self.name, exc)
            else:
                self.learn_failures += 1
                log.exception(
                    "model %r: learning a batch of %d examples failed; model rolled back",
                    self.name,
                    n_received,
                )
            self._est = self._rebuild()
            raise
        finally:
            with self._lock:
                self._pending -= 1

    def _publish(self, est, codec: LabelCodec, extra: dict | None) -> ModelView:
        """Learner thread, under its lock: publish the next version of the view (``est``'s
        published copy, ``codec`` as the labels, ``extra`` merged into the view's)."""
        old = self.view
        self.codec = codec
        started = time.perf_counter()
        copy_for_view = published(est)
        self.publish_seconds.append(time.perf_counter() - started)
        view = ModelView(
            name=self.name,
            config=self.config,
            codec=codec,
            estimator=copy_for_view,
            version=old.version + 1,
            n_features=_width(est, old.n_features),
            stats=self._view_stats(copy_for_view),  # it reports what est reports (the contract)
            extra={**old.extra, **extra} if extra else old.extra,
            n_features_fixed=self._fixed,
            challengers=self.challengers.info() if self.challengers is not None else None,
            fields=self.fields,
        )
        self.view = view
        return view

    def _view_stats(self, est) -> dict[str, Any]:
        """The view's figures of ``est``, the rows the challengers hold counted as pending."""
        stats = estimator_stats(est)
        return stats if self.challengers is None else self.challengers.adjust_stats(stats)

    def _count_drift(self, est) -> None:
        """Learner thread: log each new drift detection of the estimator with its example count."""
        drift = est.drift() if est is not None else None
        if drift is None or drift.detections <= self._drift_logged:
            return
        log.warning(
            "model %r: concept drift detected at example %s (%d detections so far); on_drift=%s",
            self.name,
            drift.last_at,
            drift.detections,
            self.config.on_drift,
        )
        self._drift_logged = drift.detections


def _width(est, default: int | None) -> int | None:
    """The model's input width, ``default`` when it has none yet (or is None)."""
    width = est.input_width() if est is not None else None
    return default if width is None else width
