"""Command line: ``svmstream serve``, ``svmstream replay``, ``svmstream healthcheck`` and
``svmstream train`` (batch solvers, :mod:`app.train_cli`).

``svmstream serve`` runs the service with uvicorn (one worker: models live in memory).
``svmstream replay FILE --url URL`` streams a LIBSVM file (``.bz2``/``.gz`` too) into
``POST /learn`` in file order, batch by batch, with a progress bar, then optionally
scores a test file through ``POST /predict``.  ``svmstream replay FILE --redis URL``
produces the file into the model's Redis stream instead (pipelined XADD, see
``docs/stream.md``).  ``svmstream healthcheck`` exits 0 when ``GET /health`` answers 200
(the container health check; it sends ``SVMSTREAM_API_TOKEN`` if set).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import numpy as np

HYPER_ARGS = ("algorithm", "budget", "gamma", "C", "lambda_", "n_samples", "random_state", "maintenance",
              "merge_solver", "schedule", "eta", "radius", "fit_intercept")
DEFAULT_URL = "http://127.0.0.1:8000"


def _label(text: str) -> Any:
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() else value


def _add_hyper(parser: argparse.ArgumentParser, what: str) -> None:
    g = parser.add_argument_group(f"hyperparameters ({what})")
    g.add_argument("--algorithm", choices=("bsgd", "bsca"), help="bsgd (budgeted SGD) or bsca (budgeted coordinate ascent)")
    g.add_argument("--budget", type=int, help="maximum number of support vectors B")
    g.add_argument("--gamma", type=float, help="RBF width: k(x,x') = exp(-gamma ||x-x'||^2)")
    g.add_argument("--C", dest="C", type=float, help="SVM C (lambda = 1/(C n))")
    g.add_argument("--lambda", dest="lambda_", type=float, help="regularisation lambda (overrides C)")
    g.add_argument("--n-samples", dest="n_samples", type=int, help="n in lambda = 1/(C n)")
    g.add_argument("--random-state", dest="random_state", type=int, help="solver seed")
    g.add_argument("--maintenance", choices=("merge", "remove", "project"), help="budget maintenance strategy")
    g.add_argument("--merge-solver", dest="merge_solver", choices=("gss", "gss-precise", "lookup-h", "lookup-wd"),
                   help="how merging finds h")
    g.add_argument("--schedule", choices=("pegasos", "norma", "perceptron"), help="bsgd learning-rate schedule")
    g.add_argument("--eta", type=float, help="bsgd: base learning rate of norma/perceptron")
    g.add_argument("--radius", type=float, help="bsgd perceptron: radius U of the ball")
    g.add_argument("--fit-intercept", dest="fit_intercept", action="store_const", const=True,
                   help="bsgd: learn a bias b")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="svmstream", description="Streaming budgeted kernel SVM service.")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTP service (one uvicorn worker)")
    serve.add_argument("--host", help="bind address (default 127.0.0.1; env SVMSTREAM_HOST)")
    serve.add_argument("--port", type=int, help="port (default 8000; env SVMSTREAM_PORT)")
    serve.add_argument("--snapshot-dir", help="snapshot directory (default ./snapshots)")
    serve.add_argument("--snapshot-interval", dest="snapshot_interval_s", type=float, help="seconds between snapshots (default 30)")
    serve.add_argument("--snapshot-keep", type=int, help="snapshots kept per model (default 3)")
    serve.add_argument("--max-body-bytes", type=int, help="largest accepted request body (default 64 MiB)")
    serve.add_argument("--default-model", help="name of the model created at start (default 'default')")
    serve.add_argument("--n-features", dest="n_features", type=int, help="input dimension of the default model")
    serve.add_argument("--classes", help="labels of the default model, comma separated; write --classes=-1,1 (default -1,1)")
    serve.add_argument("--log-level", default=None, help="debug, info, warning, ...")
    serve.add_argument("--redis-url", help="consume Redis streams from this URL (env SVMSTREAM_REDIS_URL; default: off)")
    serve.add_argument("--stream-models", help="models that consume their stream: '*' or comma-separated names")
    _add_hyper(serve, "of models created without them, e.g. the default model")

    replay = sub.add_parser("replay", help="stream a LIBSVM file into POST /learn, or into a Redis stream")
    replay.add_argument("file", help="LIBSVM/svmlight file (.bz2 and .gz are read directly)")
    replay.add_argument("--url", default=None,
                        help=f"service URL (default {DEFAULT_URL}); with --redis only used to create the model and, "
                             "with --wait/--test, to follow it")
    replay.add_argument("--redis", dest="redis_url", help="produce into the model's Redis stream at this URL (XADD)")
    replay.add_argument("--stream-key", default="svmstream:{model}:examples",
                        help="stream key pattern for --redis (default svmstream:{model}:examples)")
    replay.add_argument("--wait", action="store_true",
                        help="with --redis and --url: wait until the service has applied the whole stream")
    replay.add_argument("--token", default=None,
                        help="API token for the service (default: env SVMSTREAM_API_TOKEN)")
    replay.add_argument("--model", default="default", help="model name (default 'default')")
    replay.add_argument("--batch", type=int, default=1000, help="examples per request (default 1000)")
    replay.add_argument("--passes", type=int, default=1, help="passes over the file, in file order (default 1)")
    replay.add_argument("--test", help="LIBSVM test file scored through /predict afterwards")
    replay.add_argument("--shuffle", dest="shuffle_seed", type=int, metavar="SEED",
                        help="send the rows in a random order (new permutation per pass, fixed by SEED)")
    replay.add_argument("--format", choices=("auto", "dense", "sparse", "xb"), default="auto",
                        help="rows as dense lists, sparse maps, or (--redis only) float32 bytes 'xb' "
                             "(auto: dense (HTTP) / xb (Redis) if >= 25%% non-zeros, else sparse)")
    replay.add_argument("--no-progress", action="store_true", help="no progress bar")
    replay.add_argument("--json", dest="json_out", action="store_true", help="print the result as one JSON line")
    _add_hyper(replay, "given: (re)create the model with PUT /models/{name}")

    health = sub.add_parser("healthcheck", help="exit 0 if GET /health answers 200 (container health check)")
    health.add_argument("--url", default=None,
                        help="service URL (default http://127.0.0.1:$SVMSTREAM_PORT, port 8000)")
    health.add_argument("--timeout", type=float, default=5.0)

    from svmstream.app.cli.train import add_train_parser

    add_train_parser(sub)  # svmstream train (app/train_cli.py, docs/jobs.md)
    return parser


# --------------------------------------------------------------------------- serve


def settings_from_args(args: argparse.Namespace):
    """:class:`app.settings.Settings` from the environment, overridden by ``serve`` options."""
    from svmstream.app.settings import Settings

    overrides: dict[str, Any] = {}
    for key in ("host", "port", "snapshot_dir", "snapshot_interval_s", "snapshot_keep", "max_body_bytes",
                "default_model", "log_level", "redis_url", "stream_models"):
        value = getattr(args, key)
        if value is not None:
            overrides[key] = value
    for key, setting in (("budget", "default_budget"), ("gamma", "default_gamma"), ("C", "default_c"),
                         ("lambda_", "default_lambda"), ("n_samples", "default_n_samples"),
                         ("random_state", "default_random_state"), ("n_features", "default_n_features"),
                         ("algorithm", "default_algorithm"), ("maintenance", "default_maintenance"),
                         ("merge_solver", "default_merge_solver"), ("schedule", "default_schedule"),
                         ("eta", "default_eta"), ("radius", "default_radius"),
                         ("fit_intercept", "default_fit_intercept")):
        value = getattr(args, key)
        if value is not None:
            overrides[setting] = value
    if args.classes:
        overrides["default_classes"] = [_label(c.strip()) for c in args.classes.split(",")]
    return Settings(**overrides)


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from svmstream.app.main import create_app

    settings = settings_from_args(args)
    uvicorn.run(
        create_app(settings), host=settings.host, port=settings.port, workers=1,
        log_level=settings.log_level.lower(), timeout_graceful_shutdown=30,
    )
    return 0


# --------------------------------------------------------------------------- replay


class ReplayError(RuntimeError):
    """The service refused a request; the message is the server's."""


