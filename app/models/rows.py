"""What a model's learner does with rows outside the champion's own step: learn a slice of a
batch on any online estimator (:func:`learn_rows`), the losses of its pre-update predictions
(:func:`losses_of`, the model's own ``paired_loss``), and join the rows held back for the next scoring cell to a new batch
(:func:`join_rows`).  Public estimator methods only."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def fitted(est) -> bool:
    """Whether ``est`` (a served model, or None) has learned its first batch."""
    return est is not None and est.fitted()


def learn_rows(est, X, y: np.ndarray, n_classes: int, weights: np.ndarray | None = None) -> None:
    """``est.partial_fit`` on ``X`` (n, d) float64 dense or CSR and class indices ``y`` (n,)
    int64 (a model without classes: its float64 targets), after widening it to ``d`` and adding
    the classes it lacks (``n_classes`` >= 2 in all; models with classes only); ``weights`` (n,)
    float64 importance weights (None: ones; passed as ``sample_weight`` only when given).  Raises
    whatever ``partial_fit`` raises (ValueError on invalid input)."""
    if X.shape[0] == 0:
        return
    kw = {} if weights is None else {"sample_weight": weights}
    if not est.fitted():
        est.partial_fit(X, y, classes=np.arange(n_classes), **kw)
        return
    if X.shape[1] > est.input_width():
        est.grow_features(X.shape[1])
    if est.HAS_CLASSES:  # a regressor's y are targets, a novelty model's evaluation labels
        for k in range(est.class_count(), n_classes):
            est.add_class(k)
    est.partial_fit(X, y, **kw)


def scorable(est) -> bool:
    """Whether ``est`` serves predictions now (fitted and out of its warm-up window)."""
    return est is not None and est.serves()


def losses_of(est, X, y: np.ndarray, margins_out: list | None = None) -> np.ndarray | None:
    """(n,) float64: the loss of ``est``'s prediction of each row against ``y`` (class indices,
    targets or evaluation labels), the model's ``paired_loss`` (its task's: 0/1, absolute error,
    NaN for a row without a label); None when ``est`` does not predict yet (:func:`scorable`).
    ``margins_out``: the decision values are appended to it (the promotion guard reads them,
    :mod:`.constant_guard`)."""
    if not scorable(est) or X.shape[0] == 0:
        return None
    width = est.input_width()
    if X.shape[1] > width:  # a model that has not grown yet sees the features it knows
        X = X[:, :width]
    margins = np.asarray(est.decision_function(X))
    if margins_out is not None:
        margins_out.append(margins)
    return np.asarray(est.paired_loss(X, y, margins), dtype=np.float64)


def n_rows(X) -> int:
    """Rows of ``X`` (dense or CSR), 0 for None."""
    return 0 if X is None else int(X.shape[0])


def join_rows(held, X):
    """``held`` rows (or None) then ``X``'s, as one matrix of ``X``'s kind and the wider width."""
    if held is None or held.shape[0] == 0:
        return X
    width = max(held.shape[1], X.shape[1])
    if sp.issparse(X):
        parts = [sp.csr_matrix(held), X]
        parts = [
            p if p.shape[1] == width else sp.csr_matrix((p.data, p.indices, p.indptr), (p.shape[0], width))
            for p in parts
        ]
        return sp.vstack(parts, format="csr")
    held = held.toarray() if sp.issparse(held) else held
    parts = [np.pad(p, ((0, 0), (0, width - p.shape[1]))) if p.shape[1] < width else p for p in (held, X)]
    return np.vstack(parts)


def rows_state(prefix: str, X) -> dict[str, np.ndarray]:
    """Arrays that save rows ``X`` (dense or CSR) under ``prefix``."""
    if X is None:
        return {}
    if sp.issparse(X):
        X = X.tocsr()
        return {
            f"{prefix}data": X.data,
            f"{prefix}indices": X.indices,
            f"{prefix}indptr": X.indptr,
            f"{prefix}shape": np.asarray(X.shape, dtype=np.int64),
        }
    return {f"{prefix}dense": np.ascontiguousarray(X, dtype=np.float64)}


def rows_from_state(prefix: str, arrays: dict[str, np.ndarray]):
    """The rows :func:`rows_state` saved under ``prefix`` (None if none)."""
    if f"{prefix}dense" in arrays:
        return np.array(arrays[f"{prefix}dense"], dtype=np.float64)
    if f"{prefix}data" in arrays:
        shape = tuple(int(v) for v in arrays[f"{prefix}shape"])
        return sp.csr_matrix(
            (arrays[f"{prefix}data"], arrays[f"{prefix}indices"], arrays[f"{prefix}indptr"]), shape=shape
        )
    return None
