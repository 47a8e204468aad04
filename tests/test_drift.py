"""DriftMonitor: one-sided detection on simulated prequential error streams, exact pickle-free
state, call-split independence, input checks.  No data files: errors are Bernoulli draws."""

from __future__ import annotations

import json

import numpy as np
import pytest
import river
from river.drift import ADWIN

from svmstream.solvers.drift import DEFAULT_DELTA, DriftMonitor
from svmstream.solvers.persistence import decode_state, encode_state


def learning_curve(rng, n=50_000, start=0.5, end=0.03, tau=5_000):
    """(n,) bool errors of a model that learns: P(error) falls from ``start`` to ``end``."""
    return rng.random(n) < end + (start - end) * np.exp(-np.arange(n) / tau)


def bernoulli(rng, n, p):
    return rng.random(n) < p


def drifting_stream(rng):
    """~130k errors with a learning curve, abrupt increases, an abrupt decrease and a ramp."""
    return np.concatenate(
        [
            learning_curve(rng, 30_000),
            bernoulli(rng, 15_000, 0.3),  # jump up
            learning_curve(rng, 20_000, start=0.3, end=0.05, tau=2_000),  # the learner adapts
            bernoulli(rng, 10_000, 0.5),  # jump up
            bernoulli(rng, 10_000, 0.1),  # jump down
            rng.random(20_000) < np.linspace(0.1, 0.6, 20_000),  # slow increase
            bernoulli(rng, 25_000, 0.02),
            bernoulli(rng, 2_000, 0.9),
        ]
    )


def feed_in_chunks(monitor, errors, bounds):
    """Feed ``errors`` cut at ``bounds``; return the detections as positions in ``errors``."""
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        out.append(lo + monitor.update(errors[lo:hi]))
    return np.concatenate(out)


def state_through_file(monitor):
    """get_state, written and read back the way models are saved (JSON meta, npz arrays)."""
    arrays, meta = monitor.get_state()
    return decode_state(encode_state(arrays, meta))


# ----------------------------------------------------------------------------- detection
@pytest.mark.parametrize("seed", range(5))
def test_a_learning_curve_never_fires(seed):
    # the error rate of a learner falls 0.5 -> 0.03 over 50k examples: a decrease, not a drift
    monitor = DriftMonitor()
    errors = learning_curve(np.random.default_rng(seed))
    assert monitor.update(errors).size == 0
    assert monitor.n_detections == 0 and monitor.last_detection_at is None
    assert monitor.n_seen == errors.shape[0]
    # river's ADWIN as shipped is two-sided: it does fire on the same stream
    adwin = ADWIN(delta=DEFAULT_DELTA, clock=1)
    fired = 0
    for x in errors.astype(int).tolist():
        adwin.update(x)
        fired += adwin.drift_detected
    assert fired > 0


def test_an_abrupt_decrease_is_not_reported():
    rng = np.random.default_rng(7)
    monitor = DriftMonitor()
    assert (
        monitor.update(np.concatenate([bernoulli(rng, 20_000, 0.6), bernoulli(rng, 20_000, 0.05)])).size == 0
    )


@pytest.mark.parametrize("p", [0.03, 0.17, 0.5])
def test_no_false_alarm_on_a_stationary_stream(p):
    assert DriftMonitor().update(bernoulli(np.random.default_rng(11), 300_000, p)).size == 0


@pytest.mark.parametrize("seed", range(5))
def test_a_jump_after_the_learning_curve_is_detected_fast_and_once(seed):
    # measured (module docstring): median 16, largest 20 of 20 runs for 0.03 -> 0.9
    rng = np.random.default_rng(100 + seed)
    curve = learning_curve(rng)
    errors = np.concatenate([curve, bernoulli(rng, 5_000, 0.9)])
    fired = DriftMonitor().update(errors)
    assert fired.size == 1, fired
    assert 0 <= fired[0] - curve.shape[0] < 40


@pytest.mark.parametrize("seed", [*range(8), 22])
def test_a_moderate_jump_after_the_learning_curve_is_detected(seed):
    # measured (module docstring): 0.03 -> 0.1 after the curve, median 327, largest 534 of 20 runs
    rng = np.random.default_rng(seed)
    curve = learning_curve(rng)
    fired = DriftMonitor().update(np.concatenate([curve, bernoulli(rng, 5_000, 0.1)]))
    assert fired.size >= 1 and 0 <= fired[0] - curve.shape[0] < 1_500, fired