def _check(response) -> Any:
    if response.status_code >= 400:
        try:
            detail = response.json().get("detail")
        except Exception:
            detail = response.text[:500]
        raise ReplayError(f"{response.request.method} {response.request.url.path} -> {response.status_code}: {detail}")
    return response.json()


def _labels_json(y: np.ndarray) -> np.ndarray:
    return y.astype(np.int64) if np.all(np.mod(y, 1) == 0) else y


def load_libsvm(path: str, n_features: int | None = None):
    """``(X, y)`` of a LIBSVM file: X CSR float64 of shape (n, d), y float64 of shape (n,)."""
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(path, n_features=n_features, dtype=np.float64)
    return X.tocsr(), y


def _bodies(model: str, X, y: np.ndarray | None, batch: int, dense: bool, passes: int = 1,
            shuffle_seed: int | None = None):
    """Yield ``(n_rows, body_bytes)`` for consecutive row slices: in file order, or, with
    ``shuffle_seed``, in a new permutation per pass drawn from ``default_rng(shuffle_seed)``."""
    import orjson

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
                    dict(zip(map(str, part.indices[part.indptr[i]:part.indptr[i + 1]].tolist()),
                             part.data[part.indptr[i]:part.indptr[i + 1]].tolist()))
                    for i in range(stop - start)
                ]
            obj: dict[str, Any] = {"model": model, "X": rows}
            if y is not None:
                obj["y"] = y[start:stop]
            yield stop - start, orjson.dumps(obj, option=opt)


