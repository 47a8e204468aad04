"""The figures and decisions of the served models along a stream, as JSON on stdout.

Run by ``tests/test_contract_against_base.py`` with this tree's interpreter and with the
baseline tree's (``/work/base``, today's ``main`` before the contract): both must print the
same thing.  It uses only what both trees have: ``svmstream.app.models.view.estimator_stats``,
``svmstream.app.models.copies.published``, ``svmstream.app.models.limits.estimate_bytes``,
``svmstream.app.models.factory.make_estimator`` and ``ModelConfig``.

Usage: ``python tests/scenarios/model_figures.py``
"""

from __future__ import annotations

import json
import sys

import numpy as np
from sklearn.datasets import make_classification


def _stream(n=3000, d=8, k=2, seed=0, sort=False):
    X, y = make_classification(
        n_samples=n, n_features=d, n_informative=min(d, 5), n_redundant=0, n_classes=k, random_state=seed
    )
    X = X * np.linspace(1.0, 40.0, d)  # raw, unscaled features
    if sort:
        order = np.argsort(y, kind="stable")
        X, y = X[order], y[order]
    return X, y.astype(np.int64)


def _configs():
    from svmstream.app.models.config import ModelConfig

    return {
        "bsgd": ModelConfig(random_state=0, algorithm="bsgd", budget=40, warmup=200, shuffle_buffer=300, selection=False),
        "bsca": ModelConfig(random_state=0, algorithm="bsca", budget=40, warmup=200, shuffle_buffer=300, selection=False),
        "pegasos": ModelConfig(random_state=0, algorithm="bsgd", kernel="linear", warmup=200, shuffle_buffer=300, selection=False),
        "gamma": ModelConfig(random_state=0, algorithm="bsgd", budget=30, gamma=0.01, warmup=100, selection=False),
        "selection": ModelConfig(random_state=0, budget=30, warmup=200, shuffle_buffer=200, selection=True),
        "selection_bytes": ModelConfig(random_state=0, budget=30, warmup=200, shuffle_buffer=200, selection=True,
                                       selection_bytes=2_000_000),
    }  # fmt: skip


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    return value


def run(name, config, k, sort):
    from svmstream.app.models.copies import published
    from svmstream.app.models.factory import make_estimator
    from svmstream.app.models.view import estimator_stats

    X, y = _stream(k=k, sort=sort, seed=k)
    probe = X[::97]
    est = make_estimator(config)
    out = []
    for lo in range(0, X.shape[0], 250):
        hi = lo + 250
        if lo == 0:
            est.partial_fit(X[lo:hi], y[lo:hi], classes=np.arange(k))
        else:
            est.partial_fit(X[lo:hi], y[lo:hi])
        copy = published(est)
        row = {"at": hi, "stats": estimator_stats(est), "published": estimator_stats(copy)}
        try:
            row["decision"] = np.asarray(copy.decision_function(probe)).round(12).tolist()
        except Exception as exc:  # warming up
            row["decision"] = type(exc).__name__
        out.append(row)
    est.flush()
    out.append(
        {"at": "flush", "stats": estimator_stats(est), "decision": est.decision_function(probe).tolist()}
    )
    return out


def estimates():
    from svmstream.app.models.limits import estimate_bytes

    out = {}
    for name, config in _configs().items():
        out[name] = [estimate_bytes(config, d, k) for d in (1, 8, 300, 5000) for k in (2, 3, 7)]
    return out


def main():
    result = {"estimates": estimates()}
    for name, config in _configs().items():
        for k, sort in ((2, False), (3, True)):
            if name == "pegasos" and k == 3:
                continue
            result[f"{name}/{k}/{sort}"] = run(name, config, k, sort)
    json.dump(_jsonable(result), sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
