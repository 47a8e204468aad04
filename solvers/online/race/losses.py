"""The paired losses of the tasks: what each model's :meth:`~svmstream.solvers.contract.OnlineModel.paired_loss`
computes from its decision values, for the challengers' test (:class:`.evidence.PairedEvidence`,
``docs/challengers.md``).

* classification: the 0/1 loss of the predicted class (``decision > 0`` binary, the argmax of
  (n, K) decision values) against the class index;
* regression: the absolute error ``|y - ŷ|`` on the target's own scale; the evidence divides each
  paired difference by the regressor's :func:`regression_scale` and clips it to [-1, 1];
* novelty: the 0/1 loss of the outlier flag (``decision < 0``: threshold − score below 0)
  against an evaluation label (1 outlier, 0 inlier); NaN for a row sent without one (no pair:
  without labels a novelty challenger gathers no evidence and is promoted by hand only).

Imports nothing of the service and no numba.
"""

from __future__ import annotations

import numpy as np

#: A regressor's loss scale: this many standard deviations of the first targets (its warm-up window).
SCALE_SIGMAS = 4.0


def zero_one_losses(decision, y) -> np.ndarray:
    """(n,) float64: 1.0 where the class predicted from ``decision`` ((n,) binary or (n, K)) is not
    the class index ``y`` (n,), else 0.0."""
    margins = np.asarray(decision)
    predicted = (margins > 0).astype(np.int64) if margins.ndim == 1 else np.argmax(margins, axis=1)
    return (predicted != np.asarray(y, dtype=np.int64)).astype(np.float64)


def absolute_errors(decision, y) -> np.ndarray:
    """(n,) float64: ``|y - ŷ|``, ``decision`` being a regressor's predictions ŷ."""
    return np.abs(np.asarray(y, dtype=np.float64) - np.asarray(decision, dtype=np.float64))


def evaluation_losses(decision, y) -> np.ndarray:
    """(n,) float64: 1.0 where the outlier flag (``decision < 0``) disagrees with the evaluation
    label ``y`` (1 outlier, 0 inlier), 0.0 where it agrees, NaN where ``y`` is NaN (no label)."""
    y = np.asarray(y, dtype=np.float64)
    flagged = np.asarray(decision, dtype=np.float64) < 0
    out = (flagged != (y == 1.0)).astype(np.float64)
    out[~np.isfinite(y)] = np.nan
    return out


def regression_scale(spread: float | None) -> float | None:
    """The scale of a regressor's paired error differences: :data:`SCALE_SIGMAS` × ``spread``, the
    standard deviation of its first targets (None before it knows them)."""
    return None if spread is None else SCALE_SIGMAS * float(spread)


class ZeroOneLoss:
    """The contract's ``paired_loss`` / ``loss_scale`` of a classifier (a streaming pipeline, a
    selector): 0/1 losses of the predicted class, no scale."""

    __slots__ = ()

    def paired_loss(self, X, y, decision=None):
        """(n,) float64: the 0/1 loss of each row's predicted class against its class index
        ``y`` (:func:`zero_one_losses`); ``decision``: the decision values of X when the caller
        has them."""
        return zero_one_losses(self.decision_function(X) if decision is None else decision, y)

    def loss_scale(self):
        """None: 0/1 losses."""
        return None
