"""What both replays (HTTP and ``--redis``) do around the rows: read the file, create,
continue or replace the model (:func:`ensure_model`), flush it, score a test file through
``/predict`` and show progress."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from tqdm import tqdm

from svmstream.app.cli.producer import ByteLimit, max_bytes_from_env
from svmstream.app.cli.replay_bodies import ReplayError, check, pieces, post
from svmstream.app.jobs.datasets import load_dataset


def load(path: str, n_features: int | None = None):
    """``(X, y)`` of a LIBSVM file: X CSR float64 of shape (n, d), y float64 of shape (n,)."""
    return load_dataset(path, n_features=n_features, fmt="libsvm")


def differences(config: dict[str, Any], body: dict[str, Any]) -> list[str]:
    """``"budget 500 (model) != 100 (given)"`` for each given hyperparameter the model lacks."""
    out = []
    for key, value in body.items():
        have = config.get(key)
        same = have == value or (
            isinstance(have, (int, float)) and isinstance(value, (int, float)) and float(have) == float(value)
        )
        if not same:
            out.append(f"{key} {json.dumps(have)} (model) != {json.dumps(value)} (given)")
    return out


def ensure_model(client, model: str, hyper: dict[str, Any], X, y, file: str, out, replace: bool = False):
    """Create, continue or replace the model, and say which; returns ``(info, X, y)`` with X
    re-read at the model's d if wider.

    * no such model: ``PUT /models/{model}`` with ``hyper``, the file's dimension and labels,
      and, when ``C`` is given without ``lambda``/``n_samples``, ``n_samples`` = the file's rows
      (λ = 1/(C·n)); with no hyperparameters λ is the service default, 1/30,000 ≈ 3.3e-5 ("created");
    * an existing model and no ``hyper``, or ``hyper`` equal to its configuration: continue it
      ("continued (n_seen=...)");
    * an existing model whose configuration differs from ``hyper``: replace it with ``replace``
      ("replaced"), else :class:`ReplayError` (exit status 1).
    """
    n, d = X.shape
    labels = np.unique(y)
    response = client.get(f"/models/{model}")
    body: dict[str, Any] = {k if k != "lambda_" else "lambda": v for k, v in hyper.items()}
    existing = None if response.status_code == 404 else check(response)
    differs = differences(existing["config"], body) if existing is not None else []
    if existing is not None and differs and not replace:
        raise ReplayError(
            f"model {model!r} exists with other hyperparameters ({'; '.join(differs)}): pass --replace to "
            "replace it with a new model, or give no hyperparameters to continue it"
        )
    if existing is None or differs:
        if "C" in body and "n_samples" not in body and "lambda" not in body:
            body["n_samples"] = int(n)  # C given and the stream's length known: lambda = 1/(C n)
        body["n_features"] = int(d)
        if len(labels) >= 2:
            body["classes"] = [int(v) if float(v).is_integer() else float(v) for v in labels]
        info = check(client.put(f"/models/{model}", json=body))
        print(
            f"model {model!r} {'replaced' if existing else 'created'}: {json.dumps(info['config'])}", file=out
        )
    else:
        info = existing
        print(f"model {model!r} continued (n_seen={info['n_seen']:,})", file=out)
    model_d = info.get("n_features")
    if model_d is not None and model_d != d:
        if d > model_d:
            raise ReplayError(f"{file} has {d} features, model {model!r} expects {model_d}")
        X, y = load(file, n_features=model_d)
    return info, X, y


def order(shuffle_seed: int | None) -> str:
    return "file order" if shuffle_seed is None else f"shuffled (seed {shuffle_seed})"


def flush(client, model: str, out) -> dict[str, Any]:
    """``POST /models/{model}/flush``: learn what the warm-up window and the shuffle buffer hold."""
    flushed = check(client.post(f"/models/{model}/flush"))
    print(f"flushed {flushed['flushed']:,} pending examples into model {model!r}", file=out)
    return flushed


def score(
    client, model: str, test: str, d: int, batch: int, dense: bool, out, limit: ByteLimit | None = None
) -> dict[str, Any]:
    Xt, yt = load(test, n_features=d)
    limit = limit if limit is not None else ByteLimit(max_bytes_from_env())
    correct = 0
    for piece in pieces(model, Xt, None, batch, dense, limit=limit):
        for part, pred in post(client, "/predict", piece, limit, out):
            truth = yt[part.start : part.stop]
            got = np.asarray([float(v) if not isinstance(v, str) else np.nan for v in pred["labels"]])
            correct += int(np.sum(got == truth))
    print(
        f"test accuracy on {test}: {100 * correct / Xt.shape[0]:.2f}% ({correct:,}/{Xt.shape[0]:,})", file=out
    )
    return {"test_examples": int(Xt.shape[0]), "test_accuracy": correct / Xt.shape[0]}


def progress_bar(total: int, desc: str, progress: bool, out) -> tqdm:
    return tqdm(
        total=total,
        unit="ex",
        unit_scale=True,
        desc=desc,
        disable=None if progress else True,  # None: a bar only on a terminal (tqdm)
        file=out,
        mininterval=0.5,
        smoothing=0.1,
    )
