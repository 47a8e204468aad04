"""The contract (:mod:`svmstream.solvers.contract`) of the selector: its report, the copy a view
publishes, the finiteness check, its warm copy and byte estimate (:class:`ServedSelection`, a
mixin of :class:`~.classifier.SelectionClassifier`)."""

from __future__ import annotations

from dataclasses import replace

from sklearn.utils.validation import check_is_fitted

from ..._params import DEFAULT_REHEARSAL_MEMORY
from ...budgeted import model_bytes, window_bytes
from ...budgeted._base import resolve_lambda
from ...contract import DriftReport, ExampleAccount, Learned, ModelReport
from ..race.core import Race
from ..race.losses import ZeroOneLoss
from .candidates import race_size


class ServedSelection(ZeroOneLoss):
    """Mixin: the :class:`~svmstream.solvers.contract.OnlineModel` names of the selector."""

    TASK = "classification"
    HAS_CLASSES = True
    LEARNS_ONLINE = True

    def fitted(self) -> bool:
        """Whether it has received its first batch."""
        return self.__sklearn_is_fitted__()

    def report(self) -> ModelReport:
        """The selector's figures (:class:`~..contract.ModelReport`): the leader's, with the
        selector's example account, the race under ``statistics["selection"]`` and the drift
        detections since the race ended as ``drift.actionable``; while the window is open the
        held rows as pending and seen, the plain estimator's λ, no step, SV or merge."""
        frozen = self.__dict__.get("_published_report")
        if frozen is not None:
            return frozen
        if not self.fitted():
            return ModelReport(task=self.TASK, has_classes=self.HAS_CLASSES)
        if not self._alive():
            plain, held = self._plain(), self._n_held()
            return ModelReport(
                task=self.TASK, has_classes=self.HAS_CLASSES, fitted=True, warming_up=True,
                examples=ExampleAccount(int(self.n_received_), 0, held),
                n_features=self.__dict__.get("n_features_in_"), n_classes=int(self.classes_.shape[0]),
                n_seen=held, lambda_=float(resolve_lambda(plain.lambda_, plain.C, plain.n_samples)),
                statistics={"selection": self.race()},
            )  # fmt: skip
        leader = self._leader().report()
        drift = leader.drift
        return replace(
            leader,
            examples=ExampleAccount(int(self.n_received_), leader.examples.learned, leader.examples.pending),
            statistics={**leader.statistics, "selection": self.race()},
            drift=DriftReport(drift.detections, drift.last_at, int(self.drift_detections_)),
        )

    def nonfinite(self, X=None) -> str | None:
        """The leader's :meth:`~.served.ServedPipeline.nonfinite` (None while the window is open)."""
        return self._leader().nonfinite(X) if self.fitted() and self._alive() else None

    def last_learned(self) -> Learned | None:
        """The leader's last learned margins and labels (None while the window is open)."""
        return self._leader().last_learned() if self.fitted() and self._alive() else None

    def input_width(self) -> int | None:
        """``n_features_in_`` (None before the first batch)."""
        width = self.__dict__.get("n_features_in_")
        return None if width is None else int(width)

    def class_count(self) -> int | None:
        """``len(classes_)`` (None before the first batch)."""
        return int(self.classes_.shape[0]) if self.fitted() else None

    def serves(self) -> bool:
        """Fitted and out of the selector's and the leader's warm-up windows."""
        return self.fitted() and not self.warming_up_

    def drift(self) -> DriftReport:
        """The leader's detections; ``actionable``: the sole survivor's since the race ended."""
        if not self.fitted() or not self._alive():
            return DriftReport()
        drift = self._leader().drift()
        return DriftReport(drift.detections, drift.last_at, int(self.drift_detections_))

    def warm_start(self):
        """The sole survivor's warm copy once the race is over (None before)."""
        survivor = self.survivor_ if self.fitted() else None
        return None if survivor is None else survivor.warm_start()

    def serving_settings(self):
        """The sole survivor's settings once the race is over (numeric ``gamma``, ``C``,
        ``rehearsal``, ...; a drift challenger copies them), else None."""
        if not self.fitted() or self.survivor_ is None:
            return None
        return self.settings_[self.leader_]

    def estimate_bytes(self, n_features: int, n_classes: int) -> int:
        """The window and as many candidates as race at width ``n_features``
        (:func:`race_size`, two classes and their rehearsal memory), each counted with
        ``n_classes`` classes and its rehearsal memory when ``rehearsal`` > 0."""
        plain, pp = self._plain(), self.pipeline_params or {}
        window = window_bytes(self.warmup, n_features)
        models = race_size(  # a window candidate learns fewer than `warmup` rows: not counted
            max(1, self._n_streaming()), self.candidate_bytes(n_features), window, self.max_bytes
        )
        memory = pp.get("rehearsal_memory", DEFAULT_REHEARSAL_MEMORY) if self.rehearsal else 0
        one = model_bytes(
            plain.budget, n_features, self.shuffle_buffer, pp.get("run_guard", True), max(2, int(n_classes)),
            plain.maintenance, "rbf", plain.sv_storage, memory,
        )  # fmt: skip
        return window + models * one

    def published_copy(self):
        """What predictions read: a selector that holds only the leader's ``published_copy()``
        (while the window is open: no candidate, its predictions raise :class:`WarmingUp`), and
        reports what this selector reports now (:meth:`report`, frozen).  It is not saved:
        :meth:`get_state` of a published copy raises TypeError."""
        check_is_fitted(self)
        report = self.report()
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy._held = list(self._held)  # read for the count in the message only
        alive = self._alive()
        models = [None] * len(self.candidates_)
        if alive:
            leader = self.leader_
            models[leader] = self.candidates_[leader].published_copy()
        race = self.race_  # the copy's race: its own models, the same record (read only)
        copy.race_ = Race(models, grid=race.grid, rule=race.rule, position=race.position)
        copy._published_report = report
        return copy
