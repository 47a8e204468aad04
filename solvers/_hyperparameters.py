"""The hyperparameters of an online model: ONE table, and the option sets and constants it uses.

Each row (:class:`Hyperparameter`) gives a name (Python; ``alias`` is its JSON key), a type, a
default, bounds, choices, a one-line help text, the stage of the streaming model that owns it
and the algorithms that take it.  Everything that exposes these hyperparameters is built from
the table: the service's ``ModelConfig`` and ``PUT /models`` schema, the ``SVMSTREAM_DEFAULT_*``
settings, the flags of ``svmstream serve`` and ``replay``, and the estimator factory (through
:func:`stage_params`).  ``tests/test_hyperparameter_table.py`` checks every exposure against it;
:func:`markdown` writes ``docs/hyperparameters.md``.

Stages:

* ``estimator``: the algorithm of the papers (budget, γ, C/λ, maintenance, schedule, ...);
* ``scaler``: the warm-up window and the scaling it freezes;
* ``order``: the shuffle buffer and the run guard;
* ``rehearsal``: the reservoir of the stream and the extra steps drawn from it;
* ``drift``: what a drift detection does;
* ``service``: fields of a service model that are not learning parameters (the algorithm, the
  input dimension, the label set).

This module imports nothing but the standard library: ``svmstream healthcheck`` and the
service's configuration read it and must start fast (importing a solver family compiles or
loads numba kernels).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# ---------------------------------------------------------------------------- option sets
#: Online algorithms a service model can run (``svmstream.solvers.budgeted``).
ONLINE_ALGORITHMS = ("bsgd", "bsca")
#: Algorithms trained by a batch job: DC-SVM (exact kernel SVM) and the linear dual CD solvers.
BATCH_ALGORITHMS = ("dcsvm", "avsf", "liblinear-cd")
#: Budget maintenance (Wang, Crammer & Vucetic 2012, §6), name -> code of the numba kernels.
MAINTENANCE = {"merge": 0, "remove": 1, "project": 2}
#: How merging finds h and the partner: GSS to ``gss_eps``, GSS to 1e-10, lookup tables
#: (Glasmachers & Qaadan 2018).
MERGE_SOLVERS = {"gss": 0, "gss-precise": 1, "lookup-h": 2, "lookup-wd": 3}
#: BSGD learning-rate schedules (Wang et al. 2012, Table 2), and a fixed step η for streams
#: known to drift (``"constant"``: η_t = ``eta``, shrink 1 − ηλ: a memory of about 1/(ηλ) examples).
SCHEDULES = {"pegasos": 0, "norma": 1, "perceptron": 2, "constant": 3}
#: What an online model does when its drift detector fires: count and report only, or restart
#: the step-size schedule at t = ``DRIFT_RESET_T0`` (keeping the support vectors).
ON_DRIFT = ("none", "reset_schedule")
#: What a service model may do on a detection: ``ON_DRIFT``, or ``"challenger"``: start a fresh
#: challenger from the detection point, promoted only if it wins (``docs/challengers.md``; its
#: estimator runs with ``"none"``: the champion is left as it is).
ON_DRIFT_SERVICE = (*ON_DRIFT, "challenger")
#: Feature scaling of online models (the scaler stage, ``svmstream.solvers.online.stages.scaler``).
SCALINGS = ("auto", "standard", "maxabs", "none")
#: Kernels of the online BSGD model: the budgeted Gaussian-kernel SVM, or a linear SVM with an
#: explicit weight matrix (Pegasos; no support vectors, no budget; ``docs/defaults.md``).
KERNELS_ONLINE = ("rbf", "linear")
#: Support-vector storage of the budgeted RBF models: chosen from the first input ("auto"), a
#: dense (d, B+1) matrix, or sparse SVs in an append-only arena (``docs/defaults.md``).
SV_STORAGES = ("auto", "dense", "sparse")
#: The stages of a streaming model, in the order an example meets them (``service``: not a stage
#: of learning, the fields only the service reads; ``weights``: the class weights an example's
#: weight is multiplied by on arrival).
STAGES = ("service", "weights", "scaler", "order", "estimator", "rehearsal", "drift")

# ---------------------------------------------------------------------------- constants
#: A budgeted model needs room for two SVs to merge.
BUDGET_MIN = 2
#: The largest C and the smallest λ accepted: beyond them the Pegasos step 1/(λt)
#: overflows float64 within a batch (C = 1e300 gave NaN decisions).
C_MAX = 1e10
LAMBDA_MIN = 1e-12
#: The range of a numeric RBF ``gamma`` (``docs/defaults.md``): k(x, x') = exp(-gamma ||x - x'||^2)
#: tells points apart only while gamma ||x - x'||^2 is near 1, and a gamma applies to the
#: features as sent (scaling "none").  1e-15 still suits raw features of magnitude 1e6 in 1,000
#: dimensions, 1e15 features of magnitude 1e-7; beyond, the kernel is 1 or 0 for every pair of
#: distinct points and the model a constant predictor (gamma = 1e300 and 5e-324 were accepted).
GAMMA_MIN = 1e-15
GAMMA_MAX = 1e15
#: n in λ = 1/(C·n) for a stream of unknown length (no ``n_samples``): C = 1 gives λ = 1/30,000 ≈ 3.3e-5,
#: the only λ of 1e-3…1e-6 that met the target on all 6 sets of the issue "Good models with
#: no settings" (1e-3 misses reuters and ijcnn1, 1e-5 misses a9a shuffled).
REFERENCE_N = 30_000
#: The same n for ``kernel="linear"``: C = 1 gives λ = 2e-4 (``benchmarks/bench_linear_online.py``,
#: ``docs/defaults.md``).
REFERENCE_N_LINEAR = 5_000
#: Default size of the warm-up window (examples) whose statistics fix the scaling and γ.
DEFAULT_WARMUP = 1000
#: Default shuffle buffer K (examples); 0 turns it off.  K = 1,000 missed the target by
#: 0.2–0.6 pp on phishing and ijcnn1 shuffled; 20,000 met it everywhere.  Bounded by
#: ``BUFFER_MAX_BYTES`` of dense rows (64 MiB): K = 20,000 for d = 123, 1,008 for d = 8,315.
DEFAULT_SHUFFLE_BUFFER = 20_000
#: Rehearsal (streaming): extra steps per learned example on examples drawn from a reservoir of
#: the stream (``solvers/budgeted/_rehearsal.py``); the default was chosen by
#: ``benchmarks/bench_rehearsal.py`` (``docs/online.md``).
DEFAULT_REHEARSAL = 1
#: Rehearsal: examples remembered (a uniform reservoir sample of the stream).
DEFAULT_REHEARSAL_MEMORY = 20_000
#: The largest ``rehearsal``: it multiplies the work of every learned example.
REHEARSAL_MAX = 64
#: The largest ``rehearsal_memory`` (rows; the solver also bounds it at 16 MiB).
REHEARSAL_MEMORY_MAX = 1_000_000
#: Classes a model learns from its data at most, unless its configuration says otherwise.
DEFAULT_MAX_CLASSES = 1000
#: The largest ``max_classes`` a configuration may ask for.
MAX_CLASSES_LIMIT = 100_000

_SAME: Any = object()


@dataclass(frozen=True)
class Hyperparameter:
    """One row of the table.

    ``type`` is ``int``, ``float``, ``bool``, ``str`` (with ``choices``), ``list`` or ``dict`` (a
    mapping of labels to numbers >= 0);
    ``nullable``: None is a value of its own (the estimator reads it, e.g. ``lambda_=None``: from
    C); ``words``: strings a number field also accepts (``gamma="scale"``); ``stored``: values a
    resolved configuration may hold besides ``choices`` (batch-job models) that a request may not
    ask for; ``schema``: extra JSON-schema keys of the ``PUT /models`` body; ``setting_default``:
    the server's default (``SVMSTREAM_DEFAULT_<NAME>``) where it is not ``default``; ``cli``: the
    commands with a flag for it; ``same_in_estimator``: the estimator's ``__init__`` has the same
    default; ``null_in_estimator``: a nullable field the estimators take None for too (C: the
    service takes null with lambda given, the estimators need a number).
    """

    name: str
    type: type
    default: Any
    help: str
    stage: str
    algorithms: tuple[str, ...] = ONLINE_ALGORITHMS
    alias: str | None = None
    nullable: bool = False
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    choices: tuple[str, ...] | None = None
    words: tuple[str, ...] = ()
    stored: tuple[str, ...] = ()
    schema: tuple[tuple[str, Any], ...] = ()
    setting_default: Any = _SAME
    cli: tuple[str, ...] = ("serve", "replay")
    same_in_estimator: bool = True
    null_in_estimator: bool = True

    @property
    def json_name(self) -> str:
        """The key in JSON bodies and answers (``"lambda"`` for ``lambda_``)."""
        return self.alias or self.name

    @property
    def setting(self) -> str:
        """The server's default: ``Settings.default_<name>`` (``default_c``, ``default_lambda``)."""
        return "default_" + self.json_name.lower()

    @property
    def env(self) -> str:
        """The environment variable of :attr:`setting`."""
        return "SVMSTREAM_" + self.setting.upper()

    @property
    def flag(self) -> str:
        """The command-line flag (``--lambda``, ``--n-samples``, ``--C``)."""
        return "--" + self.json_name.replace("_", "-")

    @property
    def server_default(self) -> Any:
        """The value a server gives a model that omits it (unless its settings say otherwise)."""
        return self.default if self.setting_default is _SAME else self.setting_default

    @property
    def bounds(self) -> dict[str, float]:
        """The bounds that are set, as keyword arguments (``{"ge": 1}``)."""
        bounds = (("ge", self.ge), ("gt", self.gt), ("le", self.le), ("lt", self.lt))
        return {k: v for k, v in bounds if v is not None}


