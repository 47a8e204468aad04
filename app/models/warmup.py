"""Solver warm-up: run every code path the service uses once, before the first request."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from svmstream.app.models.config import ModelConfig
from svmstream.app.models.factory import copy_estimator, make_estimator


def warm_up() -> None:
    """Run every solver code path once on a tiny problem so that the numba kernels are
    compiled (or loaded from the on-disk cache) before the first request."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(8, 3))
    y = np.tile([0, 1], 4)
    for rows in (X, sp.csr_matrix(X)):
        # a small window and buffer: the window closes, rows pass the buffer and the guard
        for kernel in ("rbf", "linear"):  # linear: dense rows, and sparse rows held sparse
            est = make_estimator(
                ModelConfig(budget=2, warmup=4, shuffle_buffer=2, random_state=0, kernel=kernel)
            )
            est.partial_fit(rows, y, classes=np.arange(2))
            est.flush()
            copy_estimator(est).decision_function(rows)
    # the lookup-table merge solvers build their (H, WD) tables once per process (~0.5 s):
    # do it now rather than in the first batch of a lookup-wd model; and BSCA's step
    for config in (ModelConfig(budget=2, merge_solver="lookup-wd"), ModelConfig(algorithm="bsca", budget=2)):
        make_estimator(config).partial_fit(X, y, classes=np.arange(2)).flush()
