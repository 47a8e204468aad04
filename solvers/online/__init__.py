"""The streaming pipeline around plain estimators (:class:`StreamingClassifier`)."""

from .pipeline import DELEGATED, StreamingClassifier, legacy_state, resolve_scaling

__all__ = ["DELEGATED", "StreamingClassifier", "legacy_state", "resolve_scaling"]
