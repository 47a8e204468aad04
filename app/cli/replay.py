"""``svmstream replay``: a LIBSVM file into a running service, shuffled (``--file-order``:
in the file's order), then ``POST /models/{name}/flush``.

* :func:`run_replay` sends the file to ``POST /learn`` batch by batch (one request in flight
  while the next body is built), then optionally scores a test file through ``/predict``.
* :func:`run_stream_replay` produces the file into the model's Redis stream instead:
  :func:`stream_entries` builds the entries (``docs/stream.md``), :func:`xadd_batch` sends a
  whole batch of ``XADD`` in one round trip (:func:`pack_xadd`), and with ``wait`` it follows
  the service until its consumer has applied the stream.

The file is read by :func:`svmstream.app.jobs.datasets.load_dataset` (``.bz2``/``.gz`` too).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np
import orjson
import redis
from tqdm import tqdm

from svmstream.app.cli.client import DEFAULT_URL, api_token, check_response, http_client
from svmstream.app.cli.main import HYPER_ARGS
from svmstream.app.cli.producer import produce
from svmstream.app.jobs.datasets import load_dataset


class ReplayError(RuntimeError):
    """The service refused a request; the message is the server's."""


def _check(response) -> Any:
    return check_response(response, ReplayError)


def _labels_json(y: np.ndarray) -> np.ndarray:
    return y.astype(np.int64) if np.all(np.mod(y, 1) == 0) else y


def _load(path: str, n_features: int | None = None):
    """``(X, y)`` of a LIBSVM file: X CSR float64 of shape (n, d), y float64 of shape (n,)."""
    return load_dataset(path, n_features=n_features, fmt="libsvm")


def _bodies(
    model: str,
    X,
    y: np.ndarray | None,
    batch: int,
    dense: bool,
    passes: int = 1,
    shuffle_seed: int | None = None,
):
    """Yield ``(n_rows, body_bytes)`` for consecutive row slices: in file order, or, with
    ``shuffle_seed``, in a new permutation per pass drawn from ``default_rng(shuffle_seed)``."""
    opt = orjson.OPT_SERIALIZE_NUMPY
    n = X.shape[0]
    rng = np.random.default_rng(shuffle_seed) if shuffle_seed is not None else None
    X_all, y_all = X, y
    for _ in range(passes):
        if rng is not None:
            perm = rng.permutation(n)
            X, y = X_all[perm], (None if y_all is None else y_all[perm])
        for start in range(0, n, batch):
            stop = min(start + batch, n)
            part = X[start:stop]
            if dense:
                rows: Any = np.ascontiguousarray(part.toarray())
            else:
                rows = [
                    dict(
                        zip(
                            map(str, part.indices[part.indptr[i] : part.indptr[i + 1]].tolist()),
                            part.data[part.indptr[i] : part.indptr[i + 1]].tolist(),
                        )
                    )
                    for i in range(stop - start)
                ]
            obj: dict[str, Any] = {"model": model, "X": rows}
            if y is not None:
                obj["y"] = y[start:stop]
            yield stop - start, orjson.dumps(obj, option=opt)


def _differences(config: dict[str, Any], body: dict[str, Any]) -> list[str]:
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


def _ensure_model(client, model: str, hyper: dict[str, Any], X, y, file: str, out, replace: bool = False):
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
    existing = None if response.status_code == 404 else _check(response)
    differs = _differences(existing["config"], body) if existing is not None else []
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
        info = _check(client.put(f"/models/{model}", json=body))
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
        X, y = _load(file, n_features=model_d)
    return info, X, y


def _order(shuffle_seed: int | None) -> str:
    return "file order" if shuffle_seed is None else f"shuffled (seed {shuffle_seed})"


def _flush(client, model: str, out) -> dict[str, Any]:
    """``POST /models/{model}/flush``: learn what the warm-up window and the shuffle buffer hold."""
    flushed = _check(client.post(f"/models/{model}/flush"))
    print(f"flushed {flushed['flushed']:,} pending examples into model {model!r}", file=out)
    return flushed


