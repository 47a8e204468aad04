"""Redis commands of the stream consumer, without its state.

* :func:`make_client`: a redis-py client without automatic retries (see its docstring for why)
  whose ``XREADGROUP`` replies stay raw (flat field lists).
* The consumer lease (``SET NX PX`` semantics, owned by a token): the Lua scripts
  :data:`LEASE_ACQUIRE`, :data:`LEASE_RENEW`, :data:`LEASE_RELEASE`.
* Stream IDs as ``(ms, seq)`` tuples: :func:`parse_id`, :func:`format_id`, :func:`next_id`.
* Entry fields and reply names: :func:`fields_dict`, :func:`as_str`.
* :func:`redis_errors`: the exceptions that mean "Redis went away: reconnect".
* The stateless stream operations of one consumer group: :func:`ensure_group`,
  :func:`claim_dead_consumers`, :func:`ack`, :func:`trim_acked`, :func:`dead_letter`,
  :func:`stream_figures`.

The protocol these serve is described in :mod:`svmstream.app.stream.consumer` and
``docs/stream.md``.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

StreamId = tuple[int, int]

LEASE_ACQUIRE = """
local v = redis.call('get', KEYS[1])
if (not v) or v == ARGV[1] then
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""
"""Take (or re-take) the lease ``KEYS[1]`` for the token ``ARGV[1]`` for ``ARGV[2]`` ms; 1 if ours."""

LEASE_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
"""Extend the lease ``KEYS[1]`` by ``ARGV[2]`` ms if the token ``ARGV[1]`` still holds it."""

LEASE_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""
"""Delete the lease ``KEYS[1]`` if the token ``ARGV[1]`` holds it."""

ACK_CHUNK = 10_000
"""Entry IDs per ``XACK`` command."""


def parse_id(value: bytes | str) -> StreamId:
    """``b"1700000000000-5"`` -> ``(1700000000000, 5)`` (stream IDs order as these tuples)."""
    text = value.decode() if isinstance(value, (bytes, bytearray)) else value
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def format_id(sid: StreamId) -> str:
    return f"{sid[0]}-{sid[1]}"


def next_id(sid: StreamId) -> StreamId:
    """The smallest stream ID greater than ``sid``."""
    return (sid[0], sid[1] + 1)


def as_str(value: Any) -> Any:
    """A reply value as ``str`` when it came as bytes (group and consumer names, IDs)."""
    return value.decode() if isinstance(value, bytes) else value


def fields_dict(fields) -> dict:
    """An entry's fields as a dict (from redis-py's dict or a raw flat list)."""
    if fields is None:
        return {}
    if isinstance(fields, dict):
        return fields
    return dict(zip(fields[::2], fields[1::2]))


def redis_errors() -> tuple[type[BaseException], ...]:
    """The errors after which the consumer reconnects (and runs its recovery)."""
    return (
        redis.ConnectionError,
        redis.TimeoutError,
        redis.BusyLoadingError,
        OSError,
        redis.exceptions.ReadOnlyError,
    )


#: No CLIENT SETINFO on connect: two round trips fewer for each consumer session (a learner
#: gaining 500 models opens 500 connections at once, docs/cluster.md); redis-py 8 spells it
#: ``driver_info=None``, older releases ``lib_name=None, lib_version=None``.
NO_SETINFO = (
    {"driver_info": None}
    if "driver_info" in inspect.signature(redis.Redis.__init__).parameters
    else {"lib_name": None, "lib_version": None}
)


def make_client(url: str, *, timeout: float = 10.0) -> redis.Redis:
    """A redis-py client without automatic command retries.

    A retried ``XREADGROUP ... >`` whose first reply was lost would silently skip the
    entries it had delivered; instead every error ends the session and the recovery
    re-reads the pending entries in order.
    """
    client = redis.Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=3.0,
        retry=Retry(NoBackoff(), 0),
        health_check_interval=0,
        protocol=2,
        **NO_SETINFO,
    )
    # raw XREADGROUP replies ([[key, [[id, [field, value, ...]], ...]]]): the entries are
    # validated from the flat field lists, without building a dict per entry first
    client.set_response_callback("XREADGROUP", _raw_reply)
    return client


def _raw_reply(response, **options):
    return response


