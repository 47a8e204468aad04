"""Where remembered predictions wait for their labels: the feedback store (``docs/feedback.md``).

A ``POST /predict`` with ``remember`` keeps, per row, what ``POST /feedback`` needs to learn it
later and to score what was served: the features as the model received them (after decoding
and conforming to its dimension, before any scaling), the served label, decision values,
probabilities and the model version, under an opaque id (128 random bits, never derived from
the row or the time: ``secrets.token_urlsafe(16)`` in Redis; in the process the same bits and
where the record lies, :mod:`.feedback_memory`).  A record is a flat ``{field: bytes}``
mapping (:func:`encode_row`, :func:`decode_row`) so that both stores hold the same thing:

* :class:`~.feedback_memory.MemoryStore` (the embedded default): records packed into chunks of
  anonymous memory, outside Python's object allocator, saved to
  ``<snapshot_dir>/.feedback/store.json`` by the snapshotter and at shutdown, read back at
  start-up;
* :class:`RedisStore` (``SVMSTREAM_REDIS_URL`` set): one Redis hash per id with the TTL, an
  index (sorted set by expiry) and a byte count kept by one Lua script, so that the learner
  finds what any replica remembered.

Both keep records for ``feedback_ttl_s`` and at most ``feedback_max_bytes``, in quotas by token
class (the oldest of a quota evicted first, counted).  Records are never changed when labelled:
whether an id was learned is the model's own state (:mod:`.feedback`), saved with its
snapshots, so that a stream replayed after a crash finds its rows again.
"""

from __future__ import annotations

import json
import secrets
import struct
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

#: Bytes counted per record besides its field values (key, dict or hash overhead).
RECORD_OVERHEAD = 160

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


#: A field of a packed record (:mod:`.feedback_memory`): key length (u1), value length (u4).
FIELD = struct.Struct("<BI")


def _field(key: str, value: bytes) -> bytes:
    return FIELD.pack(len(key), len(value)) + key.encode() + value


def _row(packed, i: int):
    _, data, w = packed
    return data[i * w : (i + 1) * w]


class RowBatch:
    """The rows of one served prediction, to remember: :meth:`records` (one flat mapping per
    row, as :func:`encode_row`) for Redis, :meth:`parts` (the packed fields of a row, the
    fields shared by the batch built once) for the embedded store, which so keeps no
    per-row object while remembering.  Parameters as :func:`encode_row`, ``labels`` the served
    labels as JSON bytes, one per row.

    Examples
    --------
    >>> X = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> batch = RowBatch("m", 1, 0.0, X, [b"0", b"1"], X[:, 0], None)
    >>> from svmstream.app.models.feedback_memory import unpack_record
    >>> unpack_record(b"".join(batch.parts(1))) == batch.records()[1]
    True
    """

    def __init__(self, model, version, t, X, labels, decision, proba, generation=None):
        self.model, self.version, self.t, self.X = model, version, t, X
        self.labels, self.decision, self.proba, self.generation = labels, decision, proba, generation
        self._sparse = sp.issparse(X)
        self._common = self._shared()

    def __len__(self) -> int:
        return self.X.shape[0]

    def records(self) -> list[Record]:
        args = (self.decision, self.proba, self.generation)
        return [
            encode_row(self.model, self.version, self.t, self.X, i, self.labels[i], *args)
            for i in range(len(self))
        ]

    def parts(self, i: int) -> list:
        """The packed fields of row ``i`` (bytes and memoryviews, in :func:`encode_row`'s
        order)."""
        head, mid, dv, x, tail, p = self._common
        parts = [head, _field("l", self.labels[i]), dv[0], _row(dv, i)]
        if self._sparse:
            X = self.X
            lo, hi = X.indptr[i], X.indptr[i + 1]
            xs = np.ascontiguousarray(X.data[lo:hi], dtype="<f8").tobytes()
            ix = np.ascontiguousarray(X.indices[lo:hi], dtype="<i8").tobytes()
            parts += [mid, _field("x", xs), _field("i", ix)]
        else:
            parts += [mid, x[0], _row(x, i)]
        if p is not None:
            parts += [tail, p[0], _row(p, i)]
        return parts

    def _shared(self):
        """What every row shares (packed once) and the per-row arrays as memoryviews."""
        X = self.X

        def rows(a, key):  # (field header, the rows' bytes, bytes a row)
            a = np.ascontiguousarray(a, dtype="<f8").reshape(len(self), -1)
            w = a.shape[1] * 8
            return FIELD.pack(len(key), w) + key.encode(), memoryview(a).cast("B"), w

        head = b"".join(
            [
                _field("m", self.model.encode()),
                _field("v", str(int(self.version)).encode()),
                _field("t", repr(float(self.t)).encode()),
                _field("w", str(int(X.shape[1])).encode()),
            ]
        )
        mid = (_field("g", self.generation.encode()) if self.generation is not None else b"") + _field(
            "k", b"s" if self._sparse else b"d"
        )
        x = None if self._sparse else rows(X, "x")
        tail = p = None
        if self.proba is not None:
            classes, proba = self.proba
            tail, p = _field("c", json.dumps(classes).encode()), rows(proba, "p")
        return head, mid, rows(self.decision, "dv"), x, tail, p


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
    ttl_s, max_bytes : as :class:`~.feedback_memory.MemoryStore`
    prefix : str, key prefix of the hashes, the index and the counters
    open_total_bytes, open_model_bytes : as :class:`~.feedback_memory.MemoryStore`; in Redis each model's
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

    def put_batch(self, batch: RowBatch, now: float | None = None, **quota) -> list[str]:
        """:meth:`put` of a :class:`RowBatch`'s records."""
        return self.put(batch.records(), now, **quota)

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
        """As :meth:`~.feedback_memory.MemoryStore.stats` (``expired``: not counted by Redis, None)."""
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
