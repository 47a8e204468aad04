"""Per-model learning meters (plain numpy and threading; nothing of the service).

* :class:`PrequentialWindow` -- prequential (test-then-train) accuracy over a sliding
  window: every solver step computes f(x) *before* it updates (``last_margins_`` of
  ``partial_fit``), so the prediction made for an example before learning from it is
  free (Gama, Sebastiao & Rodrigues 2013, "On evaluating stream learning algorithms",
  Machine Learning 90: prequential error with a sliding window).
* :class:`RateMeter` -- examples applied per second over the last ``window_s`` seconds.
* :func:`correct_predictions` -- whether each pre-update prediction was right.
* :class:`LabelRunMeter` -- the run of one label among received examples, for the
  label-sorted source warning (a stream in file order of a LIBSVM file sorted by label).
* :class:`RecentValues` -- the last N values of a figure (the publication times).

Their Prometheus exposition is :mod:`svmstream.app.observability.prometheus`.
"""

from __future__ import annotations

import threading
import time
from array import array
from collections.abc import Callable

import numpy as np


def correct_predictions(margins: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Whether the pre-update prediction of each example was right.

    Parameters
    ----------
    margins : ndarray of shape (m,) or (m, K), float64
        ``last_margins_`` of ``partial_fit``: f(x) before each step.  Binary: positive side
        is class index 1 (the scikit-learn convention); multi-class: one column per class.
    y : ndarray of shape (m,), int64
        True class indices.

    Returns
    -------
    ndarray of shape (m,), bool
    """
    margins = np.asarray(margins)
    if margins.ndim == 1:
        return (margins > 0) == (y == 1)
    return np.argmax(margins, axis=1) == y


class PrequentialWindow:
    """Accuracy of the last ``size`` test-then-train predictions (a ring buffer of 0/1).

    The ring's array grows with the outcomes received (doubling up to ``size``), so the
    window of a model that has learned few examples costs only those bytes.

    Parameters
    ----------
    size : int >= 1
        Window length in examples.
    """

    __slots__ = ("size", "_buf", "_pos", "_count", "_sum", "total", "total_correct", "_lock")  # one per model

    def __init__(self, size: int):
        self.size = int(size)
        self._buf = np.zeros(0, dtype=np.uint8)
        self._pos = 0
        self._count = 0
        self._sum = 0
        self.total = 0
        self.total_correct = 0
        self._lock = threading.Lock()

    def add(self, correct: np.ndarray) -> None:
        """Append a batch of outcomes (bool array of shape (m,)), oldest first."""
        c = np.asarray(correct, dtype=np.uint8)
        m = c.shape[0]
        if m == 0:
            return
        with self._lock:
            self._reserve(self._count + m)
            self.total += m
            self.total_correct += int(c.sum())
            if m >= self.size:
                self._buf[:] = c[m - self.size :]
                self._pos = 0
                self._count = self.size
                self._sum = int(self._buf.sum())
                return
            end = self._pos + m
            if end <= self.size:
                old = int(self._buf[self._pos : end].sum())
                self._buf[self._pos : end] = c
            else:
                first = self.size - self._pos
                old = int(self._buf[self._pos :].sum()) + int(self._buf[: end - self.size].sum())
                self._buf[self._pos :] = c[:first]
                self._buf[: end - self.size] = c[first:]
            # positions beyond the filled part held zeros, so ``old`` counts only live entries
            self._sum += int(c.sum()) - old
            self._pos = end % self.size
            self._count = min(self.size, self._count + m)

    def _reserve(self, n: int) -> None:
        """Room for ``min(n, size)`` slots.  Until the ring wraps the filled slots are a prefix
        (``_pos == _count``), so growing keeps them where they are; it wraps only once the
        array has all ``size`` slots."""
        have = self._buf.shape[0]
        n = min(int(n), self.size)
        if n > have:
            buf = np.zeros(min(self.size, max(n, 2 * have)), dtype=np.uint8)
            buf[:have] = self._buf
            self._buf = buf

    def accuracy(self) -> float | None:
        """Fraction correct in the window, or None before the first example."""
        with self._lock:
            return self._sum / self._count if self._count else None

    def count(self) -> int:
        """Examples currently in the window (``min(size, examples seen)``)."""
        return self._count


class LabelRunMeter:
    """The current run of one label among the received examples (the request's labels, in
    arrival order) and how many runs reached ``window`` examples.

    A model of two or more classes that receives ``window`` examples in a row of one label
    is probably fed a label-sorted source: the shuffle buffer and the run guard compensate,
    but shuffling the source is better.
    """

    __slots__ = ("window", "label", "length", "detections", "_lock")  # one per model

    def __init__(self, window: int = 1000):
        self.window = int(window)
        self.label: int | None = None
        self.length = 0
        self.detections = 0
        self._lock = threading.Lock()

    def add(self, y: np.ndarray) -> int:
        """Append received labels (class indices, oldest first); returns how many runs
        reached ``window`` within them (each run counts once)."""
        y = np.asarray(y)
        if y.size == 0:
            return 0
        starts = np.concatenate(([0], np.flatnonzero(y[1:] != y[:-1]) + 1))
        lengths = np.diff(np.append(starts, y.size))
        with self._lock:
            before = np.zeros(lengths.size, dtype=np.int64)
            if self.label is not None and int(y[0]) == self.label:
                before[0] = self.length
            total = before + lengths
            found = int(np.count_nonzero((before < self.window) & (total >= self.window)))
            self.label, self.length = int(y[-1]), int(total[-1])
            self.detections += found
        return found


class RateMeter:
    """Examples applied per second, averaged over the last ``window_s`` seconds."""

    __slots__ = ("window_s", "_clock", "_start", "_samples", "_total", "_lock")  # one per model

    def __init__(self, window_s: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self.window_s = float(window_s)
        self._clock = clock
        self._start = clock()
        # a list, not a deque: a deque allocates a 64-slot block (~0.6 KB) at once, per model;
        # the window holds one sample per batch applied in the last window_s seconds
        self._samples: list[tuple[float, int]] = []
        self._total = 0
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        now = self._clock()
        with self._lock:
            self._total += int(n)
            self._samples.append((now, self._total))
            self._trim(now)

    def _trim(self, now: float) -> None:
        # keep one sample at or before the window start as the base
        cut = now - self.window_s
        samples = self._samples
        k = 0
        while k + 1 < len(samples) and samples[k + 1][0] <= cut:
            k += 1
        if k:
            del samples[:k]

    def rate(self, at: float | None = None) -> float:
        """Examples per second over ``[at - window_s, at]`` (shorter while younger);
        ``at`` defaults to now."""
        now = self._clock() if at is None else at
        with self._lock:
            self._trim(now)
            span = min(self.window_s, now - self._start)
            if span <= 0:
                return 0.0
            base_t = now - span
            base = 0
            for t, total in self._samples:
                if t <= base_t:
                    base = total
                else:
                    break
            return (self._total - base) / span

    def last(self) -> float | None:
        """Clock time of the last :meth:`add` (None before it)."""
        samples = self._samples
        return samples[-1][0] if samples else None

    def rate_at_last(self) -> float:
        """:meth:`rate` at the time of the last :meth:`add`: a figure that changes only when
        examples are applied (what ``GET /models/{name}`` shows; ``/metrics`` shows the
        live, decaying :meth:`rate`)."""
        last = self.last()
        return 0.0 if last is None else self.rate(at=last)

    @property
    def total(self) -> int:
        return self._total


class RecentValues:
    """The last ``maxlen`` float values appended, oldest overwritten first: a ring held in an
    ``array('d')`` that grows with the values (8 bytes each; a ``deque(maxlen=256)`` allocates
    ~1.5 KB at once, per model).  One writer; readers iterate over a snapshot of the values
    (taken in one call, so a concurrent append never changes it)."""

    __slots__ = ("maxlen", "_buf", "_next")

    def __init__(self, maxlen: int):
        self.maxlen = int(maxlen)
        self._buf = array("d")
        self._next = 0

    def append(self, value: float) -> None:
        if len(self._buf) < self.maxlen:
            self._buf.append(value)
        else:
            self._buf[self._next] = value
            self._next = (self._next + 1) % self.maxlen

    def __len__(self) -> int:
        return len(self._buf)

    def __iter__(self):
        return iter(self._buf.tolist())
