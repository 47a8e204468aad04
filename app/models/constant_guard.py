"""The promotion guard against constant predictors (``docs/challengers.md``).

A challenger whose decision values are the same for every row -- an RBF kernel so narrow
(gamma = 1e15 on scaled features) that k(x, x') = 0 between distinct points, or so wide that it
is 1 -- predicts the majority class.  Early in a stream, on imbalanced data, that beats a young
champion on the paired test (ijcnn1, 90 % one class: a gamma = 1e300 challenger was promoted at
example 640), and every later drift challenger, a warm copy of the champion, was a copy of the
constant model: the model never recovered.  The paired test alone cannot tell "better" from
"the majority rate while the champion learns", so a promotion on evidence also needs this guard
(:func:`constant_margins`, on the challenger's prequential decision values); a manual promotion (``POST /models/{name}/promote``) is the user's
call and is not guarded.
"""

from __future__ import annotations

import numpy as np

#: Relative spread of the decision values below which a model counts as constant.
CONSTANT_SPREAD = 1e-9


def constant_margins(margins: np.ndarray, X) -> bool:
    """Whether the decision values ``margins`` ((n,) binary, (n, K) multi-class) of the rows of
    ``X`` (dense or CSR, (n, d)) are the same for every row, ``X`` holding at least two distinct
    rows (every model is constant on one point).

    The spread (max - min) of each column within :data:`CONSTANT_SPREAD` x max(1, max |f|).
    The margins are the model's prequential ones (computed before it learned the rows: on rows
    it holds as support vectors a too-narrow kernel is not constant).

    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]])
    >>> constant_margins(np.array([0.3, 0.3, 0.3]), X), constant_margins(np.array([0.3, -1, 0.3]), X)
    (True, False)
    >>> constant_margins(np.array([0.3, 0.3]), np.ones((2, 2)))  # one distinct row: cannot tell
    False
    """
    margins = np.asarray(margins, dtype=np.float64)
    if margins.shape[0] < 2 or not np.all(np.isfinite(margins)):
        return False
    spread = np.ptp(margins, axis=0)
    scale = np.maximum(1.0, np.max(np.abs(margins), axis=0))
    if not np.all(spread <= CONSTANT_SPREAD * scale):
        return False
    dense = X.toarray() if hasattr(X, "toarray") else np.asarray(X)  # only when constant: rare
    return bool(np.unique(dense, axis=0).shape[0] >= 2)
