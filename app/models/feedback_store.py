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

Both keep records for ``feedback_ttl_s`` and at most ``feedback_max_bytes`` (the oldest are
evicted first and counted).  Records are never changed nor deleted when they are labelled:
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


def encode_row(model: str, version: int, t: float, X, i: int, label_json: bytes, decision, proba) -> Record:
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
    """
    rec: Record = {
        "m": model.encode(),
        "v": str(int(version)).encode(),
        "t": repr(float(t)).encode(),
        "w": str(int(X.shape[1])).encode(),
        "l": label_json,
        "dv": np.ascontiguousarray(decision[i], dtype="<f8").tobytes(),
    }
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


class MemoryStore:
    """Remembered predictions in the process (thread-safe).

    Parameters
    ----------
    ttl_s : float, seconds a record lives
    max_bytes : int, bound of the counted bytes (:func:`record_bytes`); oldest evicted first
    path : Path or None, where :meth:`save` writes and the constructor reads (None: not kept)
    """

    kind = "memory"

    def __init__(self, ttl_s: float, max_bytes: int, path: Path | None = None):
        self.ttl_s = float(ttl_s)
        self.max_bytes = int(max_bytes)
        self.path = path
        self._lock = threading.Lock()
        self._items: OrderedDict[str, tuple[float, Record, int]] = OrderedDict()
        self.bytes = 0
        self.evicted = 0
        self.expired = 0
        self._dirty = False
        if path is not None and path.exists():
            self._load(path)

    def put(self, records: list[Record], now: float | None = None) -> list[str]:
        """Store ``records``; returns their new ids (in order)."""
        now = time.time() if now is None else now
        ids = [new_id() for _ in records]
        with self._lock:
            self._drop_expired(now)
            for rid, rec in zip(ids, records):
                size = record_bytes(rec) + MEMORY_OVERHEAD
                self._items[rid] = (now + self.ttl_s, rec, size)
                self.bytes += size
            while self.bytes > self.max_bytes and self._items:
                _, (_, _, size) = self._items.popitem(last=False)
                self.bytes -= size
                self.evicted += 1
            self._dirty = True
        return ids

    def get(self, ids: list[str], now: float | None = None) -> list[Record | None]:
        """The records of ``ids`` (None for an unknown, evicted or expired id)."""
        now = time.time() if now is None else now
        out: list[Record | None] = []
        with self._lock:
            for rid in ids:
                item = self._items.get(rid) if isinstance(rid, str) else None
                out.append(item[1] if item is not None and item[0] > now else None)
        return out

    def _drop_expired(self, now: float) -> None:
        items = self._items
        while items:
            rid, (expires, _, size) = next(iter(items.items()))
            if expires > now:
                break
            del items[rid]
            self.bytes -= size
            self.expired += 1
            self._dirty = True

    def stats(self) -> dict[str, Any]:
        """``{"kind", "records", "bytes", "max_bytes", "evicted", "expired"}``."""
        with self._lock:
            self._drop_expired(time.time())
            return {
                "kind": self.kind,
                "records": len(self._items),
                "bytes": self.bytes,
                "max_bytes": self.max_bytes,
                "evicted": self.evicted,
                "expired": self.expired,
            }

    def save(self) -> bool:
        """Write the records (atomically) if they changed since the last save; returns whether
        a file was written.  Format: JSON ``{"records": [[id, expires, {field: base64}], ...]}``."""
        if self.path is None:
            return False
        with self._lock:
            if not self._dirty:
                return False
            self._drop_expired(time.time())
            rows = [
                [rid, expires, {k: base64.b64encode(v).decode() for k, v in rec.items()}]
                for rid, (expires, rec, _) in self._items.items()
            ]
            self._dirty = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            json.dump({"format": 1, "records": rows}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        return True

    def _load(self, path: Path) -> None:
        try:
            rows = json.loads(path.read_text())["records"]
        except (OSError, ValueError, KeyError, TypeError):
            return
        now = time.time()
        for rid, expires, fields in rows:
            if expires <= now:
                continue
            rec = {k: base64.b64decode(v) for k, v in fields.items()}
            size = record_bytes(rec) + MEMORY_OVERHEAD
            self._items[rid] = (float(expires), rec, size)
            self.bytes += size


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
    """

    kind = "redis"

    def __init__(self, client, ttl_s: float, max_bytes: int, prefix: str = "svmstream:feedback:"):
        self.client = client
        self.ttl_s = float(ttl_s)
        self.max_bytes = int(max_bytes)
        self.prefix = prefix
        self.keys = [prefix + "_index", prefix + "_bytes", prefix + "_evicted"]
        self._admit = client.register_script(_ADMIT)

    def put(self, records: list[Record], now: float | None = None) -> list[str]:
        """Store ``records`` (one pipeline: the hashes, their TTL, the admission script)."""
        now = time.time() if now is None else now
        ids = [new_id() for _ in records]
        expires = now + self.ttl_s
        ttl_ms = max(1, int(self.ttl_s * 1000))
        args: list[Any] = [now, self.max_bytes, self.prefix]
        pipe = self.client.pipeline(transaction=False)
        for rid, rec in zip(ids, records):
            key = self.prefix + rid
            pipe.hset(key, mapping=rec)
            pipe.pexpire(key, ttl_ms)
            args += [f"{record_bytes(rec)}:{rid}", expires]
        self._admit(keys=self.keys, args=args, client=pipe)
        pipe.execute()
        return ids

    def get(self, ids: list[str], now: float | None = None) -> list[Record | None]:
        """The records of ``ids`` (None for unknown, evicted or expired)."""
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
