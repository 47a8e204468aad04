"""The drift stage: a detector on the prequential 0/1 errors and what a detection does.

The margins a learner computes before each step (prequential) give the 0/1 errors of the
examples received; :class:`~svmstream.solvers.drift.DriftMonitor` watches their rate.  A
detection with ``on_drift="reset_schedule"`` asks the estimator to restart its step-size
schedule (``restart_schedule()``; the pipeline empties its rehearsal memory); ``"none"`` only
counts it.  A detection never discards an example.

Resets are placed where the count of received examples is a multiple of
:data:`CHECK_EVERY`: the pipeline feeds a batch to the estimator in pieces that end there
(:meth:`DriftStage.pieces`), so detections and resets do not depend on how the stream is cut
into batches, and exactly-once recovery rebuilds the identical model.

Saved state: the monitor's arrays under ``drift__`` and ``{"monitor": …, "pending": bool}``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...drift import DriftMonitor

#: A batch is taken in pieces that end where the count of received examples is a multiple
#: of this; a reset a detection asked for is carried out at the end of such a piece.
CHECK_EVERY = 256
#: Prefix of the stage's arrays in a saved state.
PREFIX = "drift__"


class DriftStage:
    """Drift monitor and reaction of a streaming pipeline.

    Parameters
    ----------
    on_drift : {"reset_schedule", "none"}
        What a detection does: ask for a schedule restart at the next piece boundary, or
        only count it.

    Attributes
    ----------
    monitor : DriftMonitor — detections (``n_detections``, ``last_detection_at``)
    pending : bool — a detection asked for a reset not carried out yet
    """

    def __init__(self, on_drift: str = "reset_schedule"):
        self.on_drift = on_drift
        self.monitor = DriftMonitor()
        self.pending = False

    def pieces(self, n_seen: int, n: int) -> list[tuple[int, int]]:
        """``(lo, hi)`` ranges covering ``n`` rows received after ``n_seen`` others, cut where
        the count of received examples reaches a multiple of :data:`CHECK_EVERY`; one piece
        with ``on_drift="none"`` (no reset to place)."""
        if self.on_drift == "none":
            return [(0, n)]
        out, lo = [], 0
        while lo < n:
            hi = min(n, lo + CHECK_EVERY - (n_seen + lo) % CHECK_EVERY)
            out.append((lo, hi))
            lo = hi
        return out

    def observe(self, margins: np.ndarray, y_index: np.ndarray) -> None:
        """The prequential margins (n,) or (n, K) float64 of received examples and their class
        indices (n,) int: their 0/1 errors feed the monitor; a detection with
        ``on_drift="reset_schedule"`` marks a reset pending."""
        predicted = (margins > 0).astype(np.int64) if margins.ndim == 1 else np.argmax(margins, axis=1)
        fired = self.monitor.update(predicted != y_index)
        if len(fired) and self.on_drift == "reset_schedule":
            self.pending = True

    def reset_due(self, n_seen: int) -> bool:
        """At the end of a piece: True (and the reset is no longer pending) when a reset is
        pending and ``n_seen`` is a multiple of :data:`CHECK_EVERY`."""
        if self.pending and n_seen % CHECK_EVERY == 0:
            self.pending = False
            return True
        return False

    # ------------------------------------------------------------------ persistence
    def get_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """``(arrays, meta)``: the monitor's arrays prefixed :data:`PREFIX`."""
        arrays, meta = self.monitor.get_state()
        return {PREFIX + k: v for k, v in arrays.items()}, {"monitor": meta, "pending": bool(self.pending)}

    @classmethod
    def from_state(
        cls, arrays: dict[str, np.ndarray], meta: dict[str, Any] | None, on_drift: str
    ) -> DriftStage:
        """Rebuild from :meth:`get_state` (``meta`` None: a state saved before drift handling,
        a fresh monitor).  Raises ValueError on an unknown monitor state."""
        stage = cls(on_drift)
        if meta is not None:
            own = {k[len(PREFIX) :]: v for k, v in arrays.items() if k.startswith(PREFIX)}
            stage.monitor = DriftMonitor.from_state(own, meta["monitor"])
            stage.pending = bool(meta.get("pending", False))
        return stage