def _score(client, model: str, test: str, d: int, batch: int, dense: bool, out) -> dict[str, Any]:
    Xt, yt = _load(test, n_features=d)
    correct = 0
    for start, (rows, body_bytes) in zip(
        range(0, Xt.shape[0], batch), _bodies(model, Xt, None, batch, dense)
    ):
        pred = _check(
            client.post("/predict", content=body_bytes, headers={"content-type": "application/json"})
        )
        truth = yt[start : start + rows]
        got = np.asarray([float(v) if not isinstance(v, str) else np.nan for v in pred["labels"]])
        correct += int(np.sum(got == truth))
    print(
        f"test accuracy on {test}: {100 * correct / Xt.shape[0]:.2f}% ({correct:,}/{Xt.shape[0]:,})", file=out
    )
    return {"test_examples": int(Xt.shape[0]), "test_accuracy": correct / Xt.shape[0]}


def run_replay(
    file: str,
    url: str,
    model: str = "default",
    batch: int = 1000,
    passes: int = 1,
    test: str | None = None,
    hyper: dict[str, Any] | None = None,
    fmt: str = "auto",
    progress: bool = True,
    out=sys.stderr,
    shuffle_seed: int | None = 0,
    token: str | None = None,
    replace: bool = False,
) -> dict[str, Any]:
    """Replay a LIBSVM file into a running service; optionally score a test file.

    The model is created, continued or replaced as :func:`_ensure_model` says.  Batches go in
    a permutation per pass from ``numpy.random.default_rng(shuffle_seed)`` (file order with
    ``shuffle_seed=None``), one request in flight while the next body is built (a
    deterministic order); then ``POST /models/{model}/flush`` learns what is still pending.
    ``token`` is sent as ``Authorization: Bearer``.

    Returns
    -------
    dict
        ``examples``, ``seconds``, ``examples_per_s``, ``model`` (GET /models info), and
        ``test_accuracy``/``test_examples`` when ``test`` is given.

    Raises
    ------
    ReplayError
        If the service rejects a request (message from the server).
    """
    if fmt == "xb":
        raise ReplayError("--format xb is for --redis only (HTTP bodies are JSON)")
    hyper = {k: v for k, v in (hyper or {}).items() if v is not None}
    X, y = _load(file)
    with http_client(url, token) as client:
        info, X, y = _ensure_model(
            client, model, hyper, X, y, file, sys.stderr if out is None else out, replace
        )
        print(f"sending {file} in {_order(shuffle_seed)}", file=out)
        n, d = X.shape
        dense = fmt == "dense" or (fmt == "auto" and X.nnz >= 0.25 * n * d)
        y_json = _labels_json(y)

        bar = _progress_bar(n * passes, "replay", progress, out)
        t0 = time.perf_counter()
        sent, last = _send_in_order(
            client, _bodies(model, X, y_json, batch, dense, passes, shuffle_seed), bar
        )
        bar.close()
        flushed = _flush(client, model, out)
        seconds = time.perf_counter() - t0
        info = _check(client.get(f"/models/{model}"))
        result: dict[str, Any] = {
            "file": file,
            "model_name": model,
            "examples": sent,
            "passes": passes,
            "batch": batch,
            "order": "file" if shuffle_seed is None else f"shuffled (seed {shuffle_seed})",
            "flushed": flushed["flushed"],
            "format": "dense" if dense else "sparse",
            "seconds": seconds,
            "examples_per_s": sent / seconds if seconds > 0 else float("inf"),
            "model": info,
            "last_response": last,
        }
        print(
            f"replayed {sent:,} examples in {seconds:.2f} s: {result['examples_per_s']:,.0f} examples/s "
            f"({info['n_support_vectors']} SVs, {info['n_merges']} merges, {info['n_seen']:,} seen)",
            file=out,
        )
        if test:
            result.update(_score(client, model, test, d, batch, dense, out))
    return result


