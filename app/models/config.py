"""The resolved hyperparameters of one named model (:class:`ModelConfig`), its label set
and the rule for model names.

Shared by the HTTP schemas, the registry, snapshots, the stream consumer, the job runner
and the CLI; it imports nothing from the service, nor the solvers (importing
:mod:`svmstream.solvers` compiles-or-loads numba kernels, about a second: ``svmstream
healthcheck`` reads this module and must start fast).  The option sets below spell out
those of :mod:`svmstream.solvers` (``ONLINE_ALGORITHMS``, ``BATCH_ALGORITHMS``,
``MAINTENANCE``, ``MERGE_SOLVERS``, ``SCHEDULES``, ``SCALINGS``, ``KERNELS_ONLINE``, ``SV_STORAGES``, ``C_MAX``,
``LAMBDA_MIN``, ``REFERENCE_N``, ``REFERENCE_N_LINEAR``, ``DEFAULT_WARMUP``, ``DEFAULT_SHUFFLE_BUFFER``) and must stay equal to them
(``tests/test_option_sets.py``).
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

Label = StrictInt | StrictFloat | str
"""A class label as it appears in JSON: a number or a string (never a boolean)."""

MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
MODEL_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
"""Valid model names: 1-64 characters ``[A-Za-z0-9_.-]``, starting alphanumeric (they are
also directory and file names of the snapshots).  Matched whole (``fullmatch``; ``\\Z``, not
``$``, which also matches before a final newline: ``"abc\\n"`` would pass and its snapshot
files would never be restored)."""
MODEL_NAME_RULE = "use 1-64 characters [A-Za-z0-9_.-], starting alphanumeric"

Algorithm = Literal["bsgd", "bsca"]
"""``bsgd``: :class:`svmstream.solvers.BudgetedSGDClassifier`; ``bsca``:
:class:`svmstream.solvers.BudgetedSCAClassifier` (streaming mode; ``schedule``, ``eta``,
``radius`` and ``fit_intercept`` do not apply to it)."""
BatchAlgorithm = Literal["dcsvm", "avsf", "liblinear-cd"]
"""Models trained by a batch job (``POST /jobs``, :mod:`svmstream.app.jobs`); they serve
predictions but do not learn online.  Not accepted by ``PUT /models``."""
BATCH_ALGORITHMS = ("dcsvm", "avsf", "liblinear-cd")
Maintenance = Literal["merge", "remove", "project"]
MergeSolver = Literal["gss", "gss-precise", "lookup-h", "lookup-wd"]
Schedule = Literal["pegasos", "norma", "perceptron", "constant"]
OnDrift = Literal["none", "reset_schedule"]
"""What an online model does when its drift detector fires (``docs/online.md``)."""
Scaling = Literal["auto", "standard", "maxabs", "none"]
"""Feature scaling frozen from the warm-up window; ``auto`` is max-abs (``docs/defaults.md``)."""
Gamma = Annotated[float, Field(gt=0)] | Literal["scale"]
"""RBF width: a positive number, or ``"scale"``: 1 / (d · Var) of the scaled warm-up window."""
SvStorage = Literal["auto", "dense", "sparse"]
"""Support-vector storage of an RBF model: ``auto`` picks sparse SVs when the first batch is
sparse rows, wide (d > 256) and at most 10% nonzero (``docs/defaults.md``)."""
Kernel = Literal["rbf", "linear"]
"""``bsgd`` only: the budgeted Gaussian-kernel SVM, or a linear SVM with an explicit weight
matrix (Pegasos; no support vectors: ``budget`` and ``gamma`` do not apply; ``docs/defaults.md``)."""

#: The largest C and the smallest lambda the solvers accept (the step 1/(lambda t) overflows beyond).
C_MAX = 1e10
LAMBDA_MIN = 1e-12
#: n in lambda = 1/(C n) for a stream of unknown length (no n_samples): C = 1 gives 1/30,000 ≈ 3.3e-5.
REFERENCE_N = 30_000
#: The same n for kernel="linear": C = 1 gives lambda = 2e-4.
REFERENCE_N_LINEAR = 5_000
#: The solvers' defaults of the streaming preprocessing.
DEFAULT_WARMUP = 1000
DEFAULT_SHUFFLE_BUFFER = 20_000
DEFAULT_REHEARSAL = 1
DEFAULT_REHEARSAL_MEMORY = 20_000
#: The largest ``rehearsal``: it multiplies the work of every learned example.
REHEARSAL_MAX = 64
#: The largest ``rehearsal_memory`` (rows; the solver also bounds it at 16 MiB).
REHEARSAL_MEMORY_MAX = 1_000_000
#: Classes a model learns from its data at most, unless its configuration says otherwise.
DEFAULT_MAX_CLASSES = 1000
#: The largest ``max_classes`` a configuration may ask for.
MAX_CLASSES_LIMIT = 100_000


def check_model_name(name: str) -> None:
    """Raises ValueError ``"invalid model name ...: use 1-64 characters ..."``."""
    if not MODEL_NAME_RE.fullmatch(name):
        raise ValueError(f"invalid model name {name!r}: {MODEL_NAME_RULE}")


def normalise_classes(classes: list[Any]) -> list[Any]:
    """Return the label set of a model in canonical form.

    Numbers become ``int`` when integral (``1.0 -> 1``) so that labels compare
    numerically; the set is sorted (numbers ascending, or strings lexicographically),
    which is the scikit-learn convention: ``classes[1]`` is the positive class of a
    binary model (decision value > 0).

    Raises
    ------
    ValueError
        On booleans, non-finite numbers, a mix of numbers and strings, or duplicates.
    """
    out: list[Any] = []
    for c in classes:
        if isinstance(c, bool) or not isinstance(c, (int, float, str)):
            raise ValueError(f"class label {c!r} must be a number or a string")
        if isinstance(c, float):
            if not math.isfinite(c):
                raise ValueError(f"class label {c!r} is not finite")
            if c.is_integer():
                c = int(c)
        out.append(c)
    kinds = {isinstance(c, str) for c in out}
    if len(kinds) > 1:
        raise ValueError("classes must be all numbers or all strings")
    if len(set(out)) != len(out):
        raise ValueError(f"duplicate class labels in {classes!r}")
    return sorted(out)


class ModelConfig(BaseModel):
    """Hyperparameters of one named model (fully resolved, defaults filled in).

    JSON uses the key ``"lambda"`` for :attr:`lambda_`.  The regularisation is
    ``lambda`` when given, else ``1 / (C * n)`` with ``n = n_samples`` when given, else
    ``n = 30,000`` (a stream of unknown length; C = 1 gives λ ≈ 3.3e-5; ``kernel="linear"``:
    n = 5,000, λ = 2e-4) -- never a batch size.
    Online models warm up on their first ``warmup`` examples (scaling and ``gamma="scale"``
    are fixed from them), then learn through a shuffle buffer and a run guard
    (``docs/defaults.md``).
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False, frozen=True)

    algorithm: Algorithm | BatchAlgorithm = "bsgd"
    kernel: Kernel = Field(
        "rbf",
        description='bsgd: "rbf" (budgeted Gaussian-kernel SVM) or "linear" (weight matrix, no support '
        "vectors; budget and gamma do not apply; lambda = 1/(C 5,000) by default)",
    )
    budget: int = Field(500, ge=1, description="maximum number of support vectors B")
    gamma: Gamma = Field(
        "scale",
        description="RBF kernel width: k(x,x') = exp(-gamma ||x-x'||^2); "
        '"scale": 1/(d Var) of the scaled warm-up window',
    )
    C: float | None = Field(1.0, gt=0, le=C_MAX, description="SVM C; lambda = 1/(C n) unless lambda is given")
    lambda_: float | None = Field(
        None, alias="lambda", ge=LAMBDA_MIN, description="regularisation lambda (overrides C)"
    )
    n_samples: int | None = Field(
        None,
        ge=1,
        description="n in lambda = 1/(C n); default: 30,000 (lambda = 3.3e-5 for C = 1; linear: 5,000, 2e-4)",
    )
    n_features: int | None = Field(
        None, ge=1, description="input dimension d; default: fixed by the first accepted batch"
    )
    max_classes: int = Field(
        DEFAULT_MAX_CLASSES,
        ge=2,
        le=MAX_CLASSES_LIMIT,
        description="most classes a model with learned classes may have; a label beyond is refused",
    )
    classes: list[Label] | None = Field(
        None,
        description="the class labels (2 or more); omitted: learned from the data (a new label adds a "
        "class, up to max_classes; shown sorted, as declared ones)",
    )
    random_state: int | None = Field(None, description="seed of the solver's random number generator")
    maintenance: Maintenance = Field(
        "merge", description="budget maintenance: merge two SVs, remove one, or project it"
    )
    merge_solver: MergeSolver = Field(
        "gss", description="how merging finds h: golden section search or lookup tables"
    )
    schedule: Schedule = Field(
        "pegasos", description="bsgd learning rate: 1/(lambda t), eta/sqrt(t), or margin perceptron"
    )
    eta: float = Field(1.0, gt=0, description="bsgd: base learning rate of norma and perceptron")
    radius: float | None = Field(
        None, gt=0, description="bsgd perceptron: radius U of the ball (default 1/sqrt(lambda))"
    )
    fit_intercept: bool = Field(False, description="bsgd: learn an unregularised bias b")
    scaling: Scaling = Field("auto", description="feature scaling from the warm-up window (auto = max-abs)")
    warmup: int = Field(
        DEFAULT_WARMUP, ge=0, description="examples held before learning starts (they fix scaling and gamma)"
    )
    shuffle_buffer: int = Field(
        DEFAULT_SHUFFLE_BUFFER, ge=0, description="shuffle buffer K (examples; 0: off; at most 64 MiB)"
    )
    run_guard: bool = Field(
        True, description="replay other classes during improbably long one-class runs (label-sorted sources)"
    )
    rehearsal: int = Field(
        DEFAULT_REHEARSAL,
        ge=0,
        le=REHEARSAL_MAX,
        description="extra learning steps per example on examples drawn from a reservoir of the stream "
        "(multi-epoch accuracy from one pass; 0: off)",
    )
    rehearsal_memory: int = Field(
        DEFAULT_REHEARSAL_MEMORY,
        ge=0,
        le=REHEARSAL_MEMORY_MAX,
        description="examples remembered for rehearsal (a uniform reservoir sample; at most 16 MiB)",
    )
    on_drift: OnDrift = Field(
        "reset_schedule",
        description="when the drift detector fires: restart the step-size schedule, or only report it",
    )
    sv_storage: SvStorage = Field(
        "auto",
        description='support vectors: "dense" (a d x (B+1) matrix), "sparse" (their nonzeros only; '
        'needs scaling auto, maxabs or none), or "auto": sparse when the first batch is sparse rows with '
        "d > 256 and at most 10% nonzeros",
    )

    @field_validator("classes")
    @classmethod
    def _check_classes(cls, value: list[Any] | None, info: ValidationInfo) -> list[Any] | None:
        if value is None:
            return None
        value = normalise_classes(value)
        if len(value) < 2:
            raise ValueError(f"give at least 2 classes (or omit classes to learn them), got {len(value)}")
        limit = info.data.get("max_classes", DEFAULT_MAX_CLASSES)
        if len(value) > limit:
            raise ValueError(f"{len(value)} labels exceed max_classes = {limit}")
        return value

    @model_validator(mode="after")
    def _check_regularisation(self) -> ModelConfig:
        if self.C is None and self.lambda_ is None:
            raise ValueError("give either C or lambda")
        return self

    @property
    def reference_n(self) -> int:
        """n in lambda = 1/(C n) when ``n_samples`` is not given (depends on ``kernel``)."""
        return REFERENCE_N_LINEAR if self.kernel == "linear" else REFERENCE_N

    @property
    def learns_classes(self) -> bool:
        """True when the label set is learned from the data (no ``classes`` declared)."""
        return self.classes is None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict with the public key names (``"lambda"``)."""
        return self.model_dump(by_alias=True)
