"""``svmstream replay --feedback``: a LIBSVM file as a stream whose labels arrive later
(``docs/feedback.md``).

The first ``warm`` rows are learned through ``POST /learn`` (and flushed) so the model can
predict.  Every later row *arrives* at simulated time ``i / rate`` and is predicted with
``remember`` (its label is not sent); its label arrives ``delay`` simulated seconds later,
``delay ~ Exponential(mean = delay_mean)`` drawn from ``numpy.random.default_rng(delay_seed)``,
and is sent with its id to ``POST /feedback``.  The events are played in simulated-time order
as fast as the service answers (no sleeping): consecutive arrivals go in one ``/predict`` body,
consecutive labels in one ``/feedback`` body, each at most ``batch`` rows.  So the model
predicts each row with what it had learned by then, i.e. without the labels still "in the air"
(on average ``rate x delay_mean`` of them), which is what the served accuracy then measures.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np
import orjson

from svmstream.app.cli.client import http_client
from svmstream.app.cli.producer import auto_format
from svmstream.app.cli.replay_bodies import check, json_body, labels_json
from svmstream.app.cli.replay_model import ensure_model, flush, load


def schedule(n: int, rate: float, delay_mean: float, seed: int | None) -> list[tuple[str, int, int]]:
    """The simulated-time events of ``n`` rows: ``("predict" | "feedback", first row, last row + 1)``
    runs in time order (a label never comes before its prediction).

    Arrival of row i at ``i / rate``; its label at that plus an exponential delay of mean
    ``delay_mean`` (0: at once)."""
    arrive = np.arange(n) / float(rate)
    delay = np.random.default_rng(seed).exponential(delay_mean, size=n) if delay_mean > 0 else np.zeros(n)
    times = np.concatenate([arrive, arrive + delay])
    kinds = np.concatenate([np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64)])
    rows = np.concatenate([np.arange(n), np.arange(n)])
    order = np.lexsort((rows, kinds, times))  # ties: the prediction first
    return [("feedback" if kinds[k] else "predict", int(rows[k]), int(rows[k]) + 1) for k in order]


def _runs(events: list[tuple[str, int, int]], batch: int):
    """Consecutive events of one kind, at most ``batch`` each: ``(kind, [rows])``."""
    kind, rows = None, []
    for k, row, _ in events:
        if k != kind or len(rows) >= batch:
            if rows:
                yield kind, rows
            kind, rows = k, []
        rows.append(row)
    if rows:
        yield kind, rows


def run_feedback_replay(
    file: str,
    url: str,
    model: str = "default",
    batch: int = 1000,
    hyper: dict[str, Any] | None = None,
    warm: int = 1000,
    rate: float = 100.0,
    delay_mean: float = 10.0,
    delay_seed: int | None = 0,
    shuffle_seed: int | None = 0,
    token: str | None = None,
    replace: bool = False,
    out=sys.stderr,
) -> dict[str, Any]:
    """Replay ``file`` as a delayed-label stream (see the module docstring).

    Returns ``{"examples", "predicted", "learned", "duplicate", "expired", "seconds",
    "served_accuracy", "served_log_loss", "prequential_accuracy", "model"}``.

    Raises ReplayError (a refused request), OSError/ValueError (the file)."""
    hyper = {k: v for k, v in (hyper or {}).items() if v is not None}
    X, y = load(file)
    with http_client(url, token) as client:
        info, X, y = ensure_model(client, model, hyper, X, y, file, out, replace)
        if shuffle_seed is not None:
            perm = np.random.default_rng(shuffle_seed).permutation(X.shape[0])
            X, y = X[perm], y[perm]
        dense = auto_format(X) == "dense"
        y_json = labels_json(y)
        warm = min(warm, X.shape[0])
        t0 = time.perf_counter()
        if warm:
            check(client.post("/learn", content=json_body(model, X, y_json, 0, warm, dense), headers=_JSON))
            flush(client, model, out)
        n = X.shape[0] - warm
        ids: list[str | None] = [None] * n
        counts = {"predicted": 0, "learned": 0, "duplicate": 0, "expired": 0}
        for kind, rows in _runs(schedule(n, rate, delay_mean, delay_seed), batch):
            if kind == "predict":
                body = orjson.loads(json_body(model, X, None, warm + rows[0], warm + rows[-1] + 1, dense))
                body["remember"] = True
                answer = check(client.post("/predict", content=orjson.dumps(body), headers=_JSON))
                ids[rows[0] : rows[-1] + 1] = answer["ids"]
                counts["predicted"] += len(rows)
            else:
                body = {"model": model, "ids": [ids[r] for r in rows], "y": [y_json[warm + r] for r in rows]}
                answer = check(
                    client.post("/feedback", content=orjson.dumps(body, option=_NUMPY), headers=_JSON)
                )
                for key in ("learned", "duplicate", "expired"):
                    counts[key] += answer[key]
        seconds = time.perf_counter() - t0
        info = check(client.get(f"/models/{model}"))
    metrics = info.get("metrics", {})
    result = {
        "file": file,
        "model_name": model,
        "examples": int(X.shape[0]),
        "warm": warm,
        "rate": rate,
        "delay": f"exponential, mean {delay_mean} simulated s (seed {delay_seed})",
        **counts,
        "seconds": seconds,
        "served_accuracy": metrics.get("served_accuracy"),
        "served_log_loss": metrics.get("served_log_loss"),
        "prequential_accuracy": metrics.get("prequential_accuracy"),
        "model": info,
    }
    print(
        f"replayed {n:,} rows with labels delayed ~Exp(mean {delay_mean} s) at {rate:g} rows/s: "
        f"{counts['learned']:,} learned by feedback in {seconds:.2f} s; served accuracy "
        f"{_pct(result['served_accuracy'])}, prequential {_pct(result['prequential_accuracy'])}",
        file=out,
    )
    return result


_JSON = {"content-type": "application/json"}
_NUMPY = orjson.OPT_SERIALIZE_NUMPY


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.2f}%"