H = Hyperparameter
_BSGD = ("bsgd",)

#: The tasks a budgeted model learns (issue 38): class labels, a numeric target, or no target.
TASKS = ("classification", "regression", "novelty")

# fmt: off
HYPERPARAMETERS: tuple[Hyperparameter, ...] = (
    H("task", str, "classification", "what the model learns: class labels (classification), a numeric "
      "target (regression: /predict answers values and intervals) or no target (novelty: scores and "
      "outlier flags; docs/regression.md, docs/novelty.md)", "service", choices=TASKS, cli=(),
      same_in_estimator=False),
    H("algorithm", str, "bsgd", "bsgd (budgeted SGD) or bsca (budgeted coordinate ascent); not given: "
      "bsca when C is given without lambda (C is then its box constraint, which needs no n), else bsgd",
      "service",
      choices=ONLINE_ALGORITHMS, stored=BATCH_ALGORITHMS, same_in_estimator=False),
    H("kernel", str, "rbf", 'bsgd: "rbf" (budgeted Gaussian-kernel SVM) or "linear" (weight matrix, '
      "no support vectors; budget and gamma do not apply; lambda = 1/(C 5,000) by default)",
      "estimator", _BSGD, choices=KERNELS_ONLINE),
    H("budget", int, 500, "maximum number of support vectors B (at least 2: merging needs two)",
      "estimator", ge=BUDGET_MIN),
    H("gamma", float, "scale", "RBF kernel width: k(x,x') = exp(-gamma ||x-x'||^2); "
      '"scale": 1/(d Var) of the scaled warm-up window; a number: 1e-15 to 1e15', "estimator",
      ge=GAMMA_MIN, le=GAMMA_MAX, words=("scale",)),
    H("C", float, 1.0, "SVM C; lambda = 1/(C n) unless lambda is given", "estimator",
      nullable=True, gt=0, le=C_MAX, null_in_estimator=False),
    H("lambda_", float, None, "regularisation lambda (overrides C)", "estimator", alias="lambda",
      nullable=True, ge=LAMBDA_MIN),
    H("n_samples", int, None, "n in lambda = 1/(C n); default: 30,000 (lambda = 3.3e-5 for C = 1; "
      "linear: 5,000, 2e-4)", "estimator", nullable=True, ge=1),
    H("n_features", int, None, "input dimension d; default: fixed by the first accepted batch",
      "service", nullable=True, ge=1, cli=("serve",), same_in_estimator=False),
    H("max_classes", int, DEFAULT_MAX_CLASSES, "most classes a model with learned classes may have; "
      "a label beyond is refused", "service", ge=2, le=MAX_CLASSES_LIMIT, same_in_estimator=False),
    H("classes", list, None, "the class labels (2 or more, distinct); omitted: learned from the data "
      "(a new label adds a class, up to max_classes; shown sorted, as declared ones)", "service",
      nullable=True, schema=(("minItems", 2), ("uniqueItems", True)), cli=(), same_in_estimator=False),
    H("random_state", int, None, "seed of the solver's random number generator", "estimator",
      nullable=True, setting_default=0),
    H("maintenance", str, "merge", "budget maintenance: merge two SVs, remove one, or project it",
      "estimator", choices=tuple(MAINTENANCE)),
    H("merge_solver", str, "gss", "how merging finds h: golden section search or lookup tables",
      "estimator", choices=tuple(MERGE_SOLVERS)),
    H("schedule", str, "pegasos", "bsgd learning rate: 1/(lambda t), eta/sqrt(t), margin perceptron "
      "or a constant eta", "estimator", _BSGD, choices=tuple(SCHEDULES)),
    H("eta", float, 1.0, "bsgd: base learning rate of norma, perceptron and constant", "estimator",
      _BSGD, gt=0),
    H("radius", float, None, "bsgd perceptron: radius U of the ball (default 1/sqrt(lambda))",
      "estimator", _BSGD, nullable=True, gt=0),
    H("fit_intercept", bool, False, "bsgd: learn an unregularised bias b", "estimator", _BSGD),
    H("scaling", str, "auto", "feature scaling from the warm-up window (auto = max-abs, or none when gamma "
      "is a number: a gamma applies to the features as sent)", "scaler",
      choices=SCALINGS),
    H("warmup", int, DEFAULT_WARMUP, "examples held before learning starts (they fix scaling and "
      "gamma)", "scaler", ge=0),
    H("shuffle_buffer", int, DEFAULT_SHUFFLE_BUFFER, "shuffle buffer K (examples; 0: off; at most "
      "64 MiB)", "order", ge=0),
    H("run_guard", bool, True, "replay other classes during improbably long one-class runs "
      "(label-sorted sources)", "order"),
    H("rehearsal", int, DEFAULT_REHEARSAL, "extra learning steps per example on examples drawn from "
      "a reservoir of the stream (multi-epoch accuracy from one pass; 0: off)", "rehearsal", ge=0,
      le=REHEARSAL_MAX),
    H("rehearsal_memory", int, DEFAULT_REHEARSAL_MEMORY, "examples remembered for rehearsal (a "
      "uniform reservoir sample; at most 16 MiB)", "rehearsal", ge=0, le=REHEARSAL_MEMORY_MAX),
    H("on_drift", str, "reset_schedule", "when the drift detector fires: restart the step-size "
      "schedule, only report it, or start a challenger from the detection point (a copy of the "
      "champion), promoted if it wins (no example is ever dropped; the service's default: challenger)",
      "drift", choices=ON_DRIFT_SERVICE, setting_default="challenger"),
    H("sv_storage", str, "auto", 'support vectors: "dense" (a d x (B+1) matrix), "sparse" (their '
      'nonzeros only; needs scaling auto, maxabs or none), or "auto": sparse when the first batch '
      "is sparse rows with d > 256 and at most 10% nonzeros", "estimator", choices=SV_STORAGES),
    H("selection", bool, None, "race candidate models on the stream and serve the winner (gamma 1/4, 1 "
      'and 4 x "scale", and 4 x with C = 0.1 until the first rung; successive halving; '
      'docs/selection.md; a regression model: gamma 1 and 0.1 x "scale" on squared error, '
      "docs/regression.md); null: true when the model is created "
      "with no learning setting (only classes, class_weight, max_classes, n_features, remember, selection_bytes), "
      "false otherwise (--no-selection alone: one plain model of the defaults)",
      "service", nullable=True, same_in_estimator=False),
    H("selection_bytes", int, None, "bytes the racing candidates may take with the warm-up window (each "
      "counted as a model of the same settings); as many candidates race as fit, at least one; null: "
      "max_model_bytes less room for max_classes labels, set when the model is created",
      "service", nullable=True, ge=0, cli=(), same_in_estimator=False),
    H("class_weight", dict, None, 'class weights: each example\'s weight (w, 1 if not given) times its '
      'class\'s; a mapping {label: weight >= 0} (a class not named weighs 1), or "balanced": '
      "n / (K n_c) from the running class frequencies of the stream; null: none (docs/weights.md)",
      "weights", nullable=True, words=("balanced",), cli=()),
    H("remember", bool, False, "every /predict of this model keeps its rows and answers ids for "
      "/feedback, as if it asked remember (docs/feedback.md)", "service", cli=(),
      same_in_estimator=False),
    H("epsilon", float, None, "regression: half-width of the epsilon-insensitive tube on the "
      "standardised target (null: 0.1, SVR's default)", "service", nullable=True, ge=0, cli=(),
      same_in_estimator=False),
    H("nu", float, None, "novelty: nu of the one-class SVM, an upper bound on the fraction of rows "
      "outside the boundary (null: 0.2, docs/novelty.md)", "service", nullable=True, gt=0, le=1, cli=(),
      same_in_estimator=False),
)
# fmt: on
"""The table, in the order of ``ModelConfig``'s fields (``max_classes`` before ``classes``: the
label check reads it)."""

