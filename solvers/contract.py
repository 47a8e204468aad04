"""What a served model promises the service: the one contract between ``svmstream.app`` and
its models (issue 37; ``docs/architecture.md``).

The service never asks a model what class it is and never probes its attributes: it calls the
names declared here, and only those.  Two levels:

* :class:`Served` — every model a view can hold (online pipelines, the selector, batch-trained
  DC-SVM and linear models): its figures (:meth:`Served.report`, a :class:`ModelReport`), the
  copy a view publishes, a finiteness check, its state (save / restore) and its predictions;
* :class:`OnlineModel` — a model that keeps learning: :class:`Served` plus learn, flush, widen,
  add a class, what it learned last (for the service's meters), its paired loss (the
  challengers' test), a warm copy for a drift challenger, the settings a challenger copies, and its byte estimate for a width and a number of
  classes (the size guards).

Nothing here assumes labels: a model declares its task (:data:`Task`) and whether it has classes
(:attr:`Served.HAS_CLASSES`); the figures of a task live in mappings
(:attr:`ModelReport.metrics`, :attr:`ModelReport.statistics`), so a regressor or a novelty
detector reports its own without a new field.  The example account holds for every model and
task: ``received = learned + pending + refused`` (:class:`ExampleAccount`).

This module imports only the standard library (as :mod:`._hyperparameters` does): the service's
light readers import it without compiling numba kernels.  ``tests/test_model_contract.py`` checks
every promise for every served model, parametrised as scikit-learn's ``parametrize_with_checks``
is.  Source of the shape: River's one ``learn_one``/``predict_one`` protocol for every step,
scikit-learn's declared estimator API, KServe's ``InferenceModel`` that its ``DataPlane`` alone
calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

__all__ = [
    "TASKS",
    "DriftReport",
    "ExampleAccount",
    "Learned",
    "ModelReport",
    "OnlineModel",
    "Served",
    "Task",
]

#: What a model does with an example: predict a class, a number, or whether it is novel.
Task = Literal["classification", "regression", "novelty"]
TASKS: tuple[str, ...] = ("classification", "regression", "novelty")


@dataclass(frozen=True)
class ExampleAccount:
    """The examples a model was given, by fate (counts, ints >= 0).

    ``received = learned + pending + refused`` always (the service's first principle: no example
    is lost).  ``learned``: in the model's steps (rehearsal and replays not counted); ``pending``:
    held (a warm-up window, a shuffle buffer, a selector's window); ``refused``: received and
    deliberately not learned (none of today's models refuses one)."""

    received: int = 0
    learned: int = 0
    pending: int = 0
    refused: int = 0

    def __post_init__(self):
        if self.received != self.learned + self.pending + self.refused:
            raise ValueError(
                f"example account broken: received {self.received} != learned {self.learned} + "
                f"pending {self.pending} + refused {self.refused}"
            )

    def as_dict(self) -> dict[str, int]:
        """``{"received", "learned", "pending"}`` (``refused`` too when any was refused): the
        ``examples`` figure of ``GET /models``."""
        out = {"received": self.received, "learned": self.learned, "pending": self.pending}
        if self.refused:
            out["refused"] = self.refused
        return out


@dataclass(frozen=True)
class DriftReport:
    """A model's drift detections: ``detections`` in all, ``last_at`` (the example count of the
    last one, or None) and ``actionable``: those a drift challenger may start on (a selector's
    since its race ended, the race being the alternative while it runs; else ``detections``)."""

    detections: int = 0
    last_at: int | None = None
    actionable: int = 0


@dataclass(frozen=True)
class Learned:
    """What the last learning call learned, for the service's prequential meters: ``outputs``
    before each step, (m,) or (m, K) float64 (a classifier's margins, a regressor's
    predictions, a novelty score), and ``targets`` (m,) (the labels from ``classes_``, the
    targets) of the m received examples it learned (rehearsal and replays not included)."""

    outputs: Any
    targets: Any


@dataclass(frozen=True)
class ModelReport:
    """The figures of a model, as ``GET /models/{name}`` and ``/metrics`` show them.

    Attributes
    ----------
    task : Task
        What the model predicts; ``has_classes``: whether it has classes (``n_classes`` is then
        an int once fitted, otherwise always None).
    fitted : bool
        It has learned (or started with) its first batch.
    warming_up : bool
        It holds its warm-up window: predictions raise ``WarmingUp``.
    examples : ExampleAccount
        received / learned / pending / refused.
    n_features, n_classes : int or None
        Input width and classes (None before the first batch; ``n_classes`` None without classes).
    n_support_vectors, steps, n_seen : int
        SVs held (0 for a linear model), learning steps (``t``: rehearsal and replays included),
        examples seen.
    gamma, lambda_ : float or None
        The RBF width and the regularisation in effect (None: not resolved yet, or none).
    scaling, scaling_reason : str or None
        The feature scaling in use and why.
    n_replayed, n_discarded : int
        Rows the run guard replayed; buffered rows dropped (old states only).
    drift : DriftReport
    statistics : Mapping[str, Any]
        The model's own counters (JSON-ready; e.g. ``merges``, ``merging_frequency``,
        ``average_weight_degradation``, a selector's ``selection``); per-class detail left out.
    metrics : Mapping[str, float]
        Prequential metrics the model keeps itself, by name (the task's own: none of today's
        models keeps one; the service measures accuracy from :meth:`OnlineModel.last_learned`).
    """

    task: str = "classification"
    has_classes: bool = True
    fitted: bool = False
    warming_up: bool = False
    examples: ExampleAccount = field(default_factory=ExampleAccount)
    n_features: int | None = None
    n_classes: int | None = None
    n_support_vectors: int = 0
    steps: int = 0
    n_seen: int = 0
    gamma: float | None = None
    lambda_: float | None = None
    scaling: str | None = None
    scaling_reason: str | None = None
    n_replayed: int = 0
    n_discarded: int = 0
    drift: DriftReport = field(default_factory=DriftReport)
    statistics: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        if not self.has_classes and self.n_classes is not None:
            raise ValueError("a model without classes reports n_classes=None")


@runtime_checkable
class Served(Protocol):
    """What every served model promises (online or batch-trained).

    ``TASK`` and ``HAS_CLASSES`` are class attributes.  ``LEARNS_ONLINE`` says whether the
    model is an :class:`OnlineModel` (the service's one switch between online and batch-trained
    models is the configuration's ``learns_online``, which agrees with it)."""

    TASK: ClassVar[str]
    HAS_CLASSES: ClassVar[bool]
    LEARNS_ONLINE: ClassVar[bool]

    def fitted(self) -> bool:
        """Whether it has learned (or was fitted on) its first batch; cheap."""

    def input_width(self) -> int | None:
        """The input width ``d`` (None before the first batch); cheap (called per scoring cell)."""

    def drift(self) -> DriftReport:
        """Its drift detections (:class:`DriftReport`; none for a model that watches no stream); cheap."""

    def report(self) -> ModelReport:
        """The model's figures now (any state, fitted or not)."""

    def published_copy(self) -> Served:
        """What a view holds: a copy predictions read while the learner goes on (it shares what
        the learner never rewrites); its :meth:`report` is the model's at the time of the copy."""

    def nonfinite(self, X=None) -> str | None:
        """The first part of the model that is not finite (``"margins"``, ``"dual
        coefficients"``, ``"intercept"``, ``"decisions"`` on the first rows of ``X``), or None."""

    def decision_function(self, X) -> Any:
        """(n,) or (n, K) float64 (raises ``WarmingUp`` while the warm-up window is open)."""

    def get_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(arrays, meta)`` for :mod:`svmstream.solvers.persistence` (no pickle)."""

    @classmethod
    def from_state(cls, arrays, meta) -> Served:
        """The model :meth:`get_state` saved; it continues exactly as the saved one would."""


@runtime_checkable
class OnlineModel(Served, Protocol):
    """A served model that keeps learning (``LEARNS_ONLINE = True``)."""

    def partial_fit(self, X, y, classes=None, sample_weight=None) -> OnlineModel:
        """Receive a batch X (n, d) float64 dense or CSR, y (n,); ``classes`` on the first call
        (models with classes); ``sample_weight`` (n,) float64 >= 0, each example's importance
        weight (``docs/weights.md``; the service passes it only when a request gave weights).
        Raises ValueError on invalid input (the model unchanged)."""

    def flush(self) -> OnlineModel:
        """Learn everything pending now (the end of a stream)."""

    def grow_features(self, n_features: int) -> OnlineModel:
        """Widen to ``n_features`` inputs (a missing feature is a zero)."""

    def add_class(self, label) -> OnlineModel:
        """Add a class sorting after the known ones (models with classes only)."""

    def last_learned(self) -> Learned | None:
        """What the last call learned (:class:`Learned`), None before the first."""

    def class_count(self) -> int | None:
        """Classes known (None before the first batch or without classes); cheap."""

    def serves(self) -> bool:
        """Whether it predicts now (fitted, out of its warm-up window); cheap."""

    def warm_start(self) -> OnlineModel | None:
        """A detached copy a drift challenger starts from (its buffer learned, none kept, a fresh
        detector, the schedule restarted), or None when it cannot give one (not past its warm-up,
        a selector whose race is not over)."""

    def paired_loss(self, X, y, decision=None) -> Any:
        """(n,) float64: the loss of the model's prediction of each row of ``X`` against ``y``,
        for the challengers' paired test (``docs/challengers.md``): a classifier's 0/1 loss of
        the predicted class, a regressor's absolute error, a novelty model's 0/1 loss of the
        outlier flag against an evaluation label (NaN: a row without one, no pair).
        ``decision``: ``decision_function(X)`` when the caller computed it (raises
        ``WarmingUp`` while the warm-up window is open, as ``decision_function``)."""

    def loss_scale(self) -> float | None:
        """The scale of a difference of two :meth:`paired_loss` values: None for 0/1 losses (a
        difference is -1, 0 or 1); a regressor's 4 σ of its first targets (each paired
        difference is divided by it and clipped to [-1, 1]: the bets stay bounded)."""

    def serving_settings(self) -> Mapping[str, Any] | None:
        """Settings in effect a challenger copies beyond the model's configuration (a selector's
        sole survivor: its numeric ``gamma``, ``C``, ``rehearsal``), or None."""

    def estimate_bytes(self, n_features: int, n_classes: int) -> int:
        """Estimated bytes of this model's arrays at width ``n_features`` with ``n_classes``
        classes (labels not included: the service counts them), before anything is allocated;
        an upper bound of what it holds then."""
