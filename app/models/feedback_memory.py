"""The embedded feedback store: remembered predictions in chunks outside the object allocator.

Each quota (the authenticated one, and one per model for tokenless records) is a queue of
*chunks*, anonymous memory maps (``mmap.mmap(-1, size)``) that records are appended to, one
after the other; the oldest chunk is dropped whole when the quota is over its bound or when its
newest record has expired.  A record holds no Python object while it waits: its id carries
where it is (``tag ‖ chunk serial ‖ offset``, the tag 16 random bytes also stored in the record
and compared at lookup), and :meth:`MemoryStore.get` rebuilds the flat ``{field: bytes}``
mapping from the chunk.  So the counted bytes -- the chunks' pages plus
:data:`CHUNK_OVERHEAD` per chunk -- are the store's memory: an earlier store of one dict and
ten ``bytes`` objects per record counted 66 MB where the server's RSS grew by 624 MB
(``docs/feedback.md``).

Layout of a record in a chunk (little-endian): tag (16 bytes), expiry (f8, unix seconds), body
length (u4), then per field: key length (u1), value length (u4), key, value.
"""

from __future__ import annotations

import base64
import binascii
import json
import mmap
import os
import secrets
import struct
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from svmstream.app.models.feedback_store import FIELD, Record, RowBatch, open_quotas

#: Largest chunk (bytes); a quota's chunks are at most a 32nd of its bound, at least a page.
CHUNK_BYTES = 1 << 20
PAGE = mmap.PAGESIZE
#: Bytes counted per chunk besides its pages (its mmap and Chunk objects, index entry).
CHUNK_OVERHEAD = 512

_HEAD = struct.Struct("<16sdI")
_WHERE = struct.Struct("<16sII")
_FILE = b"SVMFEEDBACK3\n"
_CHUNK_HEAD = struct.Struct("<IIIIddH")


