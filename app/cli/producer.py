"""Rows of a LIBSVM matrix as what ``svmstream replay`` sends: the row format (:func:`auto_format`),
slices of rows whose encoding fits a byte limit (:class:`RowSlicer`), and the Redis side of
``replay --redis`` -- stream entries written with pipelined ``XADD`` (one round trip per slice).

Entry format (``docs/stream.md``): ``y`` (the label) and ``xd`` (little-endian float64
bytes, dense: the default for dense rows, the values exactly as the file gives them), ``xb``
(little-endian float32 bytes: half the bytes, the values rounded to float32), or ``x``
(JSON: a dense list, or a sparse ``{"index": value}`` map with 0-based indices).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

MIB = 1 << 20
DEFAULT_MAX_BYTES = 64 * MIB
"""The service's default ``MAX_BODY_BYTES``: no request body (and no XADD round trip) is larger."""

# The auto format rule: sparse maps below 15% non-zeros (the measured speed crossover; a9a, 11%,
# ties in speed with 3.9x fewer bytes), and above 16,384 features (a dense batch of 1,000 rows no
# longer fits a 64 MiB body; the service keeps wide sparse input sparse) unless sparse maps would
# be larger than dense rows (>= 40% non-zeros).  Measurements: docs/service.md, "Row formats of replay".
SPARSE_BELOW_DENSITY = 0.15
WIDE_FEATURES = 16_384
WIDE_SPARSE_BELOW_DENSITY = 0.40

BINARY_DTYPES = {"xd": "<f8", "xb": "<f4"}
"""The dense binary entry formats and their value dtype (``docs/stream.md``)."""


def density(X) -> float:
    """Fraction of non-zero entries of the CSR matrix ``X`` (0 for an empty matrix)."""
    n, d = X.shape
    return X.nnz / (n * d) if n and d else 0.0


def auto_format(X, redis: bool = False) -> str:
    """The row format ``--format auto`` picks for the CSR matrix ``X`` (n, d): ``"sparse"``
    (``{index: value}`` maps) when ``density(X) < SPARSE_BELOW_DENSITY`` (0.15), or when
    ``d > WIDE_FEATURES`` (16,384) and ``density(X) < WIDE_SPARSE_BELOW_DENSITY`` (0.40); else
    ``"xd"`` (float64 bytes, with ``redis``) or ``"dense"`` (JSON lists, HTTP).  Every format it
    picks carries the float64 values exactly (``"xb"``, float32, is only used when asked for)."""
    rho = density(X)
    if rho < SPARSE_BELOW_DENSITY or (X.shape[1] > WIDE_FEATURES and rho < WIDE_SPARSE_BELOW_DENSITY):
        return "sparse"
    return "xd" if redis else "dense"


def max_bytes_from_env() -> int:
    """``SVMSTREAM_MAX_BODY_BYTES`` (the service's own setting, when replay runs in its
    environment), else :data:`DEFAULT_MAX_BYTES`."""
    raw = os.environ.get("SVMSTREAM_MAX_BODY_BYTES")
    try:
        value = int(raw) if raw else DEFAULT_MAX_BYTES
    except ValueError:
        value = DEFAULT_MAX_BYTES
    return value if value > 0 else DEFAULT_MAX_BYTES


class RowTooLarge(ValueError):
    """One row alone is encoded in more bytes than the limit allows."""


@dataclass
class ByteLimit:
    """The largest payload (request body, XADD round trip) in bytes; shared by the slicers of
    a replay so that a limit learned from the service (a 413) holds for the rest of it."""

    bytes: int = DEFAULT_MAX_BYTES
    refused: int = 0
    """Payloads the service refused as too large (413) before the limit was lowered."""


# bytes per unit (a non-zero of a sparse row, an element of a dense one, plus one per row)
# assumed before the first payload is measured: about the most a float64 takes in JSON
# (``-1.2345678901234567e-100,``), so the first payload is rarely over the limit
_PRIOR_RATE = {"xd": 8.0, "xb": 4.0, "dense": 25.0, "sparse": 30.0}


