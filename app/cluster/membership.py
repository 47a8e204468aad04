"""Members' heartbeats and the model catalogue in Redis (``docs/cluster.md``).

Keys:

=====================================  ===================================================
``svmstream:cluster:members``          sorted set member -> expiry (ms, Redis clock)
``svmstream:cluster:urls``             hash member -> its advertised URL
``svmstream:cluster:models``           set of every model of the deployment (the catalogue)
``svmstream:cluster:moves``            stream of ownership moves (gained / handed off / lost)
=====================================  ===================================================

A heartbeat (:data:`HEARTBEAT`) sets the member's expiry to Redis's ``TIME`` plus the TTL and
drops the members whose expiry passed, in one script, so that every learner judges liveness by
the same clock.
"""

from __future__ import annotations

import time

from svmstream.app.stream.redis_ops import as_str

PREFIX = "svmstream:cluster"
MEMBERS_KEY = f"{PREFIX}:members"
URLS_KEY = f"{PREFIX}:urls"
MODELS_KEY = f"{PREFIX}:models"
MOVES_KEY = f"{PREFIX}:moves"
MOVES_MAXLEN = 1000

HEARTBEAT = """
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
if ARGV[2] ~= '0' then
  redis.call('zadd', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
else
  redis.call('zrem', KEYS[1], ARGV[1])
end
return redis.call('zrange', KEYS[1], 0, -1)
"""
"""KEYS: members; ARGV: member, ttl ms (0: leave).  The live members after the update."""


def heartbeat(client, member: str, ttl_ms: int) -> list[str]:
    """Renew ``member``'s heartbeat; returns the live members (sorted by expiry)."""
    return [as_str(m) for m in client.eval(HEARTBEAT, 1, MEMBERS_KEY, member, ttl_ms)]


def leave(client, member: str) -> None:
    """Remove ``member`` at once (a graceful shutdown: its models move without waiting)."""
    client.eval(HEARTBEAT, 1, MEMBERS_KEY, member, 0)
    client.hdel(URLS_KEY, member)


def live_members(client) -> list[str]:
    """The members whose heartbeat has not expired (read only)."""
    now_s, now_us = client.time()
    now = now_s * 1000 + now_us // 1000
    return [as_str(m) for m in client.zrangebyscore(MEMBERS_KEY, now, "+inf")]


def catalogue(client) -> set[str]:
    """Every model of the deployment."""
    return {as_str(m) for m in client.smembers(MODELS_KEY)}


def record_move(client, model: str, kind: str, member: str, seconds: float | None, fence: int | None):
    """Append an ownership move to :data:`MOVES_KEY` (the dashboard's list); ``client`` may be
    a pipeline, which sends it with the others queued on it."""
    fields = {"model": model, "kind": kind, "member": member, "at": f"{time.time():.3f}"}
    if seconds is not None:
        fields["seconds"] = f"{seconds:.3f}"
    if fence is not None:
        fields["fence"] = str(fence)
    client.xadd(MOVES_KEY, fields, maxlen=MOVES_MAXLEN, approximate=True)


def recent_moves(client, count: int = 50) -> list[dict[str, str]]:
    """The newest ownership moves, newest first."""
    out = []
    for eid, fields in client.xrevrange(MOVES_KEY, count=count):
        row = {as_str(k): as_str(v) for k, v in fields.items()}
        row["id"] = as_str(eid)
        out.append(row)
    return out