#: The ε-tube of regression: residuals within ±ε cost nothing (on the target as the estimator sees it:
#: the streaming pipeline standardises the target in its warm-up window, so 0.1 means 0.1 standard
#: deviations, as ``TransformedTargetRegressor(SVR(), StandardScaler())`` with SVR's default ε).
DEFAULT_EPSILON = 0.1
#: ν of the one-class SVM: an upper bound on the fraction of training points outside (Schölkopf et
#: al. 2001, Proposition 4); scikit-learn's ``OneClassSVM`` default.
DEFAULT_NU = 0.5

# fmt: off
#: Rows of the tasks beyond classification (issue 38).  Kept out of :data:`HYPERPARAMETERS` (which
#: the service's ``ModelConfig`` and schemas are built from) until the service reaches the tasks
#: through the model contract; the estimators' ``_parameter_constraints`` are built from them.
TASK_HYPERPARAMETERS: tuple[Hyperparameter, ...] = (
    H("epsilon", float, DEFAULT_EPSILON, "regression: half-width of the epsilon-insensitive tube "
      "(on the scaled target)", "estimator", ge=0),
    H("nu", float, DEFAULT_NU, "novelty: nu of the one-class SVM, an upper bound on the fraction of "
      "training rows outside the boundary", "estimator", gt=0, le=1),
)
# fmt: on