def ensure_group(client, key: str, group: str, start_id: str) -> bool:
    """``XGROUP CREATE ... MKSTREAM``; True when created, False when it existed."""
    try:
        client.xgroup_create(key, group, id=start_id, mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise
        return False
    return True


def claim_dead_consumers(client, key: str, group: str, consumer: str) -> int | None:
    """XAUTOCLAIM for ``consumer`` every entry pending for another consumer of ``group``,
    then delete those consumers.

    Returns the number of entries claimed, or None when no other consumer had any pending.
    """
    others = [c for c in client.xinfo_consumers(key, group) if as_str(c["name"]) != consumer]
    if not any(int(c.get("pending", 0)) for c in others):
        for c in others:
            client.xgroup_delconsumer(key, group, c["name"])
        return None
    start = "0-0"
    claimed = 0
    while True:
        reply = client.xautoclaim(key, group, consumer, min_idle_time=0, start_id=start, count=1000)
        cursor, entries = reply[0], reply[1]
        claimed += len(entries)
        start = as_str(cursor)
        if start == "0-0":
            break
    for c in others:
        client.xgroup_delconsumer(key, group, c["name"])
    return claimed


def ack(client, key: str, group: str, ids: list[bytes]) -> None:
    """XACK ``ids`` in one pipelined round trip (:data:`ACK_CHUNK` IDs per command)."""
    pipe = client.pipeline(transaction=False)
    for start in range(0, len(ids), ACK_CHUNK):
        pipe.xack(key, group, *ids[start : start + ACK_CHUNK])
    pipe.execute()


def trim_acked(client, key: str, group: str, acked: StreamId, exact: bool) -> None:
    """``XTRIM MINID`` just above ``acked``, lowered to what other groups still need."""
    bound = next_id(acked)
    for other in client.xinfo_groups(key):
        name = as_str(other["name"])
        if name == group:
            continue
        if other.get("pending"):
            lowest = client.xpending(key, name).get("min")
            if lowest is not None:
                bound = min(bound, parse_id(lowest))
        bound = min(bound, next_id(parse_id(other["last-delivered-id"])))
    if exact:
        client.xtrim(key, minid=format_id(bound), approximate=False)
    else:  # LIMIT 0: no cap on the entries removed per call (the default cap is 100 nodes)
        client.xtrim(key, minid=format_id(bound), approximate=True, limit=0)


def dead_letter(
    client, key: str, group: str, dead_key: str, model: str, bad: list[tuple[bytes, dict, str]], maxlen: int
) -> None:
    """XADD each ``(entry id, fields, reason)`` of ``bad`` to ``dead_key`` and XACK it, in one
    MULTI/EXEC transaction."""
    pipe = client.pipeline(transaction=True)
    now = str(time.time())
    for eid, fields, reason in bad:
        record = {
            b"reason": reason.encode(),
            b"source_id": eid,
            b"source_stream": key.encode(),
            b"model": model.encode(),
            b"dead_at": now.encode(),
        }
        for k, v in (fields or {}).items():
            kb = k.encode() if isinstance(k, str) else k
            record[b"f:" + kb] = v
        pipe.xadd(dead_key, record, maxlen=maxlen, approximate=True)
    pipe.xack(key, group, *[eid for eid, _, _ in bad])
    pipe.execute()


def stream_figures(
    client, key: str, group: str, dead_key: str, durable: StreamId | None, last_id: StreamId | None
) -> dict[str, Any]:
    """``length``, ``pending``, ``lag``, ``lag_seconds``, ``dead_letter_length`` and
    ``last_generated_id`` of ``group`` on ``key`` (XINFO, one pipelined round trip).

    ``durable`` is the last acknowledged ID (for the lag on Redis < 7), ``last_id`` the last
    applied one (for ``lag_seconds``)."""
    pipe = client.pipeline(transaction=False)
    pipe.xinfo_groups(key)
    pipe.xlen(key)
    pipe.xinfo_stream(key)
    pipe.xlen(dead_key)
    groups, length, info, dead_len = pipe.execute()
    mine = next((g for g in groups if as_str(g["name"]) == group), None)
    pending = int(mine["pending"]) if mine else None
    lag = mine.get("lag") if mine else None
    if lag is None and pending is not None:
        # Redis < 7 has no "lag": undelivered = length - pending - acknowledged entries the
        # (approximate) trimming left behind (a few, at or below the last acked ID)
        left = 0
        if durable is not None:
            left = len(client.xrange(key, "-", format_id(durable), count=1001))
        lag = max(0, int(length) - pending - left) if left <= 1000 else None
    newest = info.get("last-generated-id")
    lag_s = None
    if newest is not None and last_id is not None:
        lag_s = max(0.0, (parse_id(newest)[0] - last_id[0]) / 1000.0)
    return {
        "length": int(length),
        "pending": pending,
        "lag": None if lag is None else int(lag),
        "lag_seconds": lag_s,
        "dead_letter_length": int(dead_len),
        "last_generated_id": as_str(newest),
    }
