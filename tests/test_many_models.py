"""Many models in one service (issue 16): what an idle model holds, lazy restore, dirty-only
snapshots.

The buffers of a model (shuffle buffer, run-guard reservoirs, calibration window, prequential
window) grow with the rows it has received instead of being allocated whole; the tests check
that the grown arrays give exactly the model that whole arrays gave, and that an idle model
holds only its rows.
"""

from __future__ import annotations

import numpy as np
import pytest

from svmstream.app.models.meters import PrequentialWindow
from svmstream.solvers import BudgetedSGDClassifier
from svmstream.solvers.budgeted._preprocessing import Preprocessor, grow_rows
from svmstream.solvers.calibration import MarginCalibrator


def _stream(n, d=6, seed=0, sorted_labels=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 3.0
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
    if sorted_labels:
        order = np.argsort(y, kind="stable")
        X, y = X[order], y[order]
    return X, y


def _whole(pp: Preprocessor) -> None:
    """Give a preprocessor its arrays at full capacity (what it allocated before they grew)."""
    pp.buf_X = grow_rows(pp.buf_X, pp.capacity, pp.capacity)
    pp.buf_y = grow_rows(pp.buf_y, pp.capacity, pp.capacity)
    pp.res_X = grow_rows(pp.res_X, pp.res_capacity, pp.res_capacity, axis=1)


def test_grow_rows_doubles_up_to_the_limit_and_keeps_rows():
    a = np.arange(6.0).reshape(3, 2)
    assert grow_rows(a, 2, 100) is a
    b = grow_rows(a, 4, 100)
    assert b.shape == (6, 2) and np.array_equal(b[:3], a) and not b[3:].any()
    assert grow_rows(a, 50, 10).shape == (10, 2)
    c = grow_rows(np.ones((2, 3, 4)), 5, 7, axis=1)
    assert c.shape == (2, 6, 4) and c[:, :3].all() and not c[:, 3:].any()


def test_an_idle_model_holds_only_the_rows_it_received():
    X, y = _stream(20)
    est = BudgetedSGDClassifier(random_state=0).partial_fit(X, y, classes=[0, 1])
    pp = est._pp
    assert pp.capacity == 20_000 and pp.res_capacity == 200  # the configured K and R
    assert pp.buf_X.shape[0] == 0 and pp.res_X.shape[1] == 0  # warm-up window open: nothing held
    assert est.calibrator_._margins.shape[0] == 0
    assert est._sv_t.size == 0 and est._coef.shape == (0, 1)  # no support vector before learning
    # past the window, the buffer holds what arrived, not K rows
    X2, y2 = _stream(1100, seed=1)
    est.partial_fit(X2, y2)
    m = int(pp.state[0])
    assert 0 < m <= pp.buf_X.shape[0] <= 2 * m and pp.buf_X.shape[0] < pp.capacity
    assert est._sv_t.shape == (6, est.budget + 1)


@pytest.mark.parametrize("sorted_labels", [False, True])
@pytest.mark.parametrize("shuffle_buffer", [300, 20_000])
def test_grown_arrays_learn_exactly_what_whole_arrays_learn(sorted_labels, shuffle_buffer):
    """Same stream, same seed: one model's buffer and reservoirs grow, the other's are
    allocated whole before the first row; every decision value is equal to the last bit."""
    X, y = _stream(6000, seed=2, sorted_labels=sorted_labels)
    params = dict(random_state=3, budget=50, warmup=200, shuffle_buffer=shuffle_buffer)
    grown = BudgetedSGDClassifier(**params)
    whole = BudgetedSGDClassifier(**params)
    sizes = [1, 7, 150, 333, 1000]
    start, b = 0, 0
    while start < X.shape[0]:
        stop = min(X.shape[0], start + sizes[b % len(sizes)])
        for est in (grown, whole):
            est.partial_fit(X[start:stop], y[start:stop], classes=[0, 1])
            if est is whole and est._pp.ready:
                _whole(est._pp)
        start, b = stop, b + 1
    assert whole._pp.buf_X.shape[0] == whole._pp.capacity
    if sorted_labels and shuffle_buffer < 1000:
        assert grown.n_replayed_ > 0  # the run guard fired: reservoirs were used
    probe = _stream(500, seed=9)[0]
    np.testing.assert_array_equal(grown.decision_function(probe), whole.decision_function(probe))
    a_grown, _ = grown.get_state()
    a_whole, _ = whole.get_state()
    assert a_grown.keys() == a_whole.keys()
    for key in a_grown:
        np.testing.assert_array_equal(a_grown[key], a_whole[key], err_msg=key)
    grown.flush()
    whole.flush()
    np.testing.assert_array_equal(grown.decision_function(probe), whole.decision_function(probe))


def test_calibrator_window_grows_and_refits_as_a_whole_window():
    rng = np.random.default_rng(0)
    f = rng.normal(size=5000) * 2
    y = (f + rng.normal(size=5000) > 0).astype(np.int64)
    grown = MarginCalibrator(2)
    whole = MarginCalibrator(2)
    whole._margins, whole._y = np.zeros(whole.window), np.zeros(whole.window, dtype=np.int64)
    for lo in range(0, 5000, 37):
        grown.update(f[lo : lo + 37], y[lo : lo + 37])
        whole.update(f[lo : lo + 37], y[lo : lo + 37])
        assert grown.slope_ == whole.slope_
        assert grown._margins.shape[0] <= min(grown.window, 2 * grown.n_seen_)
    assert grown._margins.shape[0] == grown.window
    small = MarginCalibrator(3)
    small.update(rng.normal(size=(10, 3)), np.arange(10) % 3)
    assert small._margins.shape == (10, 3)
    small.add_class()
    assert small._margins.shape == (10, 4)
    again = MarginCalibrator.from_state(*small.get_state())
    assert again._margins.shape == (10, 4) and again.n_seen_ == 10


def test_prequential_window_grows_and_wraps_as_a_ring():
    grown, n, rng = PrequentialWindow(1000), 0, np.random.default_rng(1)
    outcomes = rng.random(5000) < 0.7
    for size in [3, 1, 250, 999, 1000, 1001, 17] * 2:
        part = outcomes[n : n + size]
        grown.add(part)
        n += size
        seen = outcomes[:n][-1000:]
        assert grown.count() == seen.shape[0]
        assert grown.accuracy() == pytest.approx(seen.mean(), abs=1e-12)
    assert PrequentialWindow(10_000)._buf.nbytes == 0