# fmt: off
#: The plain estimators' parameters that a served model does not expose (the service learns one
#: pass, never profiles and compares no merge solvers): not in :data:`HYPERPARAMETERS`, so no
#: schema, setting or flag has them; the estimators' ``_parameter_constraints`` read them as the
#: table's rows (:func:`svmstream.solvers._params.parameter_constraints`).
ESTIMATOR_ONLY: tuple[Hyperparameter, ...] = (
    H("epochs", int, 1, "passes over randomly permuted rows in fit", "estimator", ge=1, cli=()),
    H("gss_eps", float, 0.01, "golden section search tolerance of GSS-standard", "estimator",
      gt=0, lt=1, cli=()),
    H("compare_merge_solver", str, None, "diagnostics: also run this solver's partner search at "
      "every merge (not applied)", "estimator", nullable=True, choices=tuple(MERGE_SOLVERS), cli=()),
    H("profile", bool, False, "measure the wall time of budget maintenance", "estimator", cli=()),
    H("sampling", str, "permutation", "how an epoch of BSCA's fit picks its coordinates",
      "estimator", ("bsca",), choices=("permutation", "uniform"), cli=()),
)
# fmt: on

#: What a model of a task gets for the settings its request (and the server's explicitly set
#: defaults) leave out, where the classifier's default does not apply: the task pipelines' own
#: defaults (chosen by ``benchmarks/bench_regression.py`` / ``bench_novelty.py``; docs/regression.md,
#: docs/novelty.md).  A regression model with no settings races γ (``selection`` resolved as a
#: classifier's: :class:`~svmstream.solvers.online.selection.SelectionRegressor`); a novelty model
#: does not race (``selection`` false: no labels to score candidates on); no shuffle buffer (the
#: pipelines learn rows in arrival order; a drift challenger's config says so).
TASK_DEFAULTS: dict[str, dict[str, Any]] = {
    "classification": {},
    "regression": {"algorithm": "bsca", "warmup": 200, "rehearsal": 4, "scaling": "standard",
                   "merge_solver": "lookup-wd", "on_drift": "none", "shuffle_buffer": 0},
    "novelty": {"algorithm": "bsgd", "warmup": 200, "rehearsal": 1, "scaling": "standard",
                "merge_solver": "lookup-wd", "on_drift": "none", "selection": False, "shuffle_buffer": 0},
}  # fmt: skip
#: Per task that races (``selection``): the algorithms its candidates may run and the settings
#: the race varies besides γ (given with ``selection`` they are refused, naming ``selection``).
SELECTION_TASKS: dict[str, dict[str, tuple[str, ...]]] = {
    "classification": {"algorithms": ("bsgd",), "varies": ("C", "lambda")},
    "regression": {"algorithms": ("bsca", "bsgd"), "varies": ()},
}
#: The settings a model of each task takes (beyond classification's: every row); a setting of
#: another row given with another value than the task's default is refused, naming it.
TASK_SETTINGS: dict[str, tuple[str, ...]] = {
    "regression": ("task", "algorithm", "budget", "gamma", "C", "lambda_", "n_samples", "n_features",
                   "random_state", "maintenance", "merge_solver", "schedule", "eta", "fit_intercept",
                   "scaling", "warmup", "rehearsal", "rehearsal_memory", "remember", "epsilon", "on_drift",
                   "selection", "selection_bytes"),
    "novelty": ("task", "algorithm", "budget", "gamma", "n_features", "random_state", "maintenance",
                "merge_solver", "schedule", "eta", "scaling", "warmup", "rehearsal", "rehearsal_memory",
                "remember", "nu", "on_drift"),
}  # fmt: skip

