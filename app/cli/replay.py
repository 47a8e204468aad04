"""``svmstream replay``: a LIBSVM file into a running service, shuffled (``--file-order``:
in the file's order), then ``POST /models/{name}/flush``.

* :func:`run_replay` sends the file to ``POST /learn`` batch by batch (one request in flight
  while the next body is built), then optionally scores a test file through ``/predict``.
* :func:`run_stream_replay` produces the file into the model's Redis stream instead
  (:func:`svmstream.app.cli.producer.produce`: entries as in ``docs/stream.md``, a whole
  batch of ``XADD`` in one round trip), and with ``wait`` it follows the service until its
  consumer has applied the stream.

Rows go as sparse ``{index: value}`` maps or as dense rows (JSON lists; float64 ``xd`` bytes
for Redis, or float32 ``xb`` when asked for), by default as
:func:`svmstream.app.cli.producer.auto_format` says for the file.  A
batch is at most ``batch`` rows **and** at most the service's body limit in bytes
(:class:`svmstream.app.cli.producer.RowSlicer`; ``SVMSTREAM_MAX_BODY_BYTES`` or 64 MiB); a
413 answer lowers the limit to the one the service names and the batch is sent again in
smaller pieces (a refused body is never applied, so nothing is learned twice).

The file is read by :func:`svmstream.app.jobs.datasets.load_dataset` (``.bz2``/``.gz`` too).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import httpx
import redis

from svmstream.app.cli.client import DEFAULT_URL, api_token, http_client
from svmstream.app.cli.main import HYPER_ARGS
from svmstream.app.cli.producer import ByteLimit, auto_format, max_bytes_from_env
from svmstream.app.cli.replay_bodies import ReplayError, check, labels_json, pieces, send_in_order
from svmstream.app.cli.replay_feedback import run_feedback_replay
from svmstream.app.cli.replay_model import ensure_model, flush, load, order, progress_bar, score
from svmstream.app.cli.replay_named import is_named_file, run_named_replay
from svmstream.app.cli.replay_stream import run_stream_replay

__all__ = ["ReplayError", "replay", "run_replay", "run_stream_replay"]


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
    max_bytes: int | None = None,
) -> dict[str, Any]:
    """Replay a LIBSVM file into a running service; optionally score a test file.

    The model is created, continued or replaced as :func:`~svmstream.app.cli.replay_model.ensure_model` says.  Batches go in
    a permutation per pass from ``numpy.random.default_rng(shuffle_seed)`` (file order with
    ``shuffle_seed=None``), one request in flight while the next body is built (a
    deterministic order); then ``POST /models/{model}/flush`` learns what is still pending.
    ``token`` is sent as ``Authorization: Bearer``.  ``fmt``: ``"dense"``, ``"sparse"`` or
    ``"auto"`` (:func:`~svmstream.app.cli.producer.auto_format`).  A body is at most ``batch``
    rows and ``max_bytes`` bytes (default ``SVMSTREAM_MAX_BODY_BYTES`` or 64 MiB; lowered to
    the service's limit by a 413).

    Returns
    -------
    dict
        ``examples``, ``seconds``, ``examples_per_s``, ``format``, ``requests``,
        ``body_bytes`` (total), ``max_body_bytes`` (largest body sent), ``refused_bodies``
        (413 answers, each followed by the same rows in smaller bodies), ``model`` (GET
        /models info), and ``test_accuracy``/``test_examples`` when ``test`` is given.

    Raises
    ------
    ReplayError
        If the service rejects a request (message from the server).
    """
    _check_http_format(fmt)
    limit = ByteLimit(max_bytes if max_bytes is not None else max_bytes_from_env())
    hyper = {k: v for k, v in (hyper or {}).items() if v is not None}
    X, y = load(file)
    with http_client(url, token) as client:
        info, X, y = ensure_model(
            client, model, hyper, X, y, file, sys.stderr if out is None else out, replace
        )
        print(f"sending {file} in {order(shuffle_seed)}", file=out)
        n, d = X.shape
        dense = (auto_format(X) if fmt == "auto" else fmt) == "dense"
        y_json = labels_json(y)
        bar = progress_bar(n * passes, "replay", progress, out)
        t0 = time.perf_counter()
        sent, last, sizes = send_in_order(
            client, pieces(model, X, y_json, batch, dense, passes, shuffle_seed, limit), bar, limit, out
        )
        bar.close()
        flushed = flush(client, model, out)
        seconds = time.perf_counter() - t0
        info = check(client.get(f"/models/{model}"))
        result: dict[str, Any] = {
            "file": file,
            "model_name": model,
            "examples": sent,
            "passes": passes,
            "batch": batch,
            "order": "file" if shuffle_seed is None else f"shuffled (seed {shuffle_seed})",
            "flushed": flushed["flushed"],
            "format": "dense" if dense else "sparse",
            **_body_figures(sizes, limit),
            "seconds": seconds,
            "examples_per_s": sent / seconds if seconds > 0 else float("inf"),
            "model": info,
            "last_response": last,
        }
        _say_replayed(result, out)
        if test:
            result.update(score(client, model, test, d, batch, dense, out, limit))
    return result


def _check_http_format(fmt: str) -> None:
    if fmt in ("xb", "xd"):
        raise ReplayError(f"--format {fmt} is for --redis only (HTTP bodies are JSON)")
    if fmt not in ("auto", "dense", "sparse"):
        raise ReplayError(f"unknown format {fmt!r}: auto, dense or sparse")


def _body_figures(sizes: list[int], limit: ByteLimit) -> dict[str, int]:
    """Requests sent, their total and largest body, and the bodies a 413 refused."""
    return {
        "requests": len(sizes),
        "body_bytes": int(sum(sizes)),
        "max_body_bytes": int(max(sizes, default=0)),
        "refused_bodies": limit.refused,
    }


def _say_replayed(result: dict[str, Any], out) -> None:
    info = result["model"]
    print(
        f"replayed {result['examples']:,} examples in {result['seconds']:.2f} s: "
        f"{result['examples_per_s']:,.0f} examples/s "
        f"({info['n_support_vectors']} SVs, {info['n_merges']} merges, {info['n_seen']:,} seen)",
        file=out,
    )


def _named_replay(args: argparse.Namespace, hyper: dict, token: str | None, seed: int | None) -> dict:
    if args.redis_url or args.test:
        raise ReplayError("a CSV or JSON-lines file replays through HTTP /learn only (no --redis, --test)")
    return run_named_replay(
        args.file, args.url or DEFAULT_URL, model=args.model, batch=args.batch, hyper=hyper,
        label=args.label, weight=args.weight, shuffle_seed=seed, token=token,
    )  # fmt: skip


def _unreachable(exc: Exception, args: argparse.Namespace) -> int | None:
    """2 (and the message) when ``exc`` says the service or Redis cannot be reached, else None."""
    if isinstance(exc, httpx.HTTPError):
        print(
            f"error: cannot talk to {args.url or DEFAULT_URL}: {type(exc).__name__}: {exc}", file=sys.stderr
        )
        return 2
    if isinstance(exc, redis.RedisError):
        print(
            f"error: cannot talk to Redis at {args.redis_url}: {type(exc).__name__}: {exc}", file=sys.stderr
        )
        return 2
    return None


def replay(args: argparse.Namespace) -> int:
    """Run ``svmstream replay``; returns the exit status (0 ok, 1 refused request or bad file,
    2 service or Redis unreachable)."""
    hyper = {k: getattr(args, k) for k in HYPER_ARGS}
    token = api_token(args.token)
    seed = None if args.file_order else args.shuffle_seed
    max_bytes = getattr(args, "max_body_bytes", None)  # a --max-body-bytes option, where the parser has one
    try:
        if getattr(args, "feedback", False):
            result = run_feedback_replay(
                args.file,
                args.url or DEFAULT_URL,
                model=args.model,
                batch=args.batch,
                hyper=hyper,
                warm=args.warm,
                rate=args.rate,
                delay_mean=args.delay_mean,
                shuffle_seed=seed,
                token=token,
                replace=args.replace,
            )
        elif is_named_file(args.file):  # a CSV with a header or JSON lines: named-field events
            result = _named_replay(args, hyper, token, seed)
        elif args.redis_url:
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
                max_bytes=max_bytes,
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
                max_bytes=max_bytes,
            )
    # refused, a missing or unreadable file, a test file wider than the model
    except (ReplayError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # httpx/redis transport errors: server down or gone mid-replay
        status = _unreachable(exc, args)
        if status is None:
            raise
        return status
    if args.json_out:
        print(json.dumps(result))
    return 0
