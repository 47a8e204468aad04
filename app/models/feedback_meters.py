"""The accuracy users saw: served accuracy, served log-loss and label delay of one model.

:class:`ServedMeter` compares, for each labelled prediction a model learned through
``/feedback``, the label that was served at prediction time with the label that arrived,
and scores the probability served for the arriving label (log-loss), over a sliding window
of the last ``feedback_window`` labelled predictions; it also keeps the label delay (seconds
from the prediction to its learned feedback) as histogram buckets and the feedback counts.
It imports nothing of the service.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from typing import Any

import numpy as np

#: Upper bounds (seconds) of the label-delay histogram buckets (+Inf implied).
DELAY_BUCKETS = (0.1, 1.0, 10.0, 60.0, 600.0, 3600.0, 21600.0, 86400.0)

#: Probabilities are clipped to this before the logarithm.
PROBA_FLOOR = 1e-15


class ServedMeter:
    """Served accuracy and log-loss over a window, label delay histogram, feedback counts.

    Parameters
    ----------
    window : int, labelled predictions in the sliding window
    """

    def __init__(self, window: int):
        self.window = int(window)
        self._lock = threading.Lock()
        self._correct: deque[bool] = deque(maxlen=self.window)
        self._loss: deque[float] = deque(maxlen=self.window)
        self.delay_counts = np.zeros(len(DELAY_BUCKETS) + 1, dtype=np.int64)
        self.delay_sum = 0.0
        #: ids received by /feedback or the stream, and what became of them
        self.counts = {"received": 0, "learned": 0, "duplicate": 0, "expired": 0, "invalid": 0}

    def count(self, **by_kind: int) -> None:
        """Add to the feedback counts (``received``, ``learned``, ``duplicate``, ``expired``, ``invalid``)."""
        with self._lock:
            for kind, n in by_kind.items():
                self.counts[kind] += int(n)

    def add(
        self, served: list[Any], arrived: list[Any], probs: list[float | None], delays: np.ndarray
    ) -> None:
        """Learned feedback rows: served labels, arriving labels, the probability served for
        each arriving label (None: no probabilities served), and delays in seconds (float64, (n,))."""
        losses = [-math.log(max(q, PROBA_FLOOR)) for q in probs if q is not None]
        bins = np.searchsorted(np.asarray(DELAY_BUCKETS), np.asarray(delays, dtype=np.float64), side="left")
        with self._lock:
            self._correct.extend(s == a for s, a in zip(served, arrived))
            self._loss.extend(losses)
            np.add.at(self.delay_counts, bins, 1)
            self.delay_sum += float(np.sum(delays))

    def figures(self) -> dict[str, Any]:
        """``served_accuracy`` and ``served_log_loss`` (None before any), their window counts,
        ``feedback`` (the counts) and ``label_delay_mean_s``."""
        with self._lock:
            n, m = len(self._correct), len(self._loss)
            total = int(self.delay_counts.sum())
            return {
                "served_accuracy": (sum(self._correct) / n) if n else None,
                "served_window": n,
                "served_window_size": self.window,
                "served_log_loss": (sum(self._loss) / m) if m else None,
                "label_delay_mean_s": (self.delay_sum / total) if total else None,
                "feedback": dict(self.counts),
            }

    def histogram(self) -> tuple[list[tuple[str, int]], float, int]:
        """Cumulative ``(le, count)`` buckets (``"+Inf"`` last), sum and count of the delays."""
        with self._lock:
            cum = np.cumsum(self.delay_counts).tolist()
            total = self.delay_sum
        les = [repr(float(b)) for b in DELAY_BUCKETS] + ["+Inf"]
        return list(zip(les, cum)), total, cum[-1]
