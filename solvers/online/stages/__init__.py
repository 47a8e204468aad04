"""The stages of the streaming pipeline (:class:`..pipeline.StreamingClassifier`), one module
each, each with its own state and its own part of the saved state (``get_state`` →
``(arrays, meta)`` with its own array prefix, ``from_state``; :mod:`svmstream.solvers.persistence`).

* :mod:`.rehearsal` — extra steps on remembered examples (handed to the estimator, which calls
  it on the rows its order stage releases);
* :mod:`.drift` — the drift monitor on the prequential errors and the reaction to a detection;
* :mod:`.calibration` — decision values → probabilities, learned from the prequential margins.

The scaler (warm-up window, ``gamma="scale"``) and the order stage (shuffle buffer, run guard)
are still run by the budgeted engines (:mod:`..budgeted._preprocessing`), configured by the
pipeline.
"""

from .calibration import CalibrationStage
from .drift import DriftStage
from .rehearsal import RehearsalStage

__all__ = ["CalibrationStage", "DriftStage", "RehearsalStage"]