class RowSlicer:
    """Cuts rows ``[start, stop)`` of a CSR matrix into consecutive slices of at most
    ``batch`` rows whose encoding takes at most ``limit.bytes`` bytes.

    ``encode(a, b) -> (payload, size)`` encodes rows ``a:b``.  The number of rows of a slice
    is chosen from the bytes per unit (a stored value of a sparse row, an element of a
    dense one) measured on the previous payloads; a payload still over the limit is encoded
    again with proportionally fewer rows, so the limit always holds (:class:`RowTooLarge`
    for a single row over it).  Far below the limit the slices are simply ``batch`` rows.
    """

    def __init__(self, X, fmt: str, batch: int, limit: ByteLimit, encode: Callable[[int, int], Any]):
        n, d = X.shape
        units = np.diff(X.indptr) + 1 if fmt == "sparse" else np.full(n, d + 1)
        self.cum = np.concatenate(([0], np.cumsum(units, dtype=np.int64)))
        self.n = n
        self.batch = max(1, int(batch))
        self.limit = limit
        self.encode = encode
        self.rate = _PRIOR_RATE.get(fmt, 30.0)

    def _stop_for(self, start: int, stop: int) -> int:
        """The end of the next slice from ``start``: at most ``batch`` rows, and at most the
        units that fit the limit at the current rate."""
        end = min(start + self.batch, stop)
        room = self.limit.bytes / self.rate
        fits = int(np.searchsorted(self.cum, self.cum[start] + room, side="right")) - 1
        return max(start + 1, min(end, fits))

    def slices(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, int, Any]]:
        """Yield ``(a, b, payload)`` covering rows ``start:stop`` in order."""
        stop = self.n if stop is None else stop
        while start < stop:
            end = self._stop_for(start, stop)
            payload, size = self.encode(start, end)
            while size > self.limit.bytes:
                if end - start == 1:
                    raise RowTooLarge(
                        f"row {start} alone takes {size:,} bytes, over the limit of {self.limit.bytes:,} "
                        "bytes per request (MAX_BODY_BYTES)"
                    )
                end = start + max(1, min(end - start - 1, int((end - start) * 0.9 * self.limit.bytes / size)))
                payload, size = self.encode(start, end)
            measured = size / max(1, int(self.cum[end] - self.cum[start]))
            # jump up at once, come down slowly: the next slice is rarely encoded twice
            self.rate = max(1.1 * measured, 0.8 * self.rate)
            yield start, end, payload
            start = end


def _label_bytes(v: float) -> bytes:
    return str(int(v) if float(v).is_integer() else float(v)).encode()


def stream_entries(X, y: np.ndarray, fmt: str, start: int, stop: int) -> list[dict[bytes, bytes]]:
    """Stream entries (see ``docs/stream.md``) of rows ``start:stop`` of a CSR matrix.

    ``fmt``: ``"xd"`` (little-endian float64 bytes, dense), ``"xb"`` (little-endian float32
    bytes, dense: values rounded to float32), ``"dense"`` (``x`` = JSON list) or ``"sparse"``
    (``x`` = JSON ``{"index": value}`` with 0-based indices).  ``"xd"``, ``"dense"`` and
    ``"sparse"`` carry the float64 values of ``X`` exactly (orjson writes the shortest
    round-tripping decimal).
    """
    part = X[start:stop]
    labels = [_label_bytes(v) for v in y[start:stop]]
    if fmt in BINARY_DTYPES:
        field, dtype = fmt.encode(), BINARY_DTYPES[fmt]
        block = np.ascontiguousarray(part.toarray(), dtype=dtype)
        return [{b"y": lab, field: row.tobytes()} for lab, row in zip(labels, block)]
    if fmt == "dense":
        block = part.toarray()
        return [
            {b"y": lab, b"x": orjson.dumps(row, option=orjson.OPT_SERIALIZE_NUMPY)}
            for lab, row in zip(labels, block)
        ]
    out = []
    indices, data, indptr = part.indices.tolist(), part.data.tolist(), part.indptr.tolist()
    for i, lab in enumerate(labels):
        lo, hi = indptr[i], indptr[i + 1]
        row = dict(zip(map(str, indices[lo:hi]), data[lo:hi]))
        out.append({b"y": lab, b"x": orjson.dumps(row)})
    return out