def one_sided_river_adwin(errors):
    """The alternative the module rejects: river's ADWIN wrapper (window restarted empty after
    every detection, decreases included), reporting increases only."""
    adwin, fired = ADWIN(delta=DEFAULT_DELTA, clock=1), []
    for i, x in enumerate(errors.astype(int).tolist()):
        width, total = adwin.width, adwin.total
        adwin.update(x)
        if (
            adwin.drift_detected
            and adwin.total * (width + 1 - adwin.width) > (total + x - adwin.total) * adwin.width
        ):
            fired.append(i)
    return np.asarray(fired, dtype=np.int64)


@pytest.mark.parametrize("jump", [0.1, 0.2])
def test_an_increase_is_not_lost_with_a_window_restarted_after_a_decrease(jump):
    # seed 22: the test the jump triggers is first taken for a decrease (W0 holds the curve's
    # early errors); restarting the window then loses the jump for good, keeping W1 does not
    rng = np.random.default_rng(22)
    curve = learning_curve(rng)
    errors = np.concatenate([curve, bernoulli(rng, 5_000, jump)])
    assert one_sided_river_adwin(errors).size == 0
    fired = DriftMonitor().update(errors)
    assert fired.size >= 1 and 0 <= fired[0] - curve.shape[0] < 500, fired


def test_a_smaller_delta_detects_later_never_earlier():
    rng = np.random.default_rng(3)
    curve = learning_curve(rng)
    errors = np.concatenate([curve, bernoulli(rng, 5_000, 0.2)])
    firsts = [DriftMonitor(delta=d).update(errors)[0] for d in (1e-2, 1e-4, 1e-6)]
    assert firsts == sorted(firsts)


# ----------------------------------------------------------------------------- positions, counters
def test_positions_when_a_drift_happens_in_the_middle_of_a_call():
    rng = np.random.default_rng(5)
    errors = np.concatenate([bernoulli(rng, 5_000, 0.05), bernoulli(rng, 500, 0.95)])
    monitor = DriftMonitor()
    assert monitor.update(errors[:4_000]).size == 0
    fired = monitor.update(errors[4_000:5_300])  # the jump is at 1,000 in this call
    assert fired.dtype == np.int64 and fired.size == 1
    assert 1_000 <= fired[0] < 1_040
    assert monitor.n_detections == 1
    assert monitor.last_detection_at == 4_000 + fired[0] + 1
    assert monitor.n_seen == 5_300
    # the same position, example by example: the call that fires is the one of that example
    one_by_one = DriftMonitor()
    hits = [i for i in range(5_300) if one_by_one.update(errors[i : i + 1]).size]
    assert hits == [4_000 + fired[0]]


def test_counters_over_several_detections():
    rng = np.random.default_rng(9)
    errors = drifting_stream(rng)
    monitor = DriftMonitor()
    fired = monitor.update(errors)
    assert fired.size >= 3 and np.all(np.diff(fired) > 0)
    assert monitor.n_detections == fired.size
    assert monitor.last_detection_at == fired[-1] + 1
    assert 0 <= monitor.width <= errors.shape[0] - fired[-1] - 1
    assert 0.0 <= monitor.error_rate <= 1.0


def test_batch_split_independence():
    rng = np.random.default_rng(13)
    errors = drifting_stream(rng)
    whole = DriftMonitor()
    expected = whole.update(errors)
    assert expected.size >= 3
    n = errors.shape[0]
    for _ in range(3):
        cuts = np.sort(rng.integers(0, n, size=60))
        bounds = np.concatenate([[0], cuts, [n]])  # uneven chunks, some empty
        split = DriftMonitor()
        np.testing.assert_array_equal(feed_in_chunks(split, errors, bounds), expected)
        assert (split.n_seen, split.n_detections, split.last_detection_at) == (
            whole.n_seen,
            whole.n_detections,
            whole.last_detection_at,
        )
        np.testing.assert_array_equal(split.get_state()[0]["window"], whole.get_state()[0]["window"])
        assert split.get_state()[1] == whole.get_state()[1]


@pytest.mark.parametrize("kind", [bool, np.int64, np.uint8, np.float64, np.float32])
def test_bool_and_0_1_numbers_are_equivalent(kind):
    errors = drifting_stream(np.random.default_rng(17))[:60_000]
    np.testing.assert_array_equal(DriftMonitor().update(errors.astype(kind)), DriftMonitor().update(errors))
    assert DriftMonitor().update(errors.astype(kind).tolist()).size == DriftMonitor().update(errors).size


# ----------------------------------------------------------------------------- state
def test_meta_is_json_and_arrays_are_plain():
    monitor = DriftMonitor(delta=1e-3, clock=4)
    monitor.update(drifting_stream(np.random.default_rng(1))[:50_000])
    arrays, meta = monitor.get_state()
    assert json.loads(json.dumps(meta)) == meta
    assert set(arrays) == {"window"}
    assert arrays["window"].dtype == np.uint8 and arrays["window"].ndim == 1
    assert arrays["window"].nbytes < 4_000
    assert meta["river"] == river.__version__ and meta["delta"] == 1e-3 and meta["clock"] == 4