BY_NAME: dict[str, Hyperparameter] = {row.name: row for row in HYPERPARAMETERS}
BY_JSON: dict[str, Hyperparameter] = {row.json_name: row for row in HYPERPARAMETERS}


def rows(*, stage: str | None = None, algorithm: str | None = None, cli: str | None = None):
    """The rows of ``stage``, taken by ``algorithm`` and with a flag of command ``cli`` (each if given)."""
    return tuple(
        row
        for row in HYPERPARAMETERS
        if (stage is None or row.stage == stage)
        and (algorithm is None or algorithm in row.algorithms)
        and (cli is None or cli in row.cli)
    )


def default_algorithm(given: Mapping[str, Any]) -> str:
    """The online algorithm of a model whose request does not name one.

    ``given``: the fields the user set (JSON names -> values: the request's, and the server's
    ``SVMSTREAM_DEFAULT_*`` settings that were set explicitly).  A C without ``lambda`` (and
    without a setting only BSGD takes, such as ``schedule``) gives ``"bsca"``: in BSCA, C is the
    box constraint of each example's dual coefficient (α ∈ [0, C], Qaadan et al. 2019), so it
    means on a stream of any length what it means to a batch SVM.  BSGD would need
    λ = 1/(C·n) with n the training rows, which a stream does not know.  Everything else gives
    ``"bsgd"`` (``docs/defaults.md``).

    >>> default_algorithm({"budget": 500, "gamma": 8, "C": 8})
    'bsca'
    >>> default_algorithm({"C": 8, "lambda": 1e-4}), default_algorithm({})
    ('bsgd', 'bsgd')
    """
    if given.get("algorithm") is not None:
        return str(given["algorithm"])
    if given.get("C") is None or given.get("lambda") is not None:
        return "bsgd"
    for key, value in given.items():
        row = BY_JSON.get(key)
        if row is None or value is None or "bsca" in row.algorithms:
            continue
        if not (row.name == "kernel" and value == "rbf"):
            return "bsgd"  # a setting only BSGD takes says which algorithm the user means
    return "bsca"


