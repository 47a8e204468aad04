"""The streaming pipeline around plain estimators (:class:`StreamingClassifier`), and online
model selection among such pipelines (:class:`SelectionClassifier`)."""

from .pipeline import DELEGATED, StreamingClassifier, legacy_state, resolve_scaling
from .selection import SelectionClassifier

__all__ = ["DELEGATED", "SelectionClassifier", "StreamingClassifier", "legacy_state", "resolve_scaling"]
