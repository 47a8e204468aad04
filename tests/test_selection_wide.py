"""The selection race on wide dense rows (d > 256): its memory, measured by tracemalloc, stays
within ``max_bytes``, and more than one candidate races where smaller shuffle buffers let them
fit, and a smaller one where a full one does not (``solvers/online/selection/wide.py``, ``docs/selection.md`` "Wide dense rows")."""

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


def _sizes():
    sel = _selector(None)
    return wide_candidate_bytes(sel, D, 4000), dense_window_bytes(WARMUP, D), wide_candidate_bytes(sel, D, 0)


def _feed_traced(sel, X, y):
    """Feed X in batches (copied, so that they are traced, as a service's decoded rows are);
    returns tracemalloc's peak over the stream."""
    warm = clone(sel).set_params(warmup=50, shuffle_buffer=50, max_bytes=None)
    warm.partial_fit(X[:120], y[:120], classes=[0, 1]).flush()  # compile the kernels untraced
    del warm
    gc.collect()
    tracemalloc.start()
    try:
        for lo in range(0, X.shape[0], BATCH):
            sel.partial_fit(X[lo : lo + BATCH].copy(), y[lo : lo + BATCH].copy(), classes=[0, 1])
            assert sel.n_received_ == sel.n_learned_ + sel.n_pending_ == min(lo + BATCH, X.shape[0])
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_wide_dense_race_stays_within_max_bytes_measured():
    """tracemalloc's peak over the whole stream (the caller's batches included) is within
    ``max_bytes``: two full candidates where two fit (the sparse-bound count of before raced
    one), one with a smaller shuffle buffer where a full one does not fit; no example is lost."""
    full, window, fixed = _sizes()
    X, y = _data()
    two = race_peak(2, full, window)
    sel = _selector(two)
    assert _feed_traced(sel, X, y) <= two
    assert sel.race_size_ == 2 and all("shuffle_buffer" not in s for s in sel.settings_)
    assert len(sel.rungs_) >= 1 and sel.flush().score(X[2500:], y[2500:]) > 0.7
    one = race_peak(1, (fixed + full) // 2, window)
    sel = _selector(one)
    assert _feed_traced(sel, X, y) <= one
    assert sel.race_size_ == 1 and MIN_BUFFER_ROWS <= sel.settings_[0]["shuffle_buffer"] < 4000


def test_the_count_of_a_wide_race_by_hand():
    """k and the buffer rows of :func:`wide_race` against the formula: a batch, 2 windows and k
    candidates; None: every candidate, full buffers; a bound that fits nothing: one
    candidate with the full buffer."""
    full, window, fixed = _sizes()
    sel, row = _selector(None), (D + 1) * 8
    assert wide_race(sel, 4, D, None) == (4, None, None)
    assert wide_race(sel, 4, D, race_peak(4, full, window)) == (4, None, None)
    assert wide_race(sel, 4, D, race_peak(3, full, window)) == (3, None, None)
    assert wide_race(sel, 4, D, race_peak(2, full, window) + row) == (2, None, None)
    bound = race_peak(1, (fixed + full) // 2, window)
    k, rows, held = wide_race(sel, 4, D, bound)
    assert k == 1 and held is None and rows == (bound - 3 * window - fixed) // row
    assert race_peak(1, fixed + rows * row, window) <= bound < race_peak(1, fixed + (rows + 1) * row, window)
    assert wide_race(sel, 4, D, 0) == (1, None, None)
    # neither a full window with the fewest buffer rows: a smaller window (2 of its rows each)
    small = window + wide_candidate_bytes(sel, D, MIN_BUFFER_ROWS) + 2 * 270 * row
    assert wide_race(sel, 4, D, small) == (1, MIN_BUFFER_ROWS, 270)


def test_a_wide_race_with_a_smaller_buffer_restores_exactly():
    """A snapshot of a wide race with a smaller buffer continues as the uninterrupted run."""
    full, window, fixed = _sizes()
    bound = race_peak(1, (fixed + full) // 2, window)
    X, y = _data(2400, seed=3)
    whole, part = _selector(bound), _selector(bound)
    for lo in range(0, 1200, BATCH):
        for est in (whole, part):
            est.partial_fit(X[lo : lo + BATCH], y[lo : lo + BATCH], classes=[0, 1])
    restored = estimator_from_state(*decode_state(encode_state(*part.get_state())))
    assert restored.settings_ == part.settings_ and restored.settings_[0]["shuffle_buffer"] < 4000
    for lo in range(1200, 2400, BATCH):
        for est in (whole, restored):
            est.partial_fit(X[lo : lo + BATCH], y[lo : lo + BATCH], classes=[0, 1])
    np.testing.assert_array_equal(
        whole.flush().decision_function(X[:300]), restored.flush().decision_function(X[:300])
    )
