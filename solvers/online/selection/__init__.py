"""Online model selection for a model created with no settings: successive halving on the stream.

:class:`SelectionClassifier` races a few candidate :class:`~.pipeline.StreamingClassifier` pipelines
on the same stream and drops the losers at fixed points ("rungs"), as River's
``model_selection.SuccessiveHalvingClassifier`` does (Jamieson & Talwalkar, *Non-stochastic best arm
identification and hyperparameter optimization*, AISTATS 2016): at rung k the ``s`` survivors are
ranked by their prequential accuracy and ``ceil(s / eta)`` are kept.  Unlike River's budget of
model updates (a stream has no known length), rung k is held once every survivor has learned
``first_rung · eta^(k-1)`` examples, and it ranks the candidates on the examples they learned in the
second half of the stretch before it (their errors on the most recent rows, not the start-up that
every candidate shares).  Once one candidate is left the selector is that pipeline plus a
counter: the steady-state CPU per example is one model's.

A candidate is a setting relative to what the stages would choose: ``gamma_factor`` times the
plain ``gamma="scale"`` (1 / (d · Var) of the scaled warm-up window, scikit-learn's rule, for any
number of classes), ``C`` and ``rehearsal``.  The selector holds the first ``warmup`` examples
itself, reads the scaling and the plain "scale" γ from them with a probe pipeline (public API:
``scaling_``, ``gamma_``), then starts every candidate with the numeric γ and the resolved scaling
and passes it the held rows: each candidate learns every example the stream gave, in the same
order.  Candidates share ``random_state``: their shuffle buffers draw the same rows.

Every received example is counted: ``n_received_ = n_learned_ + n_pending_``, where the learned and
pending examples are the current leader's (every surviving candidate has received all examples).
Rungs are decided only at multiples of :data:`CHECK_EVERY` examples received (a batch that crosses
one is split), so the selection does not depend on how the stream is cut into batches.  The choice of candidates
and schedule, and the measurements behind it, are in ``docs/selection.md``.

The selector is a package of small modules: :mod:`.candidates` (which settings race),
:mod:`.halving` (the rungs), :mod:`.leader` (who predicts meanwhile), :mod:`.served` (the
contract), :mod:`.state` (save / restore) and :mod:`.classifier` (the estimator).

:class:`SelectionRegressor` (:mod:`.regressor`, its contract and state in :mod:`.regressor_served`)
is the regression model of a stream with no settings: candidate regression pipelines that differ by
γ, each with its own warm-up window, race by successive halving on their prequential squared error
(:mod:`..race.loss_halving`) on the same grid.
"""

from ..race.evidence import mcnemar_p
from .candidates import CANDIDATE_KEYS, DEFAULT_CANDIDATES, race_size
from .classifier import SelectionClassifier
from .halving import CHECK_EVERY
from .leader import LEADER_ALPHA, LEADER_RULES
from .regressor import DEFAULT_REGRESSION_CANDIDATES, SelectionRegressor

__all__ = [
    "CANDIDATE_KEYS",
    "CHECK_EVERY",
    "DEFAULT_CANDIDATES",
    "DEFAULT_REGRESSION_CANDIDATES",
    "LEADER_ALPHA",
    "LEADER_RULES",
    "SelectionClassifier",
    "SelectionRegressor",
    "mcnemar_p",
    "race_size",
]
