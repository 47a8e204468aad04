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
import re
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
import orjson
import redis
from tqdm import tqdm

from svmstream.app.cli.client import DEFAULT_URL, api_token, check_response, http_client
from svmstream.app.cli.main import HYPER_ARGS
from svmstream.app.cli.producer import (
    ByteLimit,
    ProduceStats,
    RowSlicer,
    RowTooLarge,
    auto_format,
    max_bytes_from_env,
    produce,
)
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


def _body(model: str, X, y: np.ndarray | None, start: int, stop: int, dense: bool) -> bytes:
    """The JSON body of rows ``start:stop`` (dense lists or sparse ``{"index": value}`` maps)."""
    part = X[start:stop]
    if dense:
        rows: Any = np.ascontiguousarray(part.toarray())
    else:
        indices, data, indptr = part.indices.tolist(), part.data.tolist(), part.indptr.tolist()
        rows = [
            dict(zip(map(str, indices[indptr[i] : indptr[i + 1]]), data[indptr[i] : indptr[i + 1]]))
            for i in range(stop - start)
        ]
    obj: dict[str, Any] = {"model": model, "X": rows}
    if y is not None:
        obj["y"] = y[start:stop]
    return orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY)


@dataclass
class _Piece:
    """One request body: rows ``start:stop`` of the matrix its ``slicer`` cuts."""

    rows: int
    body: bytes
    start: int
    stop: int
    slicer: RowSlicer

    def split(self) -> list[_Piece]:
        """The same rows again, in pieces that fit the (lowered) byte limit."""
        try:
            return [
                _Piece(b - a, body, a, b, self.slicer)
                for a, b, body in self.slicer.slices(self.start, self.stop)
            ]
        except RowTooLarge as exc:
            raise ReplayError(str(exc)) from None


def _pieces(
    model: str,
    X,
    y: np.ndarray | None,
    batch: int,
    dense: bool,
    passes: int = 1,
    shuffle_seed: int | None = None,
    limit: ByteLimit | None = None,
) -> Iterator[_Piece]:
    """Request bodies of consecutive row slices of at most ``batch`` rows and ``limit.bytes``
    bytes: in file order, or, with ``shuffle_seed``, in a new permutation per pass drawn from
    ``default_rng(shuffle_seed)``."""
    limit = limit if limit is not None else ByteLimit(max_bytes_from_env())
    n = X.shape[0]
    rng = np.random.default_rng(shuffle_seed) if shuffle_seed is not None else None
    rate = None
    for _ in range(passes):
        Xp, yp = X, y
        if rng is not None:
            perm = rng.permutation(n)
            Xp, yp = X[perm], (None if y is None else y[perm])

        def encode(a: int, b: int, Xp=Xp, yp=yp) -> tuple[bytes, int]:
            body = _body(model, Xp, yp, a, b, dense)
            return body, len(body)

        slicer = RowSlicer(Xp, "dense" if dense else "sparse", batch, limit, encode)
        if rate is not None:
            slicer.rate = rate
        try:
            for a, b, body in slicer.slices():
                yield _Piece(b - a, body, a, b, slicer)
        except RowTooLarge as exc:
            raise ReplayError(str(exc)) from None
        rate = slicer.rate


def _bodies(
    model: str,
    X,
    y: np.ndarray | None,
    batch: int,
    dense: bool,
    passes: int = 1,
    shuffle_seed: int | None = None,
    max_bytes: int | None = None,
):
    """Yield ``(n_rows, body_bytes)`` for consecutive row slices of at most ``batch`` rows and
    ``max_bytes`` bytes (default: :func:`~svmstream.app.cli.producer.max_bytes_from_env`): in
    file order, or, with ``shuffle_seed``, in a new permutation per pass drawn from
    ``default_rng(shuffle_seed)``."""
    limit = ByteLimit(max_bytes if max_bytes is not None else max_bytes_from_env())
    for piece in _pieces(model, X, y, batch, dense, passes, shuffle_seed, limit):
        yield piece.rows, piece.body


_JSON = {"content-type": "application/json"}
_LIMIT_RE = re.compile(r"MAX_BODY_BYTES=(\d+)")


