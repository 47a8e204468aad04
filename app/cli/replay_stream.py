"""``svmstream replay --redis``: the file produced into the model's Redis stream
(:func:`svmstream.app.cli.producer.produce`), and with ``--wait`` the service followed until
its consumer has applied the stream."""

from __future__ import annotations

import sys
import time
from typing import Any

import redis

from svmstream.app.cli.client import http_client
from svmstream.app.cli.producer import (
    ByteLimit,
    ProduceStats,
    RowTooLarge,
    auto_format,
    max_bytes_from_env,
    produce,
)
from svmstream.app.cli.replay_bodies import ReplayError, check
from svmstream.app.cli.replay_model import ensure_model, flush, load, order, progress_bar, score


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

    With ``url`` the model is first created/checked as in :func:`svmstream.app.cli.replay.run_replay`; with ``wait``
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
    X, y = load(file)
    if not url and (wait or test):
        raise ReplayError("--wait and --test need --url (the service to follow)")
    client = http_client(url, token) if url else None
    info, X, y = ensure_model(client, model, hyper, X, y, file, out, replace) if client else (None, X, y)
    n, d = X.shape
    fmt = auto_format(X, redis=True) if fmt == "auto" else fmt
    key = stream_key.format(model=model)
    print(f"producing {file} in {order(shuffle_seed)}", file=out)
    bar = progress_bar(n * passes, f"XADD {key}", progress, out)
    t0 = time.perf_counter()
    produced = _produce(redis_url, key, X, y, fmt, batch, passes, shuffle_seed, max_bytes, bar)
    first_id, last_id, sent, stats = produced
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
        **_entry_figures(stats, first_id, last_id),
    }
    _say_produced(result, out)
    if client is not None:
        try:
            result.update(
                follow(client, model, info, result["last_id"], t0, wait, test, d, batch, fmt, out, max_bytes)
            )
        finally:
            client.close()
    return result


def _produce(redis_url: str, key: str, X, y, fmt, batch, passes, shuffle_seed, max_bytes, bar):
    """XADD the rows (:func:`~svmstream.app.cli.producer.produce`) with ``bar`` as the progress,
    closed at the end; returns ``(first_id, last_id, sent, stats)``."""
    r = redis.Redis.from_url(redis_url)
    stats = ProduceStats()
    try:
        return (*produce(r, key, X, y, fmt, batch, passes, shuffle_seed, bar.update, max_bytes, stats), stats)
    except RowTooLarge as exc:
        raise ReplayError(str(exc)) from None
    finally:
        bar.close()


def _say_produced(result: dict[str, Any], out) -> None:
    print(
        f"produced {result['examples']:,} {result['format']} entries into {result['stream']} in "
        f"{result['seconds']:.2f} s: {result['examples_per_s']:,.0f} "
        f"entries/s, {result['bytes_per_entry']:,.0f} bytes per entry",
        file=out,
    )


def _entry_figures(stats: ProduceStats, first_id, last_id) -> dict[str, Any]:
    """Mean and largest entry, round trips, the largest one's payload, the first and last ID."""
    return {
        "bytes_per_entry": stats.entry_bytes / stats.entries if stats.entries else 0.0,
        "max_entry_bytes": stats.max_entry_bytes,
        "round_trips": stats.round_trips,
        "max_round_trip_bytes": stats.max_payload_bytes,
        "first_id": first_id.decode() if first_id else None,
        "last_id": last_id.decode() if last_id else None,
    }


def follow(
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
        result["applied_seconds"] = wait_applied(client, model, last_id, t0)
        info = check(client.get(f"/models/{model}"))
        print(
            f"the service applied the stream {result['applied_seconds']:.2f} s after the first XADD "
            f"({info['n_seen']:,} examples seen)",
            file=out,
        )
        result["flushed"] = flush(client, model, out)["flushed"]
        info = check(client.get(f"/models/{model}"))
    if test:
        limit = ByteLimit(max_bytes if max_bytes is not None else max_bytes_from_env())
        result.update(score(client, model, test, d, batch, fmt != "sparse", out, limit))
    result["model"] = info
    return result


def wait_applied(client, model: str, last_id: str | None, t0: float, timeout: float = 3600.0) -> float:
    """Poll ``GET /models/{model}`` until its consumer applied (or dead-lettered) ``last_id``."""
    target = tuple(int(p) for p in last_id.split("-")) if last_id else None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stream = check(client.get(f"/models/{model}")).get("metrics", {}).get("stream") or {}
        applied = stream.get("last_applied_id")
        if target is None or (applied and tuple(int(p) for p in applied.split("-")) >= target):
            return time.perf_counter() - t0
        if stream.get("lag") == 0 and stream.get("pending") == 0 and stream.get("connected"):
            return time.perf_counter() - t0  # the tail was dead-lettered
        time.sleep(0.1)
    raise ReplayError(f"model {model!r} did not apply the stream within {timeout:.0f} s")
