"""The selection race on wide dense rows (d > 256): its memory, measured by tracemalloc, stays
within ``max_bytes``, and more than one candidate races where smaller shuffle buffers let them
fit (``solvers/online/selection/wide.py``, ``docs/selection.md`` "Wide dense rows")."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
from sklearn.base import clone
from sklearn.datasets import make_classification

from svmstream.solvers import BudgetedSGDClassifier
from svmstream.solvers.online.selection import SelectionClassifier
from svmstream.solvers.online.selection.wide import (
    MIN_BUFFER_ROWS,
    dense_window_bytes,
    race_peak,
    wide_candidate_bytes,
    wide_race,
)
from svmstream.solvers.persistence import decode_state, encode_state, estimator_from_state

D, WARMUP, BATCH = 600, 300, 150


def _data(n=3000, seed=0):
    X, y = make_classification(n_samples=n, n_features=D, n_informative=40, random_state=seed)
    return X * 50.0 + 3.0, y  # raw, unscaled features


def _selector(max_bytes):
    return SelectionClassifier(
        BudgetedSGDClassifier(budget=60, random_state=0),
        warmup=WARMUP,
        shuffle_buffer=4000,
        first_rung=600,
        max_bytes=max_bytes,
    )


def _bound():
    """A bound under which 4 full candidates do not fit, but 4 with smaller buffers do."""
    sel = _selector(None)
    full = wide_candidate_bytes(sel, D, 4000)
    window = dense_window_bytes(WARMUP, D)
    fixed = wide_candidate_bytes(sel, D, 0)
    row = (D + 1) * 8
    return race_peak(4, (fixed + full) // 2, window), full, window, fixed, row


def test_a_wide_dense_race_stays_within_max_bytes_measured():
    """tracemalloc's peak over the whole stream (the caller's batches included, copied here so
    they are traced) is within ``max_bytes``, four candidates race with smaller shuffle buffers
    (at least MIN_BUFFER_ROWS, fewer than the full one), and no example is lost."""
    bound, full, window, fixed, row = _bound()
    assert race_peak(4, full, window) > bound  # the full-size race does not fit
    X, y = _data()
    warm = clone(_selector(None)).set_params(warmup=50, shuffle_buffer=50)
    warm.partial_fit(X[:120], y[:120], classes=[0, 1]).flush()  # compile the kernels untraced
    del warm
    gc.collect()
    sel = _selector(bound)
    tracemalloc.start()
    try:
        for lo in range(0, X.shape[0], BATCH):
            sel.partial_fit(X[lo : lo + BATCH].copy(), y[lo : lo + BATCH].copy(), classes=[0, 1])
            assert sel.n_received_ == sel.n_learned_ + sel.n_pending_ == min(lo + BATCH, X.shape[0])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sel.race_size_ == 4, sel.race_size_
    buffers = {s["shuffle_buffer"] for s in sel.settings_}
    assert len(buffers) == 1 and MIN_BUFFER_ROWS <= buffers.pop() < 4000
    assert peak <= bound, (peak, bound)
    assert len(sel.rungs_) >= 1 and sel.flush().score(X[2500:], y[2500:]) > 0.7


def test_the_count_of_a_wide_race_by_hand():
    """k and the buffer rows of :func:`wide_race` against the formula: 4 windows and k
    candidates of the fixed part plus the buffer rows; None: every candidate, full buffers;
    a bound that fits nothing: one candidate with the full buffer."""
    bound, full, window, fixed, row = _bound()
    sel = _selector(bound)
    k, rows = wide_race(sel, 4, D, bound)
    assert k == 4 and rows == ((bound - 4 * window) // 4 - fixed) // row
    assert race_peak(4, fixed + rows * row, window) <= bound < race_peak(4, fixed + (rows + 1) * row, window)
    assert wide_race(sel, 4, D, None) == (4, None)
    assert wide_race(sel, 2, D, race_peak(2, full, window)) == (2, None)  # two full ones fit
    assert wide_race(sel, 4, D, race_peak(2, full, window))[0] == 3  # three smaller ones too
    assert wide_race(sel, 4, D, 0) == (1, None)


def test_a_wide_race_with_smaller_buffers_restores_exactly():
    """A snapshot of a wide race with smaller buffers continues as the uninterrupted run."""
    bound = _bound()[0]
    X, y = _data(2400, seed=3)
    whole, part = _selector(bound), _selector(bound)
    for lo in range(0, 1200, BATCH):
        for est in (whole, part):
            est.partial_fit(X[lo : lo + BATCH], y[lo : lo + BATCH], classes=[0, 1])
    restored = estimator_from_state(*decode_state(encode_state(*part.get_state())))
    assert restored.race_size_ == 4 and restored.settings_ == part.settings_
    for lo in range(1200, 2400, BATCH):
        for est in (whole, restored):
            est.partial_fit(X[lo : lo + BATCH], y[lo : lo + BATCH], classes=[0, 1])
    np.testing.assert_array_equal(
        whole.flush().decision_function(X[:300]), restored.flush().decision_function(X[:300])
    )
