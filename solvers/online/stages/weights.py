"""The class weights of a streaming pipeline (``class_weight``; ``docs/weights.md``).

``class_weight`` scales every example's importance weight by its class's weight before the
example enters the stages (the weight then travels with the row, as a ``sample_weight`` does):

* a mapping ``{label: weight}`` (labels as the pipeline's ``classes_``; a class not named
  weighs 1), as scikit-learn's ``class_weight``;
* ``"balanced"``: scikit-learn's ``n / (K · n_c)``, kept online from the running class
  frequencies of the examples received so far — the i-th example of class c weighs
  ``n_i / (K · n_c,i)``, where ``n_i`` and ``n_c,i`` count the examples received up to and
  including it and K is the number of classes the model has then.  A weight is fixed when its
  example arrives (a minority class's first examples weigh most), and the counts do not depend
  on how the stream is cut into batches.

Saved state: the counts per class (``stages.weights`` in the pipeline's meta).
"""

from __future__ import annotations

from typing import Any

import numpy as np


class ClassWeightStage:
    """Class weights of received examples.

    Parameters
    ----------
    class_weight : None, "balanced" or dict — see the module docstring
    n_classes : int — K at the start

    Attributes
    ----------
    counts : (K,) int64 — examples received per class (``"balanced"``)
    """

    def __init__(self, class_weight, n_classes: int):
        self.class_weight = class_weight
        self.counts = np.zeros(int(n_classes), dtype=np.int64)

    def add_class(self) -> None:
        """One more class (the next index), no example yet."""
        self.counts = np.append(self.counts, 0)

    def weigh(self, index: np.ndarray, weights: np.ndarray | None, classes: np.ndarray) -> np.ndarray | None:
        """The importance weights of a received batch with class indices ``index`` (n,) int64:
        ``weights`` (None: ones) times each example's class weight; ``classes``: the pipeline's
        ``classes_`` (the mapping's keys).  Updates the running counts.  None when there are
        no class weights and no weights."""
        if self.class_weight is None:
            return weights
        n = index.shape[0]
        if self.class_weight == "balanced":
            k = self.counts.shape[0]
            onehot = np.zeros((n, k), dtype=np.int64)
            onehot[np.arange(n), index] = 1
            n_c = self.counts[index] + np.cumsum(onehot, axis=0)[np.arange(n), index]
            n_i = int(self.counts.sum()) + np.arange(1, n + 1)
            factor = n_i / (k * n_c)
            self.counts += onehot.sum(axis=0)
        else:
            table = np.array([float(self.class_weight.get(c, 1.0)) for c in classes.tolist()])
            factor = table[index]
        return factor if weights is None else weights * factor

    def get_state(self) -> dict[str, Any]:
        return {"counts": self.counts.tolist()}

    @classmethod
    def from_state(cls, meta: dict[str, Any] | None, class_weight, n_classes: int) -> ClassWeightStage:
        """Rebuild from :meth:`get_state` (None: saved before class weights, no counts)."""
        stage = cls(class_weight, n_classes)
        if meta:
            counts = np.asarray(meta["counts"], dtype=np.int64)
            stage.counts[: counts.shape[0]] = counts
        return stage


def check_class_weight(class_weight) -> None:
    """Raise ValueError naming ``class_weight[label]`` unless ``class_weight`` is None,
    ``"balanced"`` or a mapping of labels to finite numbers >= 0 (no booleans, no strings)."""
    if class_weight is None or class_weight == "balanced":
        return
    if not isinstance(class_weight, dict):
        raise ValueError(
            f'class_weight must be "balanced", a mapping of labels to weights or None, got {class_weight!r}'
        )
    for label, value in class_weight.items():
        if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)
        ):
            raise ValueError(f"class_weight[{label!r}]: a weight must be a number >= 0, got {value!r}")
        if not np.isfinite(value) or value < 0:
            raise ValueError(f"class_weight[{label!r}]: a weight must be finite and >= 0, got {value!r}")