def _auth_headers(token: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"} if token else {}


def _ensure_model(client, model: str, hyper: dict[str, Any], X, y, file: str, out):
    """Create the model with ``PUT /models/{model}`` when ``hyper`` has a value or the model
    does not exist; returns ``(info, X, y)`` with X re-read at the model's d if wider."""
    n, d = X.shape
    labels = np.unique(y)
    response = client.get(f"/models/{model}")
    if response.status_code == 404 or hyper:
        body: dict[str, Any] = {k if k != "lambda_" else "lambda": v for k, v in hyper.items()}
        if "n_samples" not in body and "lambda" not in body:
            body["n_samples"] = int(n)
        body["n_features"] = int(d)
        if len(labels) > 2:
            raise ReplayError(f"{file} has {len(labels)} distinct labels; the service's models are binary")
        if len(labels) == 2:
            body["classes"] = [int(v) if float(v).is_integer() else float(v) for v in labels]
        info = _check(client.put(f"/models/{model}", json=body))
        print(f"model {model!r} created: {json.dumps(info['config'])}", file=out)
    else:
        info = _check(response)
    model_d = info.get("n_features")
    if model_d is not None and model_d != d:
        if d > model_d:
            raise ReplayError(f"{file} has {d} features, model {model!r} expects {model_d}")
        X, y = load_libsvm(file, n_features=model_d)
    return info, X, y


def _score(client, model: str, test: str, d: int, batch: int, dense: bool, out) -> dict[str, Any]:
    Xt, yt = load_libsvm(test, n_features=d)
    correct = 0
    for start, (rows, body_bytes) in zip(range(0, Xt.shape[0], batch), _bodies(model, Xt, None, batch, dense)):
        pred = _check(client.post("/predict", content=body_bytes, headers={"content-type": "application/json"}))
        truth = yt[start:start + rows]
        got = np.asarray([float(v) if not isinstance(v, str) else np.nan for v in pred["labels"]])
        correct += int(np.sum(got == truth))
    print(f"test accuracy on {test}: {100 * correct / Xt.shape[0]:.2f}% ({correct:,}/{Xt.shape[0]:,})", file=out)
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
    shuffle_seed: int | None = None,
    token: str | None = None,
) -> dict[str, Any]:
    """Replay a LIBSVM file into a running service; optionally score a test file.

    The model is (re)created with ``PUT /models/{model}`` when ``hyper`` has any value or
    the model does not exist, with ``n_samples`` = rows of ``file`` (unless ``lambda`` or
    ``n_samples`` is given), ``n_features`` = the file's dimension and ``classes`` = its
    two labels.  Batches are sent in file order (or, with ``shuffle_seed``, in a
    permutation per pass drawn from ``numpy.random.default_rng(shuffle_seed)``) with one
    request in flight while the next body is being prepared, so the order of application
    is deterministic.  ``token`` is sent as ``Authorization: Bearer``.

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
    import httpx
    from tqdm import tqdm

    if fmt == "xb":
        raise ReplayError("--format xb is for --redis only (HTTP bodies are JSON)")
    hyper = {k: v for k, v in (hyper or {}).items() if v is not None}
    X, y = load_libsvm(file)
    with httpx.Client(base_url=url, timeout=httpx.Timeout(600.0, connect=10.0), headers=_auth_headers(token)) as client:
        info, X, y = _ensure_model(client, model, hyper, X, y, file, sys.stderr if out is None else out)
        n, d = X.shape
        dense = fmt == "dense" or (fmt == "auto" and X.nnz >= 0.25 * n * d)
        y_json = _labels_json(y)

        total = n * passes
        bar = tqdm(total=total, unit="ex", unit_scale=True, desc="replay", disable=not progress, file=out,
                   mininterval=0.5, smoothing=0.1)
        sent = 0
        last = None
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="replay-send") as pool:
            pending = None
            for rows, body_bytes in _bodies(model, X, y_json, batch, dense, passes, shuffle_seed):
                # the next body is ready: wait for the request in flight, then send it
                if pending is not None:
                    k, fut = pending
                    last = _check(fut.result())
                    sent += k
                    bar.update(k)
                fut = pool.submit(client.post, "/learn", content=body_bytes,
                                  headers={"content-type": "application/json"})
                pending = (rows, fut)
            if pending is not None:
                k, fut = pending
                last = _check(fut.result())
                sent += k
                bar.update(k)
        seconds = time.perf_counter() - t0
        bar.close()
        info = _check(client.get(f"/models/{model}"))
        result: dict[str, Any] = {
            "file": file, "model_name": model, "examples": sent, "passes": passes, "batch": batch,
            "order": "file" if shuffle_seed is None else f"shuffled (seed {shuffle_seed})",
            "format": "dense" if dense else "sparse", "seconds": seconds,
            "examples_per_s": sent / seconds if seconds > 0 else float("inf"),
            "model": info, "last_response": last,
        }
        print(
            f"replayed {sent:,} examples in {seconds:.2f} s: {result['examples_per_s']:,.0f} examples/s "
            f"({info['n_support_vectors']} SVs, {info['n_merges']} merges, {info['n_seen']:,} seen)",
            file=out,
        )
        if test:
            result.update(_score(client, model, test, d, batch, dense, out))
    return result


def _label_bytes(v: float) -> bytes:
    return str(int(v) if float(v).is_integer() else float(v)).encode()


def stream_entries(X, y: np.ndarray, fmt: str, start: int, stop: int) -> list[dict[bytes, bytes]]:
    """Stream entries (see ``docs/stream.md``) of rows ``start:stop`` of a CSR matrix.

    ``fmt``: ``"xb"`` (little-endian float32 bytes, dense), ``"dense"`` (``x`` = JSON list)
    or ``"sparse"`` (``x`` = JSON ``{"index": value}`` with 0-based indices).
    """
    import orjson

    part = X[start:stop]
    labels = [_label_bytes(v) for v in y[start:stop]]
    if fmt == "xb":
        block = np.ascontiguousarray(part.toarray(), dtype="<f4")
        return [{b"y": lab, b"xb": row.tobytes()} for lab, row in zip(labels, block)]
    if fmt == "dense":
        block = part.toarray()
        return [{b"y": lab, b"x": orjson.dumps(row, option=orjson.OPT_SERIALIZE_NUMPY)} for lab, row in zip(labels, block)]
    out = []
    for i, lab in enumerate(labels):
        lo, hi = part.indptr[i], part.indptr[i + 1]
        row = dict(zip(map(str, part.indices[lo:hi].tolist()), part.data[lo:hi].tolist()))
        out.append({b"y": lab, b"x": orjson.dumps(row)})
    return out


def pack_xadd(key: str, entries: list[dict[bytes, bytes]]) -> bytes:
    """RESP encoding of ``XADD key * field value ...`` for each entry, concatenated (one
    write for a whole batch; about 5x less client CPU than redis-py's pipeline)."""
    kb = key.encode()
    out = []
    for fields in entries:
        parts = [b"*%d\r\n$4\r\nXADD\r\n$%d\r\n%s\r\n$1\r\n*\r\n" % (3 + 2 * len(fields), len(kb), kb)]
        for k, v in fields.items():
            parts.append(b"$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v))
        out.append(b"".join(parts))
    return b"".join(out)


def xadd_batch(client, key: str, entries: list[dict[bytes, bytes]]) -> list[bytes]:
    """XADD ``entries`` (fields and values as bytes) to ``key`` in one round trip, in order;
    returns their IDs.

    Raises
    ------
    redis.RedisError
        On a connection error or an error reply (e.g. the key holds another type).
    """
    conn = client.connection_pool.get_connection()
    try:
        conn.send_packed_command([pack_xadd(key, entries)])
        replies = [conn.read_response() for _ in entries]
    except BaseException:
        conn.disconnect()  # replies may be left unread: never reuse this connection
        raise
    finally:
        client.connection_pool.release(conn)
    return replies


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
    shuffle_seed: int | None = None,
) -> dict[str, Any]:
    """Produce a LIBSVM file into a model's Redis stream: pipelined XADD, ``batch`` entries
    per round trip, in file order (or a seeded permutation per pass).

    With ``url`` the model is first created/checked as in :func:`run_replay`; with ``wait``
    (needs ``url``) the call returns once the service's consumer has applied the whole
    stream (the model's ``stream.last_applied_id`` reaches the last entry produced, or no
    entry is left undelivered or pending), then ``test`` is scored through ``/predict``.

    Returns
    -------
    dict
        ``examples``, ``seconds``, ``examples_per_s`` (production), ``first_id``/``last_id``,
        and, with ``wait``, ``applied_seconds`` and the model info.

    Raises
    ------
    ReplayError
        On a service error; redis-py errors propagate.
    """
    import redis
    from tqdm import tqdm

    hyper = {k: v for k, v in (hyper or {}).items() if v is not None}
    X, y = load_libsvm(file)
    client = None
    info = None
    if url:
        import httpx

        client = httpx.Client(base_url=url, timeout=httpx.Timeout(600.0, connect=10.0), headers=_auth_headers(token))
        info, X, y = _ensure_model(client, model, hyper, X, y, file, out)
    elif wait or test:
        raise ReplayError("--wait and --test need --url (the service to follow)")
    n, d = X.shape
    if fmt == "auto":
        fmt = "xb" if X.nnz >= 0.25 * n * d else "sparse"
    key = stream_key.format(model=model)
    r = redis.Redis.from_url(redis_url)
    bar = tqdm(total=n * passes, unit="ex", unit_scale=True, desc=f"XADD {key}", disable=not progress, file=out,
               mininterval=0.5, smoothing=0.1)
    rng = np.random.default_rng(shuffle_seed) if shuffle_seed is not None else None
    first_id = last_id = None
    sent = 0
    t0 = time.perf_counter()
    try:
        for _ in range(passes):
            Xp, yp = X, y
            if rng is not None:
                perm = rng.permutation(n)
                Xp, yp = X[perm], y[perm]
            for start in range(0, n, batch):
                entries = stream_entries(Xp, yp, fmt, start, min(start + batch, n))
                ids = xadd_batch(r, key, entries)
                first_id = first_id or ids[0]
                last_id = ids[-1]
                sent += len(entries)
                bar.update(len(entries))
    finally:
        bar.close()
    seconds = time.perf_counter() - t0
    result: dict[str, Any] = {
        "file": file, "stream": key, "format": fmt, "examples": sent, "passes": passes, "batch": batch,
        "seconds": seconds, "examples_per_s": sent / seconds if seconds > 0 else float("inf"),
        "first_id": first_id.decode() if first_id else None, "last_id": last_id.decode() if last_id else None,
    }
    print(f"produced {sent:,} entries into {key} in {seconds:.2f} s: {result['examples_per_s']:,.0f} entries/s",
          file=out)
    if client is not None:
        try:
            if wait or test:
                result["applied_seconds"] = _wait_applied(client, model, last_id.decode() if last_id else None, t0)
                info = _check(client.get(f"/models/{model}"))
                print(f"the service applied the stream {result['applied_seconds']:.2f} s after the first XADD "
                      f"({info['n_seen']:,} examples seen)", file=out)
            if test:
                result.update(_score(client, model, test, d, batch, fmt != "sparse", out))
            result["model"] = info
        finally:
            client.close()
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
    import os

    hyper = {k: getattr(args, k) for k in HYPER_ARGS}
    token = args.token or os.environ.get("SVMSTREAM_API_TOKEN") or None
    try:
        if args.redis_url:
            result = run_stream_replay(
                args.file, args.redis_url, model=args.model, batch=args.batch, passes=args.passes, fmt=args.format,
                stream_key=args.stream_key, url=args.url, hyper=hyper, wait=args.wait, test=args.test,
                progress=not args.no_progress, token=token, shuffle_seed=args.shuffle_seed,
            )
        else:
            result = run_replay(
                args.file, args.url or DEFAULT_URL, model=args.model, batch=args.batch, passes=args.passes,
                test=args.test, hyper=hyper, fmt=args.format, progress=not args.no_progress,
                shuffle_seed=args.shuffle_seed, token=token,
            )
    except ReplayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:  # missing/unreadable file, or a test file wider than the model
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # httpx/redis transport errors: server down or gone mid-replay
        import httpx
        import redis

        if isinstance(exc, httpx.HTTPError):
            print(f"error: cannot talk to {args.url or DEFAULT_URL}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        if isinstance(exc, redis.RedisError):
            print(f"error: cannot talk to Redis at {args.redis_url}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        raise
    if args.json_out:
        print(json.dumps(result))
    return 0


def healthcheck(args: argparse.Namespace) -> int:
    """``GET /health`` with the token from ``SVMSTREAM_API_TOKEN`` (if any); 0 on 200."""
    import os
    import urllib.request

    url = args.url or f"http://127.0.0.1:{os.environ.get('SVMSTREAM_PORT', '8000')}"
    request = urllib.request.Request(url.rstrip("/") + "/health", headers=_auth_headers(
        os.environ.get("SVMSTREAM_API_TOKEN") or None))
    try:
        with urllib.request.urlopen(request, timeout=args.timeout) as response:
            ok = response.status == 200
    except Exception as exc:
        print(f"unhealthy: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``svmstream`` console script."""
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return serve(args)
    if args.command == "healthcheck":
        return healthcheck(args)
    if args.command == "train":
        from svmstream.app.cli.train import train

        return train(args)
    return replay(args)


if __name__ == "__main__":
    sys.exit(main())
