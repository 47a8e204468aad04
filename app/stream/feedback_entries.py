"""Stream entries that label a remembered prediction by id: ``{fid, y}`` (``docs/feedback.md``).

A producer that only has the id a ``/predict`` with ``remember`` answered adds
``XADD svmstream:<model>:examples * fid <id> y <label>`` to the model's stream.  Before a
read is validated, :class:`FeedbackResolution` turns each such entry into the ordinary entry
of its remembered row -- ``xd`` (the float64 bytes) for a dense row, a sparse JSON ``x`` (the
same float64 values: JSON numbers round-trip) for a sparse one -- so the row is validated and
learned exactly as the entry a producer with the features would have written.  An id already
learned by the model answers ``duplicate``, an unknown, expired or other model's id
``expired``: such entries go to the dead-letter stream with that reason (acknowledged at
once; they learn nothing and are never read again).

Exactly once through crashes: the model's ledger (:mod:`svmstream.app.models.feedback_ledger`)
is locked from the resolution until the batch is queued, and the batch carries its ledger
number into the view its snapshot saves.  After a crash the ledger is read back as of the
restored snapshot, the entries after it are read again and resolve as they did the first time.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import numpy as np
import orjson

from svmstream.app.ingest.labels import parse_stream_label
from svmstream.app.models.feedback_store import belongs, decode_row

FID = b"fid"


def has_fid(fields: Any) -> bool:
    """Whether an entry (mapping or raw ``[field, value, ...]`` list) has a ``fid`` field."""
    if type(fields) is list:
        return FID in fields[::2] or "fid" in fields[::2]
    return FID in fields or "fid" in fields


def _as_dict(fields: Any) -> dict:
    if type(fields) is list:
        fields = dict(zip(fields[::2], fields[1::2]))
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in fields.items()}


def _row_fields(y_raw: Any, row: dict[str, Any]) -> dict[bytes, Any]:
    """The ordinary entry of a remembered row with label ``y_raw``."""
    if not row["sparse"]:
        return {b"y": y_raw, b"xd": np.ascontiguousarray(row["x"], dtype="<f8").tobytes()}
    sparse = {str(int(i)): float(v) for i, v in zip(row["indices"].tolist(), row["x"].tolist())}
    return {b"y": y_raw, b"x": orjson.dumps(sparse)}


class FeedbackResolution:
    """The ``fid`` entries of one read, resolved under the model's ledger lock.

    Use: ``res = FeedbackResolution(feedback, handle, fresh)`` (takes the lock), read
    :attr:`entries` (what to validate, in order) and :attr:`refused`, then :meth:`extra` with
    the positions (in :attr:`entries`) validation kept and :meth:`attach` with the learner's
    future; :meth:`release` in a ``finally`` (the lock)."""

    def __init__(self, feedback, handle, fresh: list[tuple[bytes, Any]]):
        self.feedback = feedback
        self.handle = handle
        self.ledger = feedback.ledger(handle)
        self.meter = feedback.meter(handle.name)
        self._fid_pos: dict[int, tuple[str, dict, Any]] = {}
        self._seq: int | None = None
        self._ids: list[str] = []
        self.refused: list[tuple[bytes, Any, str]] = []
        self.entries: list[tuple[bytes, Any]] = []
        asked = [(k, _as_dict(f)) for k, (_, f) in enumerate(fresh) if has_fid(f)]
        rids = [_text(d.get("fid")) for _, d in asked]
        records = feedback.store.get(rids, model=handle.name)
        self.ledger.lock.acquire()
        self._locked = True
        self._resolve(fresh, dict(zip((k for k, _ in asked), zip(asked, rids, records))))

    def _resolve(self, fresh, by_pos: dict[int, tuple]) -> None:
        taken: set[str] = set()
        name = self.handle.name
        counts = {"received": len(by_pos), "duplicate": 0, "expired": 0, "invalid": 0}
        for k, (eid, fields) in enumerate(fresh):
            if k not in by_pos:
                self.entries.append((eid, fields))
                continue
            (_, d), rid, rec = by_pos[k]
            if set(d) - {"fid", "y", "id"} or "y" not in d:
                counts["invalid"] += 1
                self.refused.append((eid, fields, "fid: an entry with fid has the fields fid and y only"))
                continue
            if rid in self.ledger.learned or rid in taken:
                counts["duplicate"] += 1
                self.refused.append((eid, fields, "fid: duplicate: this prediction id was already learned"))
                continue
            row = decode_row(rec) if belongs(rec, name, self.handle.generation) else None
            if row is None:
                counts["expired"] += 1
                self.refused.append(
                    (eid, fields, "fid: expired: no remembered prediction of this model has this id")
                )
                continue
            taken.add(rid)
            self._fid_pos[len(self.entries)] = (rid, rec, d["y"])
            self.entries.append((eid, _row_fields(d["y"], row)))
        self.meter.count(**counts)

    def extra(self, good: list[int]) -> dict[str, Any]:
        """Number the batch of the kept positions ``good`` (ledger log written); returns the
        ``extra`` to publish (``{"feedback_seq": n}``, or ``{}`` without feedback rows)."""
        kept = [self._fid_pos[k] for k in good if k in self._fid_pos]
        if not kept:
            return {}
        self._ids = [rid for rid, _, _ in kept]
        self._rows = [row for _, row, _ in kept]
        self._arrived = [_label(y) for _, _, y in kept]
        self._seq = self.ledger.commit(self._ids)
        return {"feedback_seq": self._seq}

    def attach(self, future: Future) -> None:
        """The learner's future of the batch: a failure forgets the ids, success feeds the meter."""
        if self._seq is None:
            return
        seq, ids, ledger = self._seq, self._ids, self.ledger
        future.add_done_callback(lambda f: f.exception() is not None and ledger.failed(seq, ids))
        self.feedback.watch(future, ledger, self.meter, self._rows, self._arrived)

    def release(self) -> None:
        if self._locked:
            self._locked = False
            self.ledger.lock.release()


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else str(value)


def _label(raw: Any) -> Any:
    try:
        return parse_stream_label(raw)
    except Exception:
        return _text(raw)
