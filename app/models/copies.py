"""The two copies a model's handle makes of its estimator: the one a view publishes
(:func:`published`) and the detached full state a rollback checkpoint keeps
(:func:`detached_state`)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np


def published(est):
    """What a view holds for ``est``: its ``published_copy()`` (the contract's; a batch-trained
    model's is a full copy, published once)."""
    return None if est is None else est.published_copy()


def detached_state(est) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``est.get_state()`` with every array and the metadata copied, so that the learner's
    later steps cannot change it (``get_state`` may return live arrays)."""
    arrays, meta = est.get_state()
    return {k: np.array(v, copy=True) for k, v in arrays.items()}, copy.deepcopy(meta)


def as_path(path) -> Path:
    """``path`` as a Path, the same object if it is one (a Path costs ~0.3 KB per model)."""
    return path if isinstance(path, Path) else Path(path)
