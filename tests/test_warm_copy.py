"""The warm start of a drift challenger (``StreamingClassifier.warm_copy``): a copy of
the champion that has learned its buffered rows, keeps no buffer, has a fresh detector and a
restarted schedule -- and leaves the champion as it was."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification

from svmstream.solvers import BudgetedSCAClassifier, BudgetedSGDClassifier
from svmstream.solvers.budgeted._base import DRIFT_RESET_T0
from svmstream.solvers.budgeted._state import C_SCHED_SHIFT, C_STEPS
from svmstream.solvers.online.pipeline import StreamingClassifier


def _pipeline(plain, n_classes=2):
    X, y = make_classification(3000, n_features=8, n_informative=5, n_classes=n_classes, random_state=0)
    p = StreamingClassifier(plain, shuffle_buffer=400, warmup=200)
    p.partial_fit(X[:2000], y[:2000], classes=np.unique(y))
    return p, X, y


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("plain", [BudgetedSGDClassifier(budget=80), BudgetedSCAClassifier(budget=80, C=4.0)])
def test_warm_copy_learns_the_buffer_keeps_none_and_leaves_the_champion(plain, n_classes):
    champion, X, y = _pipeline(plain, n_classes)
    before = champion.decision_function(X)
    pending = champion.n_pending_
    assert pending > 0  # the buffer holds rows: the copy must learn them, not drop them
    copy = champion.warm_copy()
    assert copy.n_received_ == champion.n_received_ == 2000
    assert copy.n_pending_ == 0 and copy.n_learned_ == 2000 and copy.shuffle_buffer == 0
    assert copy.drift_.n_detections == 0
    # the champion is untouched: same decisions, same pending rows
    np.testing.assert_array_equal(champion.decision_function(X), before)
    assert champion.n_pending_ == pending
    # the copy learns every new row at once (no buffer) and is a different model
    copy.partial_fit(X[2000:], y[2000:])
    assert copy.n_pending_ == 0 and copy.n_learned_ == 3000
    assert np.abs(copy.decision_function(X) - before).max() > 0
    # and its state round-trips like any pipeline's
    arrays, meta = copy.get_state()
    again = StreamingClassifier.from_state(arrays, meta)
    np.testing.assert_array_equal(again.decision_function(X), copy.decision_function(X))


def test_the_copy_restarts_its_schedule_at_t0_and_the_champion_keeps_its_own():
    champion, X, y = _pipeline(BudgetedSGDClassifier(budget=80))
    champion.flush()
    engine = champion.model_
    steps, shift = int(engine._counters[C_STEPS]), int(engine._counters[C_SCHED_SHIFT])
    assert steps > 500 and shift == 0
    copy = champion.warm_copy(t0=300)
    assert int(copy.model_._counters[C_SCHED_SHIFT]) == steps - 300  # the kernels read t - shift = 300
    assert int(engine._counters[C_SCHED_SHIFT]) == 0
    # the default restart is the drift reset's: the old model weighs like DRIFT_RESET_T0 examples
    assert int(champion.warm_copy().model_._counters[C_SCHED_SHIFT]) == max(0, steps - DRIFT_RESET_T0)
    # BSCA has no step size: its coefficients shrink to t0 / steps of what they were
    bsca, _, _ = _pipeline(BudgetedSCAClassifier(budget=80, C=4.0))
    bsca.flush()
    since = int(bsca.model_._counters[C_STEPS])
    scaled = bsca.warm_copy(t0=300).model_
    np.testing.assert_allclose(scaled._coef, bsca.model_._coef * 300 / since)


def test_a_warm_copy_needs_a_model_past_its_warm_up():
    X, y = make_classification(100, random_state=0)
    p = StreamingClassifier(BudgetedSGDClassifier(budget=20), warmup=500)
    p.partial_fit(X, y, classes=[0, 1])
    with pytest.raises(ValueError, match="warm-up"):
        p.warm_copy()
    p.flush()
    with pytest.raises(ValueError, match="t0"):
        p.warm_copy(t0=0)