def stage_params(values: Mapping[str, Any], algorithm: str) -> dict[str, dict[str, Any]]:
    """Route ``values`` (Python names, e.g. ``ModelConfig.model_dump()``) to the stage that owns
    each: ``{stage: {name: value}}`` with every stage of :data:`STAGES` present.  Values of rows
    ``algorithm`` does not take are left out (``schedule`` for ``bsca``).

    Raises
    ------
    ValueError
        A name that is no row of the table, or an algorithm that is not online.
    """
    if algorithm not in ONLINE_ALGORITHMS:
        raise ValueError(f"algorithm must be one of {list(ONLINE_ALGORITHMS)}, got {algorithm!r}")
    unknown = sorted(set(values) - set(BY_NAME))
    if unknown:
        raise ValueError(f"unknown hyperparameter(s) {', '.join(unknown)}")
    routed: dict[str, dict[str, Any]] = {stage: {} for stage in STAGES}
    for name, value in values.items():
        row = BY_NAME[name]
        if algorithm in row.algorithms:
            routed[row.stage][name] = value
    return routed


def _cell(value: Any) -> str:
    return "—" if value is None else f"`{value!r}`" if isinstance(value, str) else f"`{value}`"


def markdown(table: Iterable[Hyperparameter] = HYPERPARAMETERS) -> str:
    """``docs/hyperparameters.md``: the table as the user reads it."""
    lines = [
        "# Hyperparameters of an online model",
        "",
        "Generated from the table in `solvers/_hyperparameters.py` (`python -c 'from"
        ' svmstream.solvers._hyperparameters import markdown; print(markdown(), end="")\''
        " > docs/hyperparameters.md`); `tests/test_hyperparameter_table.py` checks that this page, the"
        " `PUT /models` schema, `ModelConfig`, the `SVMSTREAM_DEFAULT_*` settings, the CLI flags and the"
        " estimator factory all agree with that table.",
        "",
        "*stage*: `estimator` is the algorithm of the papers; `scaler` (warm-up window and scaling),"
        " `order` (shuffle buffer, run guard), `rehearsal` and `drift` are the streaming stages around"
        " it; `service` fields are read by the service only.  *default*: a model's value when its"
        " configuration omits it (`ModelConfig`, the estimators); *server default*: what"
        " `PUT /models/{name}` fills in when the body omits it, unless `SVMSTREAM_DEFAULT_<NAME>` says"
        " otherwise.  `lambda`, when given, overrides `C`; else λ = 1/(C·n).",
        "",
        "| name (JSON) | stage | algorithms | type | default | server default | bounds / choices |"
        " setting | flag | meaning |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in table:
        if row.choices:
            allowed = " ".join(f"`{c}`" for c in row.choices)
        else:
            ops = {"ge": "≥", "gt": ">", "le": "≤"}
            allowed = ", ".join(f"{ops[k]} {v:g}" for k, v in row.bounds.items())
            allowed += "".join(f", `{w!r}`" for w in row.words)
        kind = row.type.__name__ + (" or null" if row.nullable else "")
        flag = f"`{row.flag}`" if row.cli else "—"
        meaning = row.help.replace("|", "\\|")
        lines.append(
            f"| `{row.json_name}` | {row.stage} | {', '.join(row.algorithms)} | {kind} | {_cell(row.default)}"
            f" | {_cell(row.server_default)} | {allowed or '—'} | `{row.env}` | {flag} | {meaning} |"
        )
    return "\n".join(lines) + "\n"


def put_fields_markdown(table: Iterable[Hyperparameter] = HYPERPARAMETERS) -> str:
    """The field list of ``PUT /models/{name}`` in ``docs/service.md`` (between
    ``<!-- put-fields -->`` and ``<!-- /put-fields -->``; ``tests/test_docs.py`` checks it):
    one line per row, its JSON name, type, server default, bounds or choices, and help."""
    lines = []
    for row in table:
        if row.choices:
            allowed = " / ".join(f"`{c}`" for c in row.choices)
        else:
            ops = {"ge": "≥", "gt": ">", "le": "≤"}
            allowed = ", ".join(f"{ops[k]} {v:g}" for k, v in row.bounds.items())
            allowed += "".join(f", or `{w!r}`" for w in row.words)
        kind = row.type.__name__ + (" or null" if row.nullable else "")
        only = "" if row.algorithms == ONLINE_ALGORITHMS else f"; {', '.join(row.algorithms)} only"
        where = f" ({allowed})" if allowed else ""
        lines.append(
            f"- `{row.json_name}` — {kind}{where}, default {_cell(row.server_default)}{only}: {row.help}"
        )
    return "\n".join(lines) + "\n"