def _pages(n: int) -> int:
    return -(-int(n) // PAGE) * PAGE


def pack_record(rec: Record) -> bytes:
    """The body of a record (its fields, in order)."""
    parts = []
    for k, v in rec.items():
        key = k.encode()
        parts += [FIELD.pack(len(key), len(v)), key, v]
    return b"".join(parts)


def unpack_record(body: bytes | memoryview) -> Record:
    """The inverse of :func:`pack_record`."""
    rec: Record = {}
    pos, end = 0, len(body)
    while pos < end:
        nk, nv = FIELD.unpack_from(body, pos)
        pos += FIELD.size
        key = bytes(body[pos : pos + nk]).decode()
        rec[key] = bytes(body[pos + nk : pos + nk + nv])
        pos += nk + nv
    return rec


class Chunk:
    """One memory map of records, appended to until full."""

    __slots__ = ("serial", "owner", "buf", "size", "used", "records", "first_expires", "last_expires")

    def __init__(self, serial: int, owner: str | None, size: int):
        self.serial, self.owner, self.size = serial, owner, size
        self.buf = mmap.mmap(-1, size)
        self.used = self.records = 0
        self.first_expires = self.last_expires = 0.0

    cost = property(lambda self: self.size + CHUNK_OVERHEAD)

    def append_parts(self, tag: bytes, expires: float, parts: list, size: int) -> int:
        """:meth:`append` of a body given as its ``parts`` (``size`` bytes together)."""
        at = pos = self.used
        _HEAD.pack_into(self.buf, at, tag, expires, size)
        pos += _HEAD.size
        for part in parts:
            n = len(part)
            self.buf[pos : pos + n] = part
            pos += n
        self.used = pos
        if not self.records:
            self.first_expires = expires
        self.records += 1
        self.last_expires = expires
        return at

    def read(self, at: int, tag: bytes, now: float) -> Record | None:
        """The record at offset ``at`` if its tag is ``tag`` and it has not expired."""
        if at + _HEAD.size > self.used:
            return None
        saved, expires, n = _HEAD.unpack_from(self.buf, at)
        if saved != tag or expires <= now or at + _HEAD.size + n > self.used:
            return None
        return unpack_record(self.buf[at + _HEAD.size : at + _HEAD.size + n])

    def entries(self):
        """``(offset, tag, expires, body bytes)`` of every record, in order."""
        at = 0
        while at < self.used:
            tag, expires, n = _HEAD.unpack_from(self.buf, at)
            yield at, tag, expires, self.buf[at + _HEAD.size : at + _HEAD.size + n]
            at += _HEAD.size + n


class Quota:
    """The chunks of one token class (and model, for tokenless records), oldest first."""

    __slots__ = ("owner", "chunks", "bytes", "max_bytes", "chunk_bytes")

    def __init__(self, owner: str | None, max_bytes: int):
        self.owner, self.max_bytes = owner, int(max_bytes)
        self.chunks: deque[Chunk] = deque()
        self.bytes = 0
        self.chunk_bytes = max(PAGE, min(CHUNK_BYTES, self.max_bytes // 32 // PAGE * PAGE))

    records = property(lambda self: sum(c.records for c in self.chunks))


class MemoryStore:
    """Remembered predictions in the process (thread-safe), in quotas by token class.

    Records stored by authenticated requests (``authenticated=True``: the token, or a server
    without one) share one quota of ``max_bytes - open_total_bytes``; tokenless ones (a token
    is configured and the request has none) go into a quota per model of ``open_model_bytes``,
    all of them together within ``open_total_bytes``: a tokenless client evicts only tokenless
    records, never what an authenticated client stored (``docs/feedback.md``).  Eviction drops
    a quota's oldest chunk (at most a 32nd of its bound) with every record in it.

    Parameters
    ----------
    ttl_s : float, seconds a record lives
    max_bytes : int, bound of the counted bytes (chunk pages + :data:`CHUNK_OVERHEAD` each) of
        every quota together
    path : Path or None, where :meth:`save` writes and the constructor reads (None: not kept)
    open_total_bytes : int, optional, the tokenless quotas together (default: a quarter)
    open_model_bytes : int, optional, one model's tokenless quota (default: a sixteenth)

    Examples
    --------
    >>> store = MemoryStore(60, 1 << 20)
    >>> [rid] = store.put([{"m": b"a", "x": b"1"}], model="a")
    >>> store.get([rid, "forged"], model="a")
    [{'m': b'a', 'x': b'1'}, None]
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
        self._auth = Quota(None, self.max_bytes - self.open_total_bytes)
        self._open: dict[str, Quota] = {}
        self._chunks: dict[int, Chunk] = {}
        self._serial = 0
        self._aliases: dict[str, str] = {}  # ids of a store saved in an earlier format
        self.open_bytes = 0
        self.evicted = self.evicted_open = self.expired = 0
        self._dirty = False
        if path is not None and path.exists():
            self._load(path)

    bytes = property(lambda self: self._auth.bytes + self.open_bytes)

    def _quota(self, model: str | None, authenticated: bool) -> Quota:
        if authenticated or model is None:
            return self._auth
        quota = self._open.get(model)
        if quota is None:
            quota = self._open[model] = Quota(model, self.open_model_bytes)
        return quota

    def _new_chunk(self, quota: Quota, need: int, serial: int | None = None) -> Chunk:
        if serial is None:
            self._serial = serial = (self._serial + 1) & 0xFFFFFFFF
        chunk = Chunk(serial, quota.owner, max(quota.chunk_bytes, _pages(need)))
        quota.chunks.append(chunk)
        self._chunks[serial] = chunk
        quota.bytes += chunk.cost
        if quota is not self._auth:
            self.open_bytes += chunk.cost
        return chunk

    def _append(self, quota: Quota, tag: bytes, expires: float, body: bytes | list) -> str:
        """Write one record (its body, or the body's parts) in ``quota``'s newest chunk, a new
        one if it does not fit; returns its id."""
        parts = body if isinstance(body, list) else [body]
        size = sum(len(part) for part in parts)
        need = _HEAD.size + size
        chunk = quota.chunks[-1] if quota.chunks else None
        if chunk is None or chunk.used + need > chunk.size:
            chunk = self._new_chunk(quota, need)
        at = chunk.append_parts(tag, expires, parts, size)
        return base64.urlsafe_b64encode(_WHERE.pack(tag, chunk.serial, at)).decode()

    def put_batch(
        self,
        batch: RowBatch,
        now: float | None = None,
        *,
        model: str | None = None,
        authenticated: bool = True,
    ) -> list[str]:
        """:meth:`put` of the rows of a :class:`~.feedback_store.RowBatch`, packed straight into
        the chunks (no per-row object is made)."""
        n = len(batch)
        return self._put(n, (batch.parts(i) for i in range(n)), now, model, authenticated)

    def put(
        self,
        records: list[Record],
        now: float | None = None,
        *,
        model: str | None = None,
        authenticated: bool = True,
    ) -> list[str]:
        """Store ``records`` of ``model`` in the quota of their token class; returns their new
        ids (in order: 32 URL-safe characters, 128 random bits and where the record is)."""
        return self._put(len(records), [pack_record(rec) for rec in records], now, model, authenticated)

    def _put(self, n: int, bodies, now: float | None, model: str | None, authenticated: bool) -> list[str]:
        """Store ``n`` records (``bodies``: an iterable of packed bodies or their parts)."""
        now = time.time() if now is None else now
        tags = [secrets.token_bytes(16) for _ in range(n)]
        expires = now + self.ttl_s
        with self._lock:
            self._drop_expired(now)
            quota = self._quota(model, authenticated)
            ids = [self._append(quota, tag, expires, body) for tag, body in zip(tags, bodies)]
            self._evict(quota)
            self._dirty = True
        return ids

    def _drop_oldest(self, quota: Quota) -> int:
        """Drop ``quota``'s oldest chunk; returns how many records it held."""
        chunk = quota.chunks.popleft()
        del self._chunks[chunk.serial]
        quota.bytes -= chunk.cost
        if quota is not self._auth:
            self.open_bytes -= chunk.cost
        return chunk.records

    def _evict(self, quota: Quota) -> None:
        """Oldest first: ``quota`` within its bound; tokenless quotas within their total (the
        largest gives first)."""
        while quota.bytes > quota.max_bytes and quota.chunks:
            dropped = self._drop_oldest(quota)
            if quota is self._auth:
                self.evicted += dropped
            else:
                self.evicted_open += dropped
        while self.open_bytes > self.open_total_bytes:
            largest = max(self._open.values(), key=lambda q: q.bytes)
            if not largest.chunks:
                break
            self.evicted_open += self._drop_oldest(largest)

    def _lookup(self, rid: Any, model: str | None, now: float) -> Record | None:
        if not isinstance(rid, str):
            return None
        rid = self._aliases.get(rid, rid)
        try:
            tag, serial, at = _WHERE.unpack(base64.urlsafe_b64decode(rid))
        except (ValueError, binascii.Error, struct.error):
            return None
        chunk = self._chunks.get(serial)
        if chunk is None or (chunk.owner is not None and chunk.owner != model):
            return None
        return chunk.read(at, tag, now)

    def get(self, ids: list[str], now: float | None = None, model: str | None = None) -> list[Record | None]:
        """The records of ``ids`` (None for an unknown, forged, evicted or expired id);
        tokenless records are found with their ``model`` only."""
        now = time.time() if now is None else now
        with self._lock:
            return [self._lookup(rid, model, now) for rid in ids]

    def _drop_expired(self, now: float) -> None:
        for quota in (self._auth, *self._open.values()):
            while quota.chunks and quota.chunks[0].last_expires <= now:
                self.expired += self._drop_oldest(quota)
                self._dirty = True

    def stats(self) -> dict[str, Any]:
        """``{"kind", "records", "bytes", "max_bytes", "evicted", "expired", "open_records",
        "open_bytes", "open_evicted", "chunks"}`` (``open_*``: the tokenless quotas; ``records``
        may include expired records of a chunk not yet dropped, never returned by :meth:`get`)."""
        with self._lock:
            self._drop_expired(time.time())
            open_records = sum(q.records for q in self._open.values())
            return {
                "kind": self.kind,
                "records": self._auth.records + open_records,
                "bytes": self.bytes,
                "max_bytes": self.max_bytes,
                "evicted": self.evicted + self.evicted_open,
                "expired": self.expired,
                "open_records": open_records,
                "open_bytes": self.open_bytes,
                "open_evicted": self.evicted_open,
                "chunks": len(self._chunks),
            }

    def save(self) -> bool:
        """Write the chunks (atomically) if they changed since the last save; returns whether a
        file was written.  Format 3: ``SVMFEEDBACK3\\n``, then per chunk a header (serial,
        size, used bytes, records, first and last expiry, owner's length), the owner (UTF-8,
        empty for the authenticated quota) and its used bytes, so that ids stay valid."""
        if self.path is None:
            return False
        with self._lock:
            if not self._dirty:
                return False
            self._drop_expired(time.time())
            # chunks are append-only below ``used``: written outside the lock
            chunks = [(c, c.used, c.records, c.last_expires) for c in self._chunks.values()]
            self._dirty = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(_FILE)
            for chunk, used, records, last in chunks:
                owner = chunk.owner.encode() if chunk.owner is not None else b""
                flag = int(chunk.owner is not None)
                f.write(
                    _CHUNK_HEAD.pack(chunk.serial, chunk.size, used, records, chunk.first_expires, last, flag)
                )
                f.write(struct.pack("<H", len(owner)) + owner)
                f.write(chunk.buf[:used])
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        return True

    def _load(self, path: Path) -> None:
        try:
            with open(path, "rb") as f:
                if f.read(len(_FILE)) == _FILE:
                    self._load_chunks(f)
                    return
            with open(path) as f:
                first = f.readline()
                if json.loads(first).get("format") == 2:
                    rows = (json.loads(line) for line in f)
                else:  # format 1: one JSON object holding every (authenticated) record
                    rows = iter(json.loads(first + f.read())["records"])
                self._load_rows(rows)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, struct.error):
            return

    def _load_chunks(self, f) -> None:
        now = time.time()
        while head := f.read(_CHUNK_HEAD.size):
            serial, size, used, records, first, last, flag = _CHUNK_HEAD.unpack(head)
            (n,) = struct.unpack("<H", f.read(2))
            owner = f.read(n).decode() if flag else None
            data = f.read(used)
            if last <= now or len(data) != used:
                continue
            quota = self._quota(owner, owner is None)
            chunk = self._new_chunk(quota, size, serial)
            chunk.buf[:used] = data
            chunk.used, chunk.records, chunk.first_expires, chunk.last_expires = used, records, first, last
            self._serial = max(self._serial, serial)
            self._evict(quota)

    def _load_rows(self, rows) -> None:
        """Records of a file of format 1 or 2 (one per line): stored again, their old ids kept
        as aliases of the new ones."""
        now = time.time()
        for row in rows:
            rid, expires, fields = row[:3]
            model = row[3] if len(row) > 3 else None
            if expires <= now:
                continue
            body = pack_record({k: base64.b64decode(v) for k, v in fields.items()})
            quota = self._quota(model, model is None)
            self._aliases[rid] = self._append(quota, secrets.token_bytes(16), float(expires), body)
            self._evict(quota)
