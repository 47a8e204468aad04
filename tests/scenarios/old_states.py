"""Snapshots written by one tree, loaded and continued by another (issue 37: states written by the
tree before the contract load and continue identically).

``python tests/scenarios/old_states.py write DIR``: for each served online model (plain BSGD, BSCA,
Pegasos and BSCA one-vs-rest pipelines, a selector mid-race and one past its race), learn the first
half of a stream, save the state to ``DIR/<name>.state`` (:mod:`svmstream.solvers.persistence`),
then continue the model on the second half and write its decisions after each batch to
``DIR/<name>.json``.  ``continue_from(DIR)`` loads each state with the running tree, continues on
the same rows and returns both decision lists.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from sklearn.datasets import make_classification

BATCH = 150


def models():
    from svmstream.solvers import BudgetedSCAClassifier, BudgetedSGDClassifier, PegasosClassifier
    from svmstream.solvers import StreamingClassifier as S
    from svmstream.solvers.online.selection import SelectionClassifier

    def sel(first_rung):
        return SelectionClassifier(BudgetedSGDClassifier(budget=20, random_state=0), warmup=100,
                                   shuffle_buffer=60, first_rung=first_rung)  # fmt: skip

    return {
        "bsgd": (
            lambda: S(BudgetedSGDClassifier(budget=25, random_state=0), warmup=100, shuffle_buffer=80),
            2,
        ),
        "bsca": (
            lambda: S(BudgetedSCAClassifier(budget=25, random_state=0), warmup=100, shuffle_buffer=80),
            2,
        ),
        "bsca_ovr": (
            lambda: S(BudgetedSCAClassifier(budget=25, random_state=0), warmup=100, shuffle_buffer=80),
            3,
        ),
        "pegasos": (lambda: S(PegasosClassifier(random_state=0), warmup=100, shuffle_buffer=80), 2),
        "selection_racing": (lambda: sel(600), 2),
        "selection_settled": (lambda: sel(150), 3),
    }


def stream(k):
    X, y = make_classification(n_samples=2400, n_features=6, n_informative=4, n_redundant=0, n_classes=k,
                               random_state=k)  # fmt: skip
    return X * np.linspace(1.0, 30.0, 6), y.astype(np.int64)


def _continue(est, X, y):
    out = []
    for lo in range(X.shape[0] // 2, X.shape[0], BATCH):
        est.partial_fit(X[lo : lo + BATCH], y[lo : lo + BATCH])
        out.append(np.asarray(est.decision_function(X[:30])).tolist())
    est.flush()
    out.append(np.asarray(est.decision_function(X[:30])).tolist())
    return out


def write(directory: Path) -> None:
    from svmstream.solvers.persistence import encode_state

    directory.mkdir(parents=True, exist_ok=True)
    for name, (make, k) in models().items():
        X, y = stream(k)
        est = make()
        for lo in range(0, X.shape[0] // 2, BATCH):
            est.partial_fit(X[lo : lo + BATCH], y[lo : lo + BATCH], classes=np.arange(k))
        (directory / f"{name}.state").write_bytes(encode_state(*est.get_state()))
        (directory / f"{name}.json").write_text(json.dumps(_continue(est, X, y)))


def continue_from(directory: Path) -> dict[str, tuple[list, list]]:
    """``{name: (decisions of the writing tree, decisions of this tree)}``."""
    from svmstream.solvers.persistence import decode_state, estimator_from_state

    out = {}
    for name, (_, k) in models().items():
        X, y = stream(k)
        est = estimator_from_state(*decode_state((directory / f"{name}.state").read_bytes()))
        out[name] = (json.loads((directory / f"{name}.json").read_text()), _continue(est, X, y))
    return out


if __name__ == "__main__":
    if sys.argv[1:2] != ["write"] or len(sys.argv) != 3:
        raise SystemExit("usage: old_states.py write DIR")
    write(Path(sys.argv[2]))