def pack_xadd(key: str, entries: list[dict[bytes, bytes]]) -> bytes:
    """RESP encoding of ``XADD key * field value ...`` for each entry, concatenated (one
    write for a whole batch; about 5x less client CPU than redis-py's pipeline)."""
    kb = key.encode()
    out = []
    for fields in entries:
        parts = [b"*%d\r\n$4\r\nXADD\r\n$%d\r\n%s\r\n$1\r\n*\r\n" % (3 + 2 * len(fields), len(kb), kb)]
        for k, v in fields.items():
            parts.append(b"$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v))
        out.append(b"".join(parts))
    return b"".join(out)


def send_packed(client, packed: bytes, count: int) -> list[bytes]:
    """Write ``count`` packed commands (:func:`pack_xadd`) in one round trip; returns the replies.

    Raises
    ------
    redis.RedisError
        On a connection error or an error reply (e.g. the key holds another type).
    """
    conn = client.connection_pool.get_connection()
    try:
        conn.send_packed_command([packed])
        replies = [conn.read_response() for _ in range(count)]
    except BaseException:
        conn.disconnect()  # replies may be left unread: never reuse this connection
        raise
    finally:
        client.connection_pool.release(conn)
    return replies


def xadd_batch(client, key: str, entries: list[dict[bytes, bytes]]) -> list[bytes]:
    """XADD ``entries`` (fields and values as bytes) to ``key`` in one round trip, in order;
    returns their IDs.

    Raises
    ------
    redis.RedisError
        On a connection error or an error reply (e.g. the key holds another type).
    """
    return send_packed(client, pack_xadd(key, entries), len(entries))


@dataclass
class ProduceStats:
    """What :func:`produce` wrote: round trips, entries and bytes (entry = its fields and
    values; payload = the RESP commands of one round trip)."""

    round_trips: int = 0
    entries: int = 0
    entry_bytes: int = 0
    max_entry_bytes: int = 0
    max_payload_bytes: int = 0


def produce(
    client,
    key: str,
    X,
    y: np.ndarray,
    fmt: str,
    batch: int,
    passes: int,
    shuffle_seed: int | None,
    progress: Callable[[int], Any],
    max_bytes: int = DEFAULT_MAX_BYTES,
    stats: ProduceStats | None = None,
) -> tuple[bytes | None, bytes | None, int]:
    """XADD every row of the CSR matrix ``X`` (labels ``y``) to ``key``, up to ``batch`` entries
    and ``max_bytes`` bytes per round trip (:class:`RowSlicer`), ``passes`` times, in file
    order or, with ``shuffle_seed``, in a new permutation per pass drawn from
    ``numpy.random.default_rng(shuffle_seed)``.  ``progress(n)`` is told each round trip;
    ``stats`` (optional) is filled in.  Returns ``(first ID, last ID, entries produced)``.

    Raises
    ------
    RowTooLarge
        A single entry is over ``max_bytes``.
    """
    n = X.shape[0]
    rng = np.random.default_rng(shuffle_seed) if shuffle_seed is not None else None
    stats = stats if stats is not None else ProduceStats()
    limit = ByteLimit(max_bytes)
    first_id = last_id = None
    sent = 0
    rate = None
    for _ in range(passes):
        Xp, yp = X, y
        if rng is not None:
            perm = rng.permutation(n)
            Xp, yp = X[perm], y[perm]

        def encode(a: int, b: int, Xp=Xp, yp=yp) -> tuple[tuple[bytes, list], int]:
            entries = stream_entries(Xp, yp, fmt, a, b)
            packed = pack_xadd(key, entries)
            return (packed, entries), len(packed)

        slicer = RowSlicer(Xp, fmt, batch, limit, encode)
        if rate is not None:
            slicer.rate = rate
        for a, b, (packed, entries) in slicer.slices():
            ids = send_packed(client, packed, len(entries))
            sizes = [sum(len(k) + len(v) for k, v in e.items()) for e in entries]
            stats.round_trips += 1
            stats.entries += len(entries)
            stats.entry_bytes += sum(sizes)
            stats.max_entry_bytes = max(stats.max_entry_bytes, max(sizes))
            stats.max_payload_bytes = max(stats.max_payload_bytes, len(packed))
            first_id = first_id or ids[0]
            last_id = ids[-1]
            sent += b - a
            progress(b - a)
        rate = slicer.rate
    return first_id, last_id, sent
