"""A warm-started copy of a streaming pipeline: the start of a drift challenger that continues
from the champion's support vectors instead of from nothing (``docs/challengers.md``).

The copy is the champion at the moment of the copy (its support vectors, coefficients,
scaling, γ, classes and calibration) with three changes that let it follow a new concept:

1. the rows in the champion's shuffle buffer are learned at once, in a random order (they
   were received before the detection; nothing is dropped), and the copy keeps no buffer
   (``shuffle_buffer=0``: a buffer would hold the new concept back);
2. its drift detector starts afresh (it has seen nothing since the detection);
3. its step-size schedule restarts at t = ``t0`` (:meth:`restart_schedule`), so the old model
   weighs like ``t0`` examples against the new ones.

Source: the warm start of a challenger from the champion is the "alternate tree grown from the
detection point" of CVFDT/HAT (Hulten, Spencer and Domingos, KDD 2001; Bifet and Gavaldà,
IDA 2009) applied to a budgeted kernel model.
"""

from __future__ import annotations

import copy

import numpy as np

from ..budgeted._base import DRIFT_RESET_T0
from .stages.drift import DriftStage

#: The schedule restart of a warm-started copy: the old model weighs like this many examples
#: (the drift reset's; 1,000 made ijcnn1's file-order seam cost 4.7 pp, docs/challengers.md).
WARM_T0 = DRIFT_RESET_T0


def warm_copy(pipeline, t0: int | None = None):
    """A detached copy of the fitted ``pipeline`` (a
    :class:`~svmstream.solvers.online.StreamingClassifier` past its warm-up window) that has
    learned its buffered rows, keeps no buffer, has a fresh drift detector and a schedule
    restarted at ``t0`` (>= 1).  ``pipeline`` is not changed.

    Returns the copy; its ``n_received_`` is the pipeline's and its ``n_pending_`` is 0.

    Raises
    ------
    ValueError
        ``pipeline`` is still in its warm-up window, or ``t0`` < 1.
    """
    if pipeline.warming_up_:
        raise ValueError("a warm copy needs a pipeline past its warm-up window")
    t0 = WARM_T0 if t0 is None else t0
    if int(t0) < 1:
        raise ValueError(f"t0 must be >= 1, got {t0!r}")
    arrays, meta = pipeline.get_state()
    arrays = {k: np.array(v, copy=True) for k, v in arrays.items()}
    est = type(pipeline).from_state(arrays, copy.deepcopy(meta))
    order = est._order
    est.model_.learn_rows(order.drain(None))
    order.shuffle_buffer, order.capacity = 0, 0
    order.buf_X, order.buf_y = order.buf_X[:0], order.buf_y[:0]
    est.shuffle_buffer = 0
    est._drift = DriftStage(est.on_drift)
    est.model_.restart_schedule(t0)
    est.__dict__.pop("_last", None)
    return est
