"""What the served models share to keep the contract (:mod:`.contract`): the finiteness check
of named parts, and :class:`BatchServed`, the contract of a batch-trained estimator (DC-SVM,
the linear dual CD / AVSF estimators: published once, never learning online).

numpy only (no numba): the batch families import it from their class modules.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from .contract import DriftReport, ExampleAccount, ModelReport

__all__ = ["BatchServed", "first_nonfinite"]


def first_nonfinite(parts: dict[str, Any]) -> str | None:
    """The name of the first of ``parts`` (name -> array-like or None) holding a NaN or an
    infinity, or None when every given part is finite."""
    for name, values in parts.items():
        if values is not None and not np.isfinite(np.asarray(values, dtype=np.float64)).all():
            return name
    return None


class BatchServed:
    """Mixin: :class:`~.contract.Served` for an estimator fitted once by a batch job.

    Its report is what the service has always shown for such a model: no online figures (the
    job's result carries its training figures); its published copy is an independent copy
    through the persistence API (published once, so its cost does not matter)."""

    TASK: ClassVar[str] = "classification"
    HAS_CLASSES: ClassVar[bool] = True
    LEARNS_ONLINE: ClassVar[bool] = False

    def fitted(self) -> bool:
        """Whether it has been fitted."""
        return "classes_" in self.__dict__

    def input_width(self) -> int | None:
        """``n_features_in_`` (None before ``fit``)."""
        return int(self.n_features_in_) if self.fitted() else None

    def drift(self) -> DriftReport:
        """None detected: a batch-trained model watches no stream."""
        return DriftReport()

    def report(self) -> ModelReport:
        """The figures ``GET /models`` shows of a batch-trained model (:class:`~.contract.ModelReport`)."""
        fitted = self.fitted()
        return ModelReport(
            task=self.TASK,
            has_classes=self.HAS_CLASSES,
            fitted=fitted,
            examples=ExampleAccount(),
            n_features=int(self.n_features_in_) if fitted else None,
            n_classes=int(self.classes_.shape[0]) if fitted else None,
        )

    def published_copy(self):
        """An independent copy with identical predictions (through :meth:`get_state`)."""
        arrays, meta = self.get_state()
        return type(self).from_state(arrays, meta)

    def nonfinite(self, X=None) -> str | None:
        """The first non-finite part: ``"dual coefficients"``, ``"intercept"``, or None."""
        return first_nonfinite(
            {
                "dual coefficients": self.__dict__.get("dual_coef_"),
                "intercept": self.__dict__.get("intercept_"),
            }
        )