def _progress_bar(total: int, desc: str, progress: bool, out) -> tqdm:
    return tqdm(
        total=total,
        unit="ex",
        unit_scale=True,
        desc=desc,
        disable=not progress,
        file=out,
        mininterval=0.5,
        smoothing=0.1,
    )


def _send_in_order(client, bodies, bar) -> tuple[int, Any]:
    """``POST /learn`` each ``(n_rows, body)`` in order, one request in flight while the next
    body is built; returns the rows sent and the last answer."""
    sent = 0
    last = None
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="replay-send") as pool:
        pending = None
        for rows, body_bytes in bodies:
            # the next body is ready: wait for the request in flight, then send it
            if pending is not None:
                k, fut = pending
                last = _check(fut.result())
                sent += k
                bar.update(k)
            fut = pool.submit(
                client.post, "/learn", content=body_bytes, headers={"content-type": "application/json"}
            )
            pending = (rows, fut)
        if pending is not None:
            k, fut = pending
            last = _check(fut.result())
            sent += k
            bar.update(k)
    return sent, last


def run_stream_replay(
    file: str,
    redis_url: str,
    model: str = "default",
    batch: int = 1000,
    passes: int = 1,
    fmt: str = "auto",
    stream_key: str = "svmstream:{model}:examples",
    url: str | None = None,
    hyper: dict[str, Any] | None = None,
    wait: bool = False,
    test: str | None = None,
    progress: bool = True,
    out=sys.stderr,
    token: str | None = None,
    shuffle_seed: int | None = 0,
    replace: bool = False,
) -> dict[str, Any]:
    """Produce a LIBSVM file into a model's Redis stream: pipelined XADD, ``batch`` entries
    per round trip, in a seeded permutation per pass (or file order with ``shuffle_seed=None``).

    With ``url`` the model is first created/checked as in :func:`run_replay`; with ``wait``
    (needs ``url``) the call returns once the service's consumer has applied the whole
    stream (``stream.last_applied_id`` reaches the last entry, or nothing is left undelivered
    or pending) and flushed the model; then ``test`` is scored through ``/predict``.

    Returns
    -------
    dict
        ``examples``, ``seconds``, ``examples_per_s`` (production), ``first_id``/``last_id``,
        and, with ``wait``, ``applied_seconds`` and the model info.

    Raises ReplayError on a service error; redis-py errors propagate.
    """
    hyper = {k: v for k, v in (hyper or {}).items() if v is not None}
    X, y = _load(file)
    client = None
    info = None
    if url:
        client = http_client(url, token)
        info, X, y = _ensure_model(client, model, hyper, X, y, file, out, replace)
    elif wait or test:
        raise ReplayError("--wait and --test need --url (the service to follow)")
    n, d = X.shape
    if fmt == "auto":
        fmt = "xb" if X.nnz >= 0.25 * n * d else "sparse"
    key = stream_key.format(model=model)
    print(f"producing {file} in {_order(shuffle_seed)}", file=out)
    r = redis.Redis.from_url(redis_url)
    bar = _progress_bar(n * passes, f"XADD {key}", progress, out)
    t0 = time.perf_counter()
    try:
        first_id, last_id, sent = produce(r, key, X, y, fmt, batch, passes, shuffle_seed, bar.update)
    finally:
        bar.close()
    seconds = time.perf_counter() - t0
    result: dict[str, Any] = {
        "file": file,
        "stream": key,
        "format": fmt,
        "examples": sent,
        "passes": passes,
        "batch": batch,
        "seconds": seconds,
        "examples_per_s": sent / seconds if seconds > 0 else float("inf"),
        "first_id": first_id.decode() if first_id else None,
        "last_id": last_id.decode() if last_id else None,
    }
    print(
        f"produced {sent:,} entries into {key} in {seconds:.2f} s: {result['examples_per_s']:,.0f} entries/s",
        file=out,
    )
    if client is not None:
        try:
            result.update(_follow(client, model, info, result["last_id"], t0, wait, test, d, batch, fmt, out))
        finally:
            client.close()
    return result


