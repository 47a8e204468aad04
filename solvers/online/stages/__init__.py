"""The stages of the streaming pipeline (:class:`..pipeline.StreamingClassifier`), one module
each, each with its own state and its own part of the saved state (``get_state`` →
``(arrays, meta)``, ``from_state``; :mod:`svmstream.solvers.persistence`), in the order a
received example meets them:

* :mod:`.scaler` — the warm-up window, the frozen feature scaling and ``gamma="scale"``;
* :mod:`.order` — the shuffle buffer and the run guard (the rows the estimator learns);
* :mod:`.rehearsal` — extra steps on remembered examples (handed to the estimator, which calls
  it on the rows the order stage releases);
* :mod:`.drift` — the drift monitor on the prequential errors and the reaction to a detection;
* :mod:`.calibration` — decision values → probabilities, learned from the prequential margins.
"""

from .calibration import CalibrationStage
from .drift import DriftStage
from .order import OrderStage
from .rehearsal import RehearsalStage
from .scaler import ScalerStage

__all__ = ["CalibrationStage", "DriftStage", "OrderStage", "RehearsalStage", "ScalerStage"]
