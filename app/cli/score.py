"""``svmstream score``: score versions of a served model on a labelled LIBSVM file.

Each version answers through ``POST /predict {"version": v}`` (``docs/versions.md``); the
command reports, per version, accuracy and (when the model gives probabilities) log-loss, and
for two or more versions the share of rows on which each pair agrees.  Labels are compared as
numbers (the file's) against the served labels.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

import numpy as np

from svmstream.app.cli.client import api_token, check_response, http_client
from svmstream.app.cli.replay_model import load

BATCH = 1000


class ScoreError(RuntimeError):
    """The service refused a request (its status and reason in the message)."""


def _predict(client, model: str, version: int, X, proba: bool) -> tuple[np.ndarray, np.ndarray | None, list]:
    """Labels (and probabilities, with their classes) of every row of X from one version."""
    labels, probas, classes = [], [], []
    for start in range(0, X.shape[0], BATCH):
        rows = X[start : start + BATCH].toarray().tolist()
        body = {"model": model, "x": rows, "version": version, "proba": proba}
        answer = check_response(client.post("/predict", json=body), ScoreError)
        labels.extend(answer["labels"])
        if proba:
            probas.append(np.asarray(answer["proba"], dtype=np.float64))
            classes = answer["classes"]
    return np.asarray(labels, dtype=object), (np.vstack(probas) if proba else None), classes


def _log_loss(y: np.ndarray, proba: np.ndarray, classes: list) -> float:
    """Mean negative log-likelihood of the true labels (probabilities clipped at 1e-15)."""
    index = {float(c): k for k, c in enumerate(classes) if not isinstance(c, str)}
    picked = np.array([proba[i, index[float(t)]] if float(t) in index else 0.0 for i, t in enumerate(y)])
    return float(-np.mean(np.log(np.clip(picked, 1e-15, 1.0))))


def score_versions(client, model: str, versions: list[int], X, y) -> dict[str, Any]:
    """Accuracy, log-loss (None without probabilities) per version, agreement per pair."""
    result: dict[str, Any] = {"model": model, "rows": int(X.shape[0]), "versions": {}, "agreement": {}}
    served = {}
    for v in versions:
        try:
            labels, proba, classes = _predict(client, model, v, X, proba=True)
        except ScoreError as exc:
            if "proba" not in str(exc):
                raise
            labels, proba, classes = _predict(client, model, v, X, proba=False)
        numeric = np.array([float(v_) if not isinstance(v_, str) else math.nan for v_ in labels])
        served[v] = labels
        result["versions"][str(v)] = {
            "accuracy": float(np.mean(numeric == y)),
            "log_loss": None if proba is None else _log_loss(y, proba, classes),
        }
    for i, a in enumerate(versions):
        for b in versions[i + 1 :]:
            result["agreement"][f"{a},{b}"] = float(np.mean(served[a] == served[b]))
    return result


def score(args: argparse.Namespace, out=sys.stdout) -> int:
    """Run ``svmstream score``; 0 on success, 2 when the service refuses."""
    try:
        versions = [int(v) for v in args.versions.split(",") if v.strip()]
    except ValueError:
        print(f"--versions: comma-separated integers, got {args.versions!r}", file=sys.stderr)
        return 2
    X, y = load(args.file)
    with http_client(args.server, api_token(args.token)) as client:
        try:
            d = check_response(client.get(f"/models/{args.model}"), ScoreError).get("n_features")
            if d is not None and X.shape[1] != d:
                X, y = load(args.file, n_features=d)
            result = score_versions(client, args.model, versions, X, y)
        except ScoreError as exc:
            print(f"svmstream score: {exc}", file=sys.stderr)
            return 2
    if args.json_out:
        print(json.dumps(result), file=out)
        return 0
    for v, figures in result["versions"].items():
        loss = "" if figures["log_loss"] is None else f", log-loss {figures['log_loss']:.4f}"
        print(
            f"version {v}: accuracy {100 * figures['accuracy']:.2f}%{loss} on {result['rows']:,} rows",
            file=out,
        )
    for pair, share in result["agreement"].items():
        print(f"versions {pair} agree on {100 * share:.2f}% of the rows", file=out)
    return 0
