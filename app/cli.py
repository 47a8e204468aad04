"""Command line: ``svmstream serve`` and ``svmstream replay``.

``svmstream serve`` runs the service with uvicorn (one worker: models live in memory).
``svmstream replay FILE --url URL`` streams a LIBSVM file (``.bz2``/``.gz`` too) into
``POST /learn`` in file order, batch by batch, with a progress bar, then optionally
scores a test file through ``POST /predict``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import numpy as np

HYPER_ARGS = ("budget", "gamma", "C", "lambda_", "n_samples", "random_state")


def _label(text: str) -> Any:
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() else value


def _add_hyper(parser: argparse.ArgumentParser, what: str) -> None:
    g = parser.add_argument_group(f"hyperparameters ({what})")
    g.add_argument("--budget", type=int, help="maximum number of support vectors B")
    g.add_argument("--gamma", type=float, help="RBF width: k(x,x') = exp(-gamma ||x-x'||^2)")
    g.add_argument("--C", dest="C", type=float, help="SVM C (lambda = 1/(C n))")
    g.add_argument("--lambda", dest="lambda_", type=float, help="regularisation lambda (overrides C)")
    g.add_argument("--n-samples", dest="n_samples", type=int, help="n in lambda = 1/(C n)")
    g.add_argument("--random-state", dest="random_state", type=int, help="solver seed")


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
    _add_hyper(serve, "of models created without them, e.g. the default model")

    replay = sub.add_parser("replay", help="stream a LIBSVM file into POST /learn")
    replay.add_argument("file", help="LIBSVM/svmlight file (.bz2 and .gz are read directly)")
    replay.add_argument("--url", default="http://127.0.0.1:8000", help="service URL")
    replay.add_argument("--model", default="default", help="model name (default 'default')")
    replay.add_argument("--batch", type=int, default=1000, help="examples per request (default 1000)")
    replay.add_argument("--passes", type=int, default=1, help="passes over the file, in file order (default 1)")
    replay.add_argument("--test", help="LIBSVM test file scored through /predict afterwards")
    replay.add_argument("--shuffle", dest="shuffle_seed", type=int, metavar="SEED",
                        help="send the rows in a random order (new permutation per pass, fixed by SEED)")
    replay.add_argument("--format", choices=("auto", "dense", "sparse"), default="auto",
                        help="request rows as dense lists or sparse maps (auto: dense if >= 25%% non-zeros)")
    replay.add_argument("--no-progress", action="store_true", help="no progress bar")
    replay.add_argument("--json", dest="json_out", action="store_true", help="print the result as one JSON line")
    _add_hyper(replay, "given: (re)create the model with PUT /models/{name}")
    return parser


# --------------------------------------------------------------------------- serve


def settings_from_args(args: argparse.Namespace):
    """:class:`app.settings.Settings` from the environment, overridden by ``serve`` options."""
    from app.settings import Settings

    overrides: dict[str, Any] = {}
    for key in ("host", "port", "snapshot_dir", "snapshot_interval_s", "snapshot_keep", "max_body_bytes",
                "default_model", "log_level"):
        value = getattr(args, key)
        if value is not None:
            overrides[key] = value
    for key, setting in (("budget", "default_budget"), ("gamma", "default_gamma"), ("C", "default_c"),
                         ("lambda_", "default_lambda"), ("n_samples", "default_n_samples"),
                         ("random_state", "default_random_state"), ("n_features", "default_n_features")):
        value = getattr(args, key)
        if value is not None:
            overrides[setting] = value
    if args.classes:
        overrides["default_classes"] = [_label(c.strip()) for c in args.classes.split(",")]
    return Settings(**overrides)


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from app.main import create_app

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
) -> dict[str, Any]:
    """Replay a LIBSVM file into a running service; optionally score a test file.

    The model is (re)created with ``PUT /models/{model}`` when ``hyper`` has any value or
    the model does not exist, with ``n_samples`` = rows of ``file`` (unless ``lambda`` or
    ``n_samples`` is given), ``n_features`` = the file's dimension and ``classes`` = its
    two labels.  Batches are sent in file order (or, with ``shuffle_seed``, in a
    permutation per pass drawn from ``numpy.random.default_rng(shuffle_seed)``) with one
    request in flight while the next body is being prepared, so the order of application
    is deterministic.

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

    hyper = {k: v for k, v in (hyper or {}).items() if v is not None}
    X, y = load_libsvm(file)
    n, d = X.shape
    labels = np.unique(y)
    with httpx.Client(base_url=url, timeout=httpx.Timeout(600.0, connect=10.0)) as client:
        response = client.get(f"/models/{model}")
        if response.status_code == 404 or hyper:
            body: dict[str, Any] = {k if k != "lambda_" else "lambda": v for k, v in hyper.items()}
            if "n_samples" not in body and "lambda" not in body:
                body["n_samples"] = int(n)
            body["n_features"] = int(d)
            if len(labels) > 2:
                raise ReplayError(f"{file} has {len(labels)} distinct labels; 'bsgd' models are binary")
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
            d = model_d
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
            Xt, yt = load_libsvm(test, n_features=d)
            correct = 0
            for start, (rows, body_bytes) in zip(range(0, Xt.shape[0], batch),
                                                 _bodies(model, Xt, None, batch, dense)):
                pred = _check(client.post("/predict", content=body_bytes, headers={"content-type": "application/json"}))
                truth = yt[start:start + rows]
                got = np.asarray([float(v) if not isinstance(v, str) else np.nan for v in pred["labels"]])
                correct += int(np.sum(got == truth))
            result["test_examples"] = int(Xt.shape[0])
            result["test_accuracy"] = correct / Xt.shape[0]
            print(f"test accuracy on {test}: {100 * result['test_accuracy']:.2f}% ({correct:,}/{Xt.shape[0]:,})", file=out)
    return result


def replay(args: argparse.Namespace) -> int:
    hyper = {k: getattr(args, k) for k in HYPER_ARGS}
    try:
        result = run_replay(
            args.file, args.url, model=args.model, batch=args.batch, passes=args.passes, test=args.test,
            hyper=hyper, fmt=args.format, progress=not args.no_progress, shuffle_seed=args.shuffle_seed,
        )
    except ReplayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:  # missing/unreadable file, or a test file wider than the model
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # httpx transport errors: server down or gone mid-replay
        import httpx

        if isinstance(exc, httpx.HTTPError):
            print(f"error: cannot talk to {args.url}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        raise
    if args.json_out:
        print(json.dumps(result))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``svmstream`` console script."""
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return serve(args)
    return replay(args)


if __name__ == "__main__":
    sys.exit(main())
