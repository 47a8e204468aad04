"""Which prediction ids a model has learned: its feedback ledger (``docs/feedback.md``).

Each batch of labelled ids handed to a model's learner gets the next *feedback sequence
number* ``s``; the batch carries ``{"feedback_seq": s}`` into the view it publishes (the
view's ``extra``, saved in every snapshot).  So a snapshot knows exactly which feedback
batches its state holds: those numbered up to its ``feedback_seq``.

The ledger is appended to a per-model log, ``<snapshot_dir>/.feedback/<model>.log``, *before*
the batch is queued (one line ``a <seq> <unix time> <id> <id> ...``; ``x <seq>`` when the
batch failed and the model rolled back).  At start-up (first use of the model) the log is
read back keeping the batches numbered up to the restored snapshot's ``feedback_seq``: ids
learned after it are forgotten, exactly as the model forgot their rows, so a Redis stream
replayed from that snapshot learns them again and nothing else.  Lines are written with
``write()`` (they survive a killed process; a machine crash may lose the last ones).

An id is remembered until ``feedback_ttl_s`` after its feedback (its prediction was older,
so its record has expired from the store by then and it could not be learned anyway).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

log = logging.getLogger("svmstream.feedback")


class Ledger:
    """The learned ids of one model handle.

    Parameters
    ----------
    handle : the :class:`~svmstream.app.models.handle.ModelHandle` (identity: a replaced
        model gets a new ledger)
    path : Path or None, the log (None: kept in memory only)
    ttl_s : float
    """

    def __init__(self, handle, path: Path | None, ttl_s: float):
        self.handle = handle
        self.path = path
        self.ttl_s = ttl_s
        #: held from classifying a batch's ids until the batch is queued (order = numbering)
        self.lock = threading.RLock()
        self._mutex = threading.Lock()  # the dict and the file (a learner callback takes only this)
        self.seq = 0
        #: id -> (seq, unix time of its feedback)
        self.learned: dict[str, tuple[int, float]] = {}
        self._lines = 0
        self._file = None
        self._restore(int(handle.view.extra.get("feedback_seq", 0) or 0))

    def _restore(self, upto: int) -> None:
        """Read the log back, keeping the batches numbered ``<= upto`` that did not fail, then
        rewrite it with those only (later numbers are given again)."""
        batches: dict[int, tuple[float, list[str]]] = {}
        if self.path is not None and self.path.exists():
            with open(self.path) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) >= 3 and parts[0] == "a":
                        batches[int(parts[1])] = (float(parts[2]), parts[3:])
                    elif len(parts) == 2 and parts[0] == "x":
                        batches.pop(int(parts[1]), None)
        self.seq = upto
        for seq, (t, ids) in sorted(batches.items()):
            if seq <= upto:
                for rid in ids:
                    self.learned[rid] = (seq, t)
        self._rewrite()

    def _rewrite(self) -> None:
        """Write the log anew from :attr:`learned` (atomically) and reopen it for appends."""
        if self.path is None:
            return
        if self._file is not None:
            self._file.close()
        by_seq: dict[int, tuple[float, list[str]]] = {}
        for rid, (seq, t) in self.learned.items():
            by_seq.setdefault(seq, (t, []))[1].append(rid)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            for seq, (t, ids) in sorted(by_seq.items()):
                f.write(f"a {seq} {t!r} {' '.join(ids)}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._lines = len(by_seq)
        self._file = open(self.path, "a", buffering=1)  # noqa: SIM115  (appended to until closed)

    def commit(self, ids: list[str], now: float | None = None) -> int:
        """Under :attr:`lock`: number the next batch, log it, mark ``ids`` learned; returns its
        sequence number (the caller queues the batch before releasing the lock)."""
        now = time.time() if now is None else now
        with self._mutex:
            self.seq += 1
            if self._file is not None:
                self._file.write(f"a {self.seq} {now!r} {' '.join(ids)}\n")
                self._lines += 1
            for rid in ids:
                self.learned[rid] = (self.seq, now)
            return self.seq

    def failed(self, seq: int, ids: list[str]) -> None:
        """The batch ``seq`` was not learned (refused or rolled back): forget its ids."""
        with self._mutex:
            for rid in ids:
                if self.learned.get(rid, (None,))[0] == seq:
                    del self.learned[rid]
            if self._file is not None:
                self._file.write(f"x {seq}\n")
                self._lines += 1

    def rolled_back(self, after: int, upto: int) -> int:
        """A rollback made the model the version that held the feedback batches numbered up to
        ``after``: the ids of the batches ``after < seq <= upto`` (learned before the rollback,
        no longer in the model) are forgotten, so labelling them again learns them again; the
        log is rewritten.  Returns how many ids were forgotten.  Numbers are not given again."""
        with self._mutex:
            gone = [rid for rid, (seq, _) in self.learned.items() if after < seq <= upto]
            for rid in gone:
                del self.learned[rid]
            if gone:
                self._rewrite()
            return len(gone)

    def compact(self, now: float | None = None) -> None:
        """Forget ids whose feedback is older than the TTL; rewrite the log when it holds
        more than twice the batches still remembered."""
        now = time.time() if now is None else now
        with self._mutex:
            cutoff = now - self.ttl_s
            old = [rid for rid, (_, t) in self.learned.items() if t < cutoff]
            for rid in old:
                del self.learned[rid]
            live = len({seq for seq, _ in self.learned.values()})
            if self._lines > 2 * live + 16:
                self._rewrite()

    def close(self) -> None:
        with self._mutex:
            if self._file is not None:
                self._file.close()
                self._file = None
