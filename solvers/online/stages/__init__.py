"""The stages of the streaming pipeline (:class:`..pipeline.StreamingClassifier`), one module
each, each with its own state and its own part of the saved state (``get_state`` →
``(arrays, meta)`` with its own array prefix, ``from_state``; :mod:`svmstream.solvers.persistence`).

* :mod:`.drift` — the drift monitor on the prequential errors and the reaction to a detection;
* :mod:`.calibration` — decision values → probabilities, learned from the prequential margins.

The scaler (warm-up window, ``gamma="scale"``), the order stage (shuffle buffer, run guard) and
the rehearsal memory are still run by the budgeted engines (:mod:`..budgeted._preprocessing`,
:mod:`..budgeted._rehearsal`), configured by the pipeline.
"""

from .calibration import CalibrationStage
from .drift import DriftStage

__all__ = ["CalibrationStage", "DriftStage"]
