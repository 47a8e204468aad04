"""Where remembered predictions wait for their labels: the feedback store (``docs/feedback.md``).

A ``POST /predict`` with ``remember`` keeps, per row, what ``POST /feedback`` needs to learn it
later and to score what was served: the features as the model received them (after decoding
and conforming to its dimension, before any scaling), the served label, decision values,
probabilities and the model version, under an opaque id (``secrets.token_urlsafe(16)``: 128
random bits, never derived from the row or the time).  A record is a flat ``{field: bytes}``
mapping (:func:`encode_row`, :func:`decode_row`) so that both stores hold the same thing:

* :class:`MemoryStore` (the embedded default): an insertion-ordered dict in the process,
  saved to ``<snapshot_dir>/.feedback/store.json`` by the snapshotter and at shutdown, read
  back at start-up;
* :class:`RedisStore` (``SVMSTREAM_REDIS_URL`` set): one Redis hash per id with the TTL, an
  index (sorted set by expiry) and a byte count kept by one Lua script, so that the learner
  finds what any replica remembered.

Both keep records for ``feedback_ttl_s`` and at most ``feedback_max_bytes``, in quotas by token
class (the oldest of a quota evicted first, counted).  Records are never changed when labelled:
whether an id was learned is the model's own state (:mod:`.feedback`), saved with its
snapshots, so that a stream replayed after a crash finds its rows again.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

#: Bytes counted per record besides its field values (key, dict or hash overhead).
RECORD_OVERHEAD = 160

#: Further bytes a record costs in the process (its dict and one bytes object per field): with
#: it, the counted bytes of :class:`MemoryStore` match its RSS growth (1,000,000 rows of d = 22
#: remembered under a 64 MiB bound: ``docs/feedback.md``).
MEMORY_OVERHEAD = 900

Record = dict[str, bytes]


def new_id() -> str:
    """An opaque, unguessable prediction id (22 URL-safe characters, 128 random bits)."""
    return secrets.token_urlsafe(16)


def encode_row(
    model: str,
    version: int,
    t: float,
    X,
    i: int,
    label_json: bytes,
    decision,
    proba,
    generation: str | None = None,
) -> Record:
    """The record of row ``i`` of a prediction.

    Parameters
    ----------
    model : str
    version : int, the view's version that served it
    t : float, unix time of the prediction
    X : ndarray of shape (n, d), float64, or CSR matrix of shape (n, d): the conformed rows
    i : int
    label_json : bytes, the served label as JSON
    decision : ndarray of shape (n,) or (n, K), float64
    proba : None or (classes, ndarray of shape (n, K) float64)
    generation : str or None, the model's identity (``ModelHandle.generation``): a record of
        another generation of the model (replaced since) is never learned
    """
    rec: Record = {
        "m": model.encode(),
        "v": str(int(version)).encode(),
        "t": repr(float(t)).encode(),
        "w": str(int(X.shape[1])).encode(),
        "l": label_json,
        "dv": np.ascontiguousarray(decision[i], dtype="<f8").tobytes(),
    }
    if generation is not None:
        rec["g"] = generation.encode()
    if sp.issparse(X):
        lo, hi = X.indptr[i], X.indptr[i + 1]
        rec["k"] = b"s"
        rec["x"] = np.ascontiguousarray(X.data[lo:hi], dtype="<f8").tobytes()
        rec["i"] = np.ascontiguousarray(X.indices[lo:hi], dtype="<i8").tobytes()
    else:
        rec["k"] = b"d"
        rec["x"] = np.ascontiguousarray(X[i], dtype="<f8").tobytes()
    if proba is not None:
        classes, p = proba
        rec["c"] = json.dumps(classes).encode()
        rec["p"] = np.ascontiguousarray(p[i], dtype="<f8").tobytes()
    return rec


def belongs(rec: Record | None, name: str, generation: str | None) -> bool:
    """Whether a stored record was remembered by model ``name`` of ``generation`` (not by
    another model, nor by a model of that name replaced since)."""
    if rec is None or rec.get("m") != name.encode():
        return False
    saved = rec.get("g")
    return (saved.decode() if saved is not None else None) == generation


def decode_row(rec: Record) -> dict[str, Any]:
    """A record's values: ``model`` (str), ``version`` (int), ``t`` (float), ``sparse`` (bool),
    ``width`` (int), ``x`` (float64 (nnz,) or (d,)), ``indices`` (int64 (nnz,) or None),
    ``label`` (JSON value), ``decision`` (float64 (1,) or (K,)), ``classes`` and ``proba``
    (None without probabilities)."""
    get = rec.get
    return {
        "model": rec["m"].decode(),
        "version": int(rec["v"]),
        "t": float(rec["t"]),
        "sparse": rec["k"] == b"s",
        "width": int(rec["w"]),
        "x": np.frombuffer(rec["x"], dtype="<f8"),
        "indices": np.frombuffer(rec["i"], dtype="<i8") if get("i") is not None else None,
        "label": json.loads(rec["l"]),
        "decision": np.frombuffer(rec["dv"], dtype="<f8"),
        "classes": json.loads(rec["c"]) if get("c") is not None else None,
        "proba": np.frombuffer(rec["p"], dtype="<f8") if get("p") is not None else None,
    }


def record_bytes(rec: Record) -> int:
    """Bytes a record is counted for against ``feedback_max_bytes``."""
    return RECORD_OVERHEAD + sum(len(k) + len(v) for k, v in rec.items())


def open_quotas(max_bytes: int, total: int | None, per_model: int | None) -> tuple[int, int]:
    """``(all tokenless quotas, one model's)`` in bytes: the settings, else a quarter and a
    sixteenth of ``max_bytes``; the first at most ``max_bytes``, the second at most the first."""
    total = min(int(max_bytes), int(max_bytes // 4 if total is None else total))
    return total, min(total, int(max_bytes // 16 if per_model is None else per_model))


class Quota:
    """Records of one token class (and model, for tokenless ones): insertion-ordered, bounded."""

    __slots__ = ("items", "bytes", "max_bytes")

    def __init__(self, max_bytes: int):
        self.items: OrderedDict[str, tuple[float, Record, int]] = OrderedDict()
        self.bytes = 0
        self.max_bytes = int(max_bytes)

    def pop_oldest(self) -> int:
        """Drop the oldest record; returns its bytes."""
        size = self.items.popitem(last=False)[1][2]
        self.bytes -= size
        return size


class MemoryStore:
    """Remembered predictions in the process (thread-safe), in quotas by token class.

    Records stored by authenticated requests (``authenticated=True``: the token, or a server
    without one) share one quota of ``max_bytes - open_total_bytes``; tokenless ones (a token
    is configured and the request has none) go into a quota per model of ``open_model_bytes``,
    all of them together within ``open_total_bytes``: a tokenless client evicts only tokenless
    records, never what an authenticated client stored (``docs/feedback.md``).

    Parameters
    ----------
    ttl_s : float, seconds a record lives
    max_bytes : int, bound of the counted bytes (:func:`record_bytes` + :data:`MEMORY_OVERHEAD`)
        of every quota together; oldest evicted first within each quota
    path : Path or None, where :meth:`save` writes and the constructor reads (None: not kept)
    open_total_bytes : int, optional, the tokenless quotas together (default: a quarter)
    open_model_bytes : int, optional, one model's tokenless quota (default: a sixteenth)
    """

    kind = "memory"

    def __init__(
        self,
        ttl_s: float,
        max_bytes: int,
        path: Path | None = None,
        open_total_bytes: int | None = None,
        open_model_bytes: int | None = None,
    ):
        self.ttl_s = float(ttl_s)
        self.max_bytes = int(max_bytes)
        self.open_total_bytes, self.open_model_bytes = open_quotas(
            max_bytes, open_total_bytes, open_model_bytes
        )
        self.path = path
        self._lock = threading.Lock()
        self._auth = Quota(self.max_bytes - self.open_total_bytes)
        self._open: dict[str, Quota] = {}
        self.open_bytes = 0
        self.evicted = 0
        self.evicted_open = 0
        self.expired = 0
        self._dirty = False
        if path is not None and path.exists():
            self._load(path)

    bytes = property(lambda self: self._auth.bytes + self.open_bytes)

    def _quota(self, model: str | None, authenticated: bool) -> Quota:
        if authenticated or model is None:
            return self._auth
        quota = self._open.get(model)
        if quota is None:
            quota = self._open[model] = Quota(self.open_model_bytes)
        return quota

    def put(
        self,
        records: list[Record],
        now: float | None = None,
        *,
        model: str | None = None,
        authenticated: bool = True,
    ) -> list[str]:
        """Store ``records`` of ``model`` in the quota of their token class; returns their new
        ids (in order)."""
        now = time.time() if now is None else now
        ids = [new_id() for _ in records]
        with self._lock:
            self._drop_expired(now)
            quota = self._quota(model, authenticated)
            added = 0
            for rid, rec in zip(ids, records):
                size = record_bytes(rec) + MEMORY_OVERHEAD
                quota.items[rid] = (now + self.ttl_s, rec, size)
                quota.bytes += size
                added += size
            if quota is not self._auth:
                self.open_bytes += added
            self._evict(quota)
            self._dirty = True
        return ids

    def _evict(self, quota: Quota) -> None:
        """Oldest first: ``quota`` within its bound; tokenless quotas within their total (the
        largest gives first)."""
        while quota.bytes > quota.max_bytes and quota.items:
            size = quota.pop_oldest()
            if quota is self._auth:
                self.evicted += 1
            else:
                self.open_bytes -= size
                self.evicted_open += 1
        while self.open_bytes > self.open_total_bytes:
            largest = max(self._open.values(), key=lambda q: q.bytes)
            if not largest.items:
                break
            self.open_bytes -= largest.pop_oldest()
            self.evicted_open += 1

    def get(self, ids: list[str], now: float | None = None, model: str | None = None) -> list[Record | None]:
        """The records of ``ids`` (None for an unknown, evicted or expired id); tokenless
        records are found with their ``model`` only."""
        now = time.time() if now is None else now
        out: list[Record | None] = []
        with self._lock:
            pools = [self._auth.items]
            if model is not None and model in self._open:
                pools.append(self._open[model].items)
            for rid in ids:
                item = None
                if isinstance(rid, str):
                    for pool in pools:
                        item = pool.get(rid)
                        if item is not None:
                            break
                out.append(item[1] if item is not None and item[0] > now else None)
        return out

    def _drop_expired(self, now: float) -> None:
        for quota in (self._auth, *self._open.values()):
            items = quota.items
            while items:
                rid, (expires, _, size) = next(iter(items.items()))
                if expires > now:
                    break
                del items[rid]
                quota.bytes -= size
                if quota is not self._auth:
                    self.open_bytes -= size
                self.expired += 1
                self._dirty = True

    def stats(self) -> dict[str, Any]:
        """``{"kind", "records", "bytes", "max_bytes", "evicted", "expired", "open_records",
        "open_bytes", "open_evicted"}`` (``open_*``: the tokenless quotas)."""
        with self._lock:
            self._drop_expired(time.time())
            open_records = sum(len(q.items) for q in self._open.values())
            return {
                "kind": self.kind,
                "records": len(self._auth.items) + open_records,
                "bytes": self.bytes,
                "max_bytes": self.max_bytes,
                "evicted": self.evicted + self.evicted_open,
                "expired": self.expired,
                "open_records": open_records,
                "open_bytes": self.open_bytes,
                "open_evicted": self.evicted_open,
            }

    def save(self) -> bool:
        """Write the records (atomically) if they changed since the last save; returns whether
        a file was written.  Format: one JSON line per record, ``[id, expires, {field: base64},
        model or null]`` (null: an authenticated record), after a first line ``{"format": 2}``;
        written record by record, never held whole in memory."""
        if self.path is None:
            return False
        with self._lock:
            if not self._dirty:
                return False
            self._drop_expired(time.time())
            quotas = [(None, list(self._auth.items.items()))]
            quotas += [(m, list(q.items.items())) for m, q in self._open.items()]
            self._dirty = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            f.write('{"format": 2}\n')
            for model, items in quotas:
                for rid, (expires, rec, _) in items:
                    fields = {k: base64.b64encode(v).decode() for k, v in rec.items()}
                    f.write(json.dumps([rid, expires, fields, model]) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        return True

    def _load(self, path: Path) -> None:
        try:
            with open(path) as f:
                first = f.readline()
                if json.loads(first).get("format") == 2:
                    rows = (json.loads(line) for line in f)
                else:  # format 1: one JSON object holding every (authenticated) record
                    rows = iter(json.loads(first + f.read())["records"])
                self._load_rows(rows)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return

    def _load_rows(self, rows) -> None:
        now = time.time()
        for row in rows:
            rid, expires, fields = row[:3]
            model = row[3] if len(row) > 3 else None
            if expires <= now:
                continue
            rec = {k: base64.b64decode(v) for k, v in fields.items()}
            size = record_bytes(rec) + MEMORY_OVERHEAD
            quota = self._quota(model, model is None)
            quota.items[rid] = (float(expires), rec, size)
            quota.bytes += size
            if quota is not self._auth:
                self.open_bytes += size


# KEYS: index (zset "size:id" by expiry), byte count, evictions; ARGV: now, max bytes, prefix,
# then (member, expiry) pairs of the records just written
_ADMIT = """
local now = tonumber(ARGV[1])
local maxb = tonumber(ARGV[2])
local prefix = ARGV[3]
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 10000)
for _, m in ipairs(old) do
  redis.call('DECRBY', KEYS[2], tonumber(string.match(m, '^(%d+):')))
  redis.call('ZREM', KEYS[1], m)