@pytest.mark.parametrize("seed", range(3))
def test_state_round_trip_continues_exactly(seed):
    rng = np.random.default_rng(1_000 + seed)
    errors = drifting_stream(rng)
    n = errors.shape[0]
    reference = DriftMonitor()
    expected = reference.update(errors)
    assert expected.size >= 3
    # cut at random points, at 0, at the end and right at / after detections
    cuts = sorted({0, n, *rng.integers(0, n, size=8).tolist(), *expected.tolist(), *(expected + 1).tolist()})
    for cut in cuts:
        first = DriftMonitor()
        before = first.update(errors[:cut])
        restored = DriftMonitor.from_state(*state_through_file(first))
        after = cut + restored.update(errors[cut:])
        np.testing.assert_array_equal(np.concatenate([before, after]), expected, err_msg=f"cut {cut}")
        assert restored.get_state()[1] == reference.get_state()[1]
        np.testing.assert_array_equal(restored.get_state()[0]["window"], reference.get_state()[0]["window"])


def test_round_trip_keeps_parameters_and_counters():
    monitor = DriftMonitor(delta=3e-3, clock=2, grace_period=20, min_window_length=7, max_buckets=4)
    monitor.update(drifting_stream(np.random.default_rng(2))[:80_000])
    restored = DriftMonitor.from_state(*state_through_file(monitor))
    for name in ("delta", "clock", "grace_period", "min_window_length", "max_buckets", "n_seen"):
        assert getattr(restored, name) == getattr(monitor, name)
    assert (restored.n_detections, restored.last_detection_at) == (
        monitor.n_detections,
        monitor.last_detection_at,
    )
    assert (restored.width, restored.error_rate) == (monitor.width, monitor.error_rate)
    fresh = DriftMonitor.from_state(*DriftMonitor().get_state())
    assert fresh.n_seen == 0 and fresh.last_detection_at is None and fresh.width == 0


def test_corrupt_or_foreign_state():
    monitor = DriftMonitor()
    monitor.update(bernoulli(np.random.default_rng(4), 20_000, 0.1))
    arrays, meta = monitor.get_state()
    with pytest.raises(ValueError, match="unknown drift state"):
        DriftMonitor.from_state(arrays, {**meta, "version": 99})
    with pytest.raises(ValueError, match="corrupt"):
        DriftMonitor.from_state(arrays, {**meta, "width": meta["width"] + 1})
    with pytest.raises(ValueError, match="corrupt"):
        DriftMonitor.from_state({"window": arrays["window"][:-16]}, meta)  # river's decoder fails
    with pytest.raises(ValueError, match="corrupt"):
        DriftMonitor.from_state({"window": arrays["window"].astype(np.int64)}, meta)
    # bytes of another river release that do not restore: start empty, keep the counters
    with pytest.warns(RuntimeWarning, match="restarts empty"):
        other = DriftMonitor.from_state({"window": arrays["window"][:-16]}, {**meta, "river": "0.0.1"})
    assert other.width == 0 and other.n_seen == monitor.n_seen
    # ... while bytes that do restore are used whatever version wrote them
    same = DriftMonitor.from_state(arrays, {**meta, "river": "0.0.1"})
    assert same.width == monitor.width


# ----------------------------------------------------------------------------- input checks
def test_invalid_errors_raise_and_change_nothing():
    monitor = DriftMonitor()
    monitor.update(np.zeros(100, dtype=bool))
    arrays, meta = monitor.get_state()
    for bad in (
        np.zeros((3, 2), dtype=bool),
        np.array([0, 1, 2]),
        np.array([0.0, np.nan]),
        np.array(["1", "0"]),
    ):
        with pytest.raises(ValueError):
            monitor.update(bad)
    assert monitor.get_state()[1] == meta
    np.testing.assert_array_equal(monitor.get_state()[0]["window"], arrays["window"])
    empty = monitor.update(np.zeros(0, dtype=bool))
    assert empty.dtype == np.int64 and empty.shape == (0,) and monitor.n_seen == 100


@pytest.mark.parametrize(
    "kwargs",
    [{"delta": 0.0}, {"delta": 1.0}, {"delta": "0.1"}, {"clock": 0}, {"clock": 1.5}, {"grace_period": True}],
)
def test_invalid_parameters_raise(kwargs):
    with pytest.raises(ValueError):
        DriftMonitor(**kwargs)
