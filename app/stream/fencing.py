"""Fenced Redis operations of a clustered learner (``docs/cluster.md``).

With several learners (``SVMSTREAM_CLUSTER=true``) a model's lease key
``<stream key>:lease`` holds ``"<member>|<fence>"``, where ``fence`` is the value of the
counter ``<stream key>:fence`` when the lease was taken: it increases with every hand-off
(Kleppmann's fencing token).  Every write a learner makes for a model is checked against the
lease *inside Redis*, in the same script as the write, so a learner that lost the lease (paused,
partitioned, slow) cannot read, acknowledge or publish for that model any more:

* :data:`ACQUIRE`: take a free lease with the next fence (``SET NX PX`` semantics in Lua);
* :data:`RENEW`: extend it if still ours (compare-and-set); :data:`RENEW_MANY` for many leases;
* :data:`RELEASE`: delete it if still ours;
* :data:`READ`: ``XREADGROUP`` (no BLOCK, scripts cannot block) only while the lease is ours;
  on an empty read it returns the newest entry's ID, from which the caller waits with a plain
  ``XREAD BLOCK`` (which changes nothing in the group) before reading again.  Its reply passes
  through Lua (each entry becomes a Lua table and back): ~10 us of Redis CPU per entry more than
  a plain ``XREADGROUP``, so a backlog is read by :func:`watched_read` instead (the same fence
  by ``WATCH``/``MULTI``/``EXEC``, three round trips), and :class:`FencedReader` picks one of
  the two per read;
* :data:`ACK`: ``XACK`` only while the lease is ours;
* :data:`SNAPSHOT_OK`: may a snapshot file of the model be written now (lease ours, or a
  brand-new model nobody holds and the catalogue does not list yet);
* :data:`PUBLISH`: the replication write of a version (``svmstream:replication:*``) only while
  the lease is ours.

Each script returns ``-1`` (or raises nothing and writes nothing) when the lease is not ours:
:class:`Fenced` is raised by the Python helpers below.
"""

from __future__ import annotations

from redis import exceptions as redis_exceptions


class Fenced(RuntimeError):
    """This learner no longer holds the model's lease: the write was refused."""


ACQUIRE = """
local v = redis.call('get', KEYS[1])
if v then
  if v == ARGV[1] .. '|' .. (ARGV[3] or '') then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return tonumber(ARGV[3])
  end
  return -1
end
local fence = redis.call('incr', KEYS[2])
redis.call('set', KEYS[1], ARGV[1] .. '|' .. fence, 'PX', ARGV[2])
return fence
"""
"""KEYS: lease, fence counter; ARGV: member, ttl ms[, fence already held].  The fence taken
(or kept), -1 when another member holds the lease."""

RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return -1
"""
"""KEYS: lease; ARGV: token (``member|fence``), ttl ms.  1 when extended, -1 when not ours."""

RENEW_MANY = """
local out = {}
local ttl = ARGV[#ARGV]
for i, key in ipairs(KEYS) do
  if redis.call('get', key) == ARGV[i] then
    out[i] = redis.call('pexpire', key, ttl)
  else
    out[i] = -1
  end
end
return out
"""
"""KEYS: leases; ARGV: their tokens, then the ttl ms.  Per lease 1 when extended, -1 when not
ours: a heartbeat renews every lease of a member in one command (:func:`~svmstream.app.cluster.leases.beat`)."""

RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return -1
"""

READ = """
if redis.call('get', KEYS[2]) ~= ARGV[1] then
  return -1
end
local r = redis.call('xreadgroup', 'GROUP', ARGV[2], ARGV[3], 'COUNT', ARGV[4], 'STREAMS', KEYS[1], ARGV[5])
if r then
  return r
end
local last = redis.call('xrevrange', KEYS[1], '+', '-', 'COUNT', 1)
if last[1] then
  return last[1][1]
end
return '0-0'
"""
"""KEYS: stream, lease; ARGV: token, group, consumer, count, cursor.  The XREADGROUP reply;
on no entries the newest entry's ID (a string); -1 when not ours."""

ACK = """
if redis.call('get', KEYS[2]) ~= ARGV[1] then
  return -1
end
return redis.call('xack', KEYS[1], ARGV[2], unpack(ARGV, 3))
"""
"""KEYS: stream, lease; ARGV: token, group, ids...  The count acknowledged; -1 when not ours."""

SNAPSHOT_OK = """
local v = redis.call('get', KEYS[1])
if v then
  if v == ARGV[1] then return 1 end
  return -1
end
if redis.call('sismember', KEYS[2], ARGV[2]) == 1 then
  return -1
end
return 1
"""
"""KEYS: lease, catalogue set; ARGV: token (or ''), model.  1 when a snapshot may be written."""

PUBLISH = """
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return -1
end
redis.call('hset', KEYS[2], 'version', ARGV[3], 'serving', ARGV[4])
redis.call('hdel', KEYS[2], 'blob')
redis.call('hset', KEYS[3], ARGV[2], ARGV[3])
redis.call('publish', KEYS[4], ARGV[5])
return 1
"""
"""KEYS: lease, model hash, versions hash, channel; ARGV: token, model, version, bytes,
announcement.  1 when published, -1 when not ours."""

ACK_CHUNK = 5_000
"""Entry IDs per fenced XACK call (Lua ``unpack`` has a stack limit)."""


def fenced_ack(client, key: str, lease_key: str, token: str, group: str, ids: list[bytes]) -> None:
    """XACK ``ids`` while ``token`` holds ``lease_key``; raises :class:`Fenced` otherwise."""
    for start in range(0, len(ids), ACK_CHUNK):
        if client.eval(ACK, 2, key, lease_key, token, group, *ids[start : start + ACK_CHUNK]) == -1:
            raise Fenced(f"{lease_key}: not ours any more; acknowledgement refused")


def fenced_read(client, key: str, lease_key: str, token: str, group: str, consumer: str, count: int, cursor):
    """``(entries, newest id)``: the read entries (``[]`` when none, then the stream's newest
    entry ID to block from); raises :class:`Fenced` when the lease is not ours."""
    reply = client.eval(READ, 2, key, lease_key, token, group, consumer, count, cursor)
    if reply == -1:
        raise Fenced(f"{lease_key}: not ours any more; read refused")
    if isinstance(reply, (bytes, str)):
        return [], reply
    return (reply[0][1] if reply else []), None


def watched_read(client, key: str, lease_key: str, token: str, group: str, consumer: str, count: int, cursor):
    """:func:`fenced_read` without Lua: ``WATCH`` the lease, ``GET`` it, then ``XREADGROUP`` and
    ``XREVRANGE`` in ``MULTI``/``EXEC``.  ``EXEC`` runs nothing when the lease key was written
    or expired after the ``WATCH`` (Redis >= 6.0.9), so the entries are read only while the
    lease holds ``token``, as inside :data:`READ`; a renewal (``PEXPIRE``, a write) meanwhile
    makes it read again.  Same return value and :class:`Fenced` as :func:`fenced_read` with a
    client of :func:`~svmstream.app.stream.redis_ops.make_client` (raw XREADGROUP replies).  Costs
    three round trips (a Lua read one) but ~4x less Redis CPU per entry (docs/cluster.md)."""
    with client.pipeline() as pipe:
        while True:
            try:
                pipe.watch(lease_key)
                held = pipe.get(lease_key)
                if held is None or (held.decode() if isinstance(held, bytes) else held) != token:
                    raise Fenced(f"{lease_key}: not ours any more; read refused")
                pipe.multi()
                pipe.xreadgroup(group, consumer, {key: cursor}, count=count)
                pipe.xrevrange(key, count=1)
                read, last = pipe.execute()
            except redis_exceptions.WatchError:
                continue
            if read:
                return read[0][1], None
            return [], (last[0][0] if last else b"0-0")


LUA_READ_MAX = 16
"""The most entries :class:`FencedReader` reads through Lua (:data:`READ`), near where the two
reads cost the same: a Lua read saves the learner ~200 us (one round trip, ~150 us, against
~350 us for :func:`watched_read`) and costs Redis ~10 us an entry more (docs/cluster.md).  The
first read of a backlog is a Lua read of this many entries (64 gave 1,000 models' first reads
~0.8 s of Redis CPU in a 300-entry-per-model run)."""


class FencedReader:
    """The fenced reads of one consumer: Lua (:data:`READ`, at most :data:`LUA_READ_MAX`
    entries) while its reads are small, :func:`watched_read` (``count`` entries) after a read
    came back full (a backlog) until one returns fewer than :data:`LUA_READ_MAX`.

    Parameters
    ----------
    count : int
        The most entries a read returns (``SVMSTREAM_STREAM_COUNT``).
    """

    def __init__(self, count: int):
        self.count = count
        self.backlog = False
        #: reads through Lua and through WATCH (the figures ``tests/test_cluster.py`` checks)
        self.lua_reads = 0
        self.watched_reads = 0

    def read(self, client, key: str, lease_key: str, token: str, group: str, consumer: str, cursor):
        """``(entries, newest id)`` as :func:`fenced_read`; raises :class:`Fenced`."""
        if self.backlog:
            self.watched_reads += 1
            entries, newest = watched_read(client, key, lease_key, token, group, consumer, self.count, cursor)
        else:
            self.lua_reads += 1
            lua_count = min(self.count, LUA_READ_MAX)
            entries, newest = fenced_read(client, key, lease_key, token, group, consumer, lua_count, cursor)
        self.backlog = len(entries) >= min(self.count, LUA_READ_MAX) and self.count > LUA_READ_MAX
        return entries, newest


CLAIM = """
if redis.call('get', KEYS[2]) ~= ARGV[1] then
  return -1
end
local claimed = 0
local start = '0-0'
repeat
  local r = redis.call('xautoclaim', KEYS[1], ARGV[2], ARGV[3], 0, start, 'COUNT', 1000)
  start = r[1]
  claimed = claimed + #r[2]
until start == '0-0'
for _, c in ipairs(redis.call('xinfo', 'consumers', KEYS[1], ARGV[2])) do
  if c[2] ~= ARGV[3] then
    redis.call('xgroup', 'delconsumer', KEYS[1], ARGV[2], c[2])
  end
end
return claimed
"""
"""KEYS: stream, lease; ARGV: token, group, consumer.  XAUTOCLAIM for ``consumer`` every entry
pending for another consumer of the group (their owner lost the lease: dead or fenced off),
then delete those consumers; the count claimed, -1 when the lease is not ours."""


def fenced_claim(client, key: str, lease_key: str, token: str, group: str, consumer: str) -> int:
    """:data:`CLAIM`; raises :class:`Fenced` when the lease is not ours."""
    claimed = client.eval(CLAIM, 2, key, lease_key, token, group, consumer)
    if claimed == -1:
        raise Fenced(f"{lease_key}: not ours any more; claim refused")
    return int(claimed)