def _follow(
    client, model: str, info, last_id, t0: float, wait: bool, test, d: int, batch: int, fmt: str, out
):
    """With ``wait`` (or ``test``): wait until the service applied ``last_id``; with ``test``:
    score it; returns ``applied_seconds`` (when waited), test figures and the ``model`` info."""
    result: dict[str, Any] = {}
    if wait or test:
        result["applied_seconds"] = _wait_applied(client, model, last_id, t0)
        info = _check(client.get(f"/models/{model}"))
        print(
            f"the service applied the stream {result['applied_seconds']:.2f} s after the first XADD "
            f"({info['n_seen']:,} examples seen)",
            file=out,
        )
        result["flushed"] = _flush(client, model, out)["flushed"]
        info = _check(client.get(f"/models/{model}"))
    if test:
        result.update(_score(client, model, test, d, batch, fmt != "sparse", out))
    result["model"] = info
    return result


def _wait_applied(client, model: str, last_id: str | None, t0: float, timeout: float = 3600.0) -> float:
    """Poll ``GET /models/{model}`` until its consumer applied (or dead-lettered) ``last_id``."""
    target = tuple(int(p) for p in last_id.split("-")) if last_id else None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stream = _check(client.get(f"/models/{model}")).get("metrics", {}).get("stream") or {}
        applied = stream.get("last_applied_id")
        if target is None or (applied and tuple(int(p) for p in applied.split("-")) >= target):
            return time.perf_counter() - t0
        if stream.get("lag") == 0 and stream.get("pending") == 0 and stream.get("connected"):
            return time.perf_counter() - t0  # the tail was dead-lettered
        time.sleep(0.1)
    raise ReplayError(f"model {model!r} did not apply the stream within {timeout:.0f} s")


def replay(args: argparse.Namespace) -> int:
    """Run ``svmstream replay``; returns the exit status (0 ok, 1 refused request or bad file,
    2 service or Redis unreachable)."""
    hyper = {k: getattr(args, k) for k in HYPER_ARGS}
    token = api_token(args.token)
    seed = None if args.file_order else args.shuffle_seed
    try:
        if args.redis_url:
            result = run_stream_replay(
                args.file,
                args.redis_url,
                model=args.model,
                batch=args.batch,
                passes=args.passes,
                fmt=args.format,
                stream_key=args.stream_key,
                url=args.url,
                hyper=hyper,
                wait=args.wait,
                test=args.test,
                progress=not args.no_progress,
                token=token,
                shuffle_seed=seed,
                replace=args.replace,
            )
        else:
            result = run_replay(
                args.file,
                args.url or DEFAULT_URL,
                model=args.model,
                batch=args.batch,
                passes=args.passes,
                test=args.test,
                hyper=hyper,
                fmt=args.format,
                progress=not args.no_progress,
                shuffle_seed=seed,
                token=token,
                replace=args.replace,
            )
    except ReplayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:  # missing/unreadable file, or a test file wider than the model
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # httpx/redis transport errors: server down or gone mid-replay
        if isinstance(exc, httpx.HTTPError):
            print(
                f"error: cannot talk to {args.url or DEFAULT_URL}: {type(exc).__name__}: {exc}",
                file=sys.stderr,
            )
            return 2
        if isinstance(exc, redis.RedisError):
            print(
                f"error: cannot talk to Redis at {args.redis_url}: {type(exc).__name__}: {exc}",
                file=sys.stderr,
            )
            return 2
        raise
    if args.json_out:
        print(json.dumps(result))
    return 0