end
for i = 4, #ARGV, 2 do
  redis.call('ZADD', KEYS[1], tonumber(ARGV[i + 1]), ARGV[i])
  redis.call('INCRBY', KEYS[2], tonumber(string.match(ARGV[i], '^(%d+):')))
end
local evicted = 0
while tonumber(redis.call('GET', KEYS[2]) or '0') > maxb do
  local popped = redis.call('ZPOPMIN', KEYS[1])
  if #popped == 0 then break end
  local m = popped[1]
  local size, rid = string.match(m, '^(%d+):(.*)$')
  redis.call('DECRBY', KEYS[2], tonumber(size))
  redis.call('DEL', prefix .. rid)
  evicted = evicted + 1
end
if evicted > 0 then redis.call('INCRBY', KEYS[3], evicted) end
return evicted
"""


class RedisStore:
    """Remembered predictions in Redis: hash ``svmstream:feedback:<id>`` with the TTL.

    Parameters
    ----------
    client : redis.Redis (``decode_responses=False``)
    ttl_s, max_bytes : as :class:`MemoryStore`
    prefix : str, key prefix of the hashes, the index and the counters
    open_total_bytes, open_model_bytes : as :class:`MemoryStore`; in Redis each model's
        tokenless quota is bounded (index ``<prefix>_open:<model>_index``), authenticated records
        within ``max_bytes - open_total_bytes``
    """

    kind = "redis"

    def __init__(
        self,
        client,
        ttl_s: float,
        max_bytes: int,
        prefix: str = "svmstream:feedback:",
        open_total_bytes: int | None = None,
        open_model_bytes: int | None = None,
    ):
        self.client = client
        self.ttl_s = float(ttl_s)
        self.max_bytes = int(max_bytes)
        self.open_total_bytes, self.open_model_bytes = open_quotas(
            max_bytes, open_total_bytes, open_model_bytes
        )
        self.prefix = prefix
        self.keys = [prefix + "_index", prefix + "_bytes", prefix + "_evicted"]
        self._admit = client.register_script(_ADMIT)

    def _keys(self, model: str | None, authenticated: bool) -> tuple[list[str], int]:
        """The index, byte count and eviction keys of a quota, and its bound: authenticated
        records share one; tokenless ones have one per model (``_open:<model>``)."""
        if authenticated or model is None:
            return self.keys, self.max_bytes - self.open_total_bytes
        base = f"{self.prefix}_open:{model}"
        return [base + "_index", base + "_bytes", self.prefix + "_evicted"], self.open_model_bytes

    def put(
        self,
        records: list[Record],
        now: float | None = None,
        *,
        model: str | None = None,
        authenticated: bool = True,
    ) -> list[str]:
        """Store ``records`` in the quota of their token class (one pipeline: the hashes,
        their TTL, the admission script of that quota)."""
        now = time.time() if now is None else now
        ids = [new_id() for _ in records]
        expires = now + self.ttl_s
        ttl_ms = max(1, int(self.ttl_s * 1000))
        keys, bound = self._keys(model, authenticated)
        args: list[Any] = [now, bound, self.prefix]
        pipe = self.client.pipeline(transaction=False)
        for rid, rec in zip(ids, records):
            key = self.prefix + rid
            pipe.hset(key, mapping=rec)
            pipe.pexpire(key, ttl_ms)
            args += [f"{record_bytes(rec)}:{rid}", expires]
        self._admit(keys=keys, args=args, client=pipe)
        pipe.execute()
        return ids

    def get(self, ids: list[str], now: float | None = None, model: str | None = None) -> list[Record | None]:
        """The records of ``ids`` (None for unknown, evicted or expired; every quota's records
        are hashes by id, so ``model`` is not needed)."""
        pipe = self.client.pipeline(transaction=False)
        for rid in ids:
            pipe.hgetall(self.prefix + rid)
        out: list[Record | None] = []
        for rec in pipe.execute():
            if not rec:
                out.append(None)
            else:
                out.append({k.decode() if isinstance(k, bytes) else k: v for k, v in rec.items()})
        return out

    def stats(self) -> dict[str, Any]:
        """As :meth:`MemoryStore.stats` (``expired``: not counted by Redis, None)."""
        pipe = self.client.pipeline(transaction=False)
        pipe.zcard(self.keys[0])
        pipe.get(self.keys[1])
        pipe.get(self.keys[2])
        records, size, evicted = pipe.execute()
        return {
            "kind": self.kind,
            "records": int(records or 0),
            "bytes": int(size or 0),
            "max_bytes": self.max_bytes,
            "evicted": int(evicted or 0),
            "expired": None,
        }

    def save(self) -> bool:
        """Nothing to do: Redis keeps the records."""
        return False