def _lower_limit(response, piece: _Piece, limit: ByteLimit, out) -> bool:
    """On a 413 answer: lower ``limit`` to the service's ``MAX_BODY_BYTES`` (named in its
    message; half the body if it is not, e.g. a proxy's 413) and return True."""
    if response.status_code != 413:
        return False
    found = _LIMIT_RE.search(response.text)
    new = min(int(found.group(1)) if found else len(piece.body) // 2, len(piece.body) - 1)
    if new < 1:
        return False
    limit.bytes = min(limit.bytes, new)
    limit.refused += 1
    print(
        f"the service refused a {len(piece.body):,}-byte body (413): sending at most {limit.bytes:,} bytes "
        "per request from now on",
        file=out,
    )
    return True


def _answers(client, path: str, piece: _Piece, response, limit: ByteLimit, out) -> list[tuple[_Piece, Any]]:
    """``[(piece, answer)]`` of a response; a 413 is answered by sending the piece's rows
    again in pieces under the lowered limit (the refused body was not applied)."""
    if _lower_limit(response, piece, limit, out):
        return [got for sub in piece.split() for got in _post(client, path, sub, limit, out)]
    return [(piece, _check(response))]


def _post(client, path: str, piece: _Piece, limit: ByteLimit, out) -> list[tuple[_Piece, Any]]:
    return _answers(client, path, piece, client.post(path, content=piece.body, headers=_JSON), limit, out)


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


def _score(
    client, model: str, test: str, d: int, batch: int, dense: bool, out, limit: ByteLimit | None = None
) -> dict[str, Any]:
    Xt, yt = _load(test, n_features=d)
    limit = limit if limit is not None else ByteLimit(max_bytes_from_env())
    correct = 0
    for piece in _pieces(model, Xt, None, batch, dense, limit=limit):
        for part, pred in _post(client, "/predict", piece, limit, out):
            truth = yt[part.start : part.stop]
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
    max_bytes: int | None = None,
) -> dict[str, Any]:
    """Replay a LIBSVM file into a running service; optionally score a test file.

    The model is created, continued or replaced as :func:`_ensure_model` says.  Batches go in
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
    if fmt in ("xb", "xd"):
        raise ReplayError(f"--format {fmt} is for --redis only (HTTP bodies are JSON)")
    if fmt not in ("auto", "dense", "sparse"):
        raise ReplayError(f"unknown format {fmt!r}: auto, dense or sparse")
    limit = ByteLimit(max_bytes if max_bytes is not None else max_bytes_from_env())
    hyper = {k: v for k, v in (hyper or {}).items() if v is not None}
    X, y = _load(file)
    with http_client(url, token) as client:
        info, X, y = _ensure_model(
            client, model, hyper, X, y, file, sys.stderr if out is None else out, replace
        )
        print(f"sending {file} in {_order(shuffle_seed)}", file=out)
        n, d = X.shape
        dense = (auto_format(X) if fmt == "auto" else fmt) == "dense"
        y_json = _labels_json(y)

        bar = _progress_bar(n * passes, "replay", progress, out)
        t0 = time.perf_counter()
        sent, last, sizes = _send_in_order(
            client, _pieces(model, X, y_json, batch, dense, passes, shuffle_seed, limit), bar, limit, out
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
            "requests": len(sizes),
            "body_bytes": int(sum(sizes)),
            "max_body_bytes": int(max(sizes, default=0)),
            "refused_bodies": limit.refused,
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
            result.update(_score(client, model, test, d, batch, dense, out, limit))
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


def _send_in_order(client, pieces, bar, limit: ByteLimit, out) -> tuple[int, Any, list[int]]:
    """``POST /learn`` each :class:`_Piece` in order, one request in flight while the next
    body is built; returns the rows sent, the last answer and the size of each body sent."""
    sent = 0
    last = None
    sizes: list[int] = []

    def done(answers: list[tuple[_Piece, Any]]) -> None:
        nonlocal sent, last
        for part, answer in answers:
            last = answer
            sent += part.rows
            sizes.append(len(part.body))
            bar.update(part.rows)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="replay-send") as pool:
        pending = None
        for piece in pieces:
            # the next body is ready: wait for the request in flight, then send it
            if pending is not None:
                done(_answers(client, "/learn", pending[0], pending[1].result(), limit, out))
                pending = None
            if len(piece.body) > limit.bytes:  # built before a 413 lowered the limit
                for sub in piece.split():
                    done(_post(client, "/learn", sub, limit, out))
                continue
            pending = (piece, pool.submit(client.post, "/learn", content=piece.body, headers=_JSON))
        if pending is not None:
            done(_answers(client, "/learn", pending[0], pending[1].result(), limit, out))
    return sent, last, sizes


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
    max_bytes: int | None = None,
) -> dict[str, Any]:
    """Produce a LIBSVM file into a model's Redis stream: pipelined XADD, up to ``batch``
    entries and ``max_bytes`` bytes (default ``SVMSTREAM_MAX_BODY_BYTES`` or 64 MiB) per round
    trip, in a seeded permutation per pass (or file order with ``shuffle_seed=None``).
    ``fmt``: ``"xd"`` (float64 bytes), ``"xb"`` (float32 bytes: the model learns the values
    rounded to float32), ``"dense"``, ``"sparse"`` or ``"auto"``
    (:func:`~svmstream.app.cli.producer.auto_format`: sparse for sparse or wide files, else xd).

    With ``url`` the model is first created/checked as in :func:`run_replay`; with ``wait``
    (needs ``url``) the call returns once the service's consumer has applied the whole
    stream (``stream.last_applied_id`` reaches the last entry, or nothing is left undelivered
    or pending) and flushed the model; then ``test`` is scored through ``/predict``.

    Returns
    -------
    dict
        ``examples``, ``seconds``, ``examples_per_s`` (production), ``format``,
        ``bytes_per_entry`` (mean of an entry's fields and values), ``max_entry_bytes``,
        ``round_trips``, ``max_round_trip_bytes``, ``first_id``/``last_id``, and, with
        ``wait``, ``applied_seconds`` and the model info.

    Raises ReplayError on a service error; redis-py errors propagate.
    """
    if fmt not in ("auto", "xd", "xb", "dense", "sparse"):
        raise ReplayError(f"unknown format {fmt!r}: auto, xd, xb, dense or sparse")
    max_bytes = max_bytes if max_bytes is not None else max_bytes_from_env()
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
        fmt = auto_format(X, redis=True)
    key = stream_key.format(model=model)
    print(f"producing {file} in {_order(shuffle_seed)}", file=out)
    r = redis.Redis.from_url(redis_url)
    bar = _progress_bar(n * passes, f"XADD {key}", progress, out)
    stats = ProduceStats()
    t0 = time.perf_counter()
    try:
        first_id, last_id, sent = produce(
            r, key, X, y, fmt, batch, passes, shuffle_seed, bar.update, max_bytes, stats
        )
    except RowTooLarge as exc:
        raise ReplayError(str(exc)) from None
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
        "bytes_per_entry": stats.entry_bytes / stats.entries if stats.entries else 0.0,
        "max_entry_bytes": stats.max_entry_bytes,
        "round_trips": stats.round_trips,
        "max_round_trip_bytes": stats.max_payload_bytes,
        "first_id": first_id.decode() if first_id else None,
        "last_id": last_id.decode() if last_id else None,
    }
    print(
        f"produced {sent:,} {fmt} entries into {key} in {seconds:.2f} s: {result['examples_per_s']:,.0f} "
        f"entries/s, {result['bytes_per_entry']:,.0f} bytes per entry",
        file=out,
    )
    if client is not None:
        try:
            result.update(
                _follow(client, model, info, result["last_id"], t0, wait, test, d, batch, fmt, out, max_bytes)
            )
        finally:
            client.close()
    return result


def _follow(
    client,
    model: str,
    info,
    last_id,
    t0: float,
    wait: bool,
    test,
    d: int,
    batch: int,
    fmt: str,
    out,
    max_bytes: int | None = None,
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
        limit = ByteLimit(max_bytes if max_bytes is not None else max_bytes_from_env())
        result.update(_score(client, model, test, d, batch, fmt != "sparse", out, limit))
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
    max_bytes = getattr(args, "max_body_bytes", None)  # a --max-body-bytes option, where the parser has one
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
