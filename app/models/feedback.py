"""Labels that arrive later: remembered predictions learned by id (``docs/feedback.md``).

:class:`Feedback` (one per process, ``registry.feedback``) joins the feedback store
(:mod:`.feedback_store`), each model's ledger of learned ids (:mod:`.feedback_ledger`) and its
served-accuracy meter (:mod:`.feedback_meters`):

* :meth:`Feedback.remember` -- ``/predict`` with ``remember``: one record and id per row;
* :meth:`Feedback.learn` -- ``POST /feedback``: each id is learned at most once (``duplicate``
  otherwise), an unknown, expired, evicted or other model's id answers ``expired``; the rows
  to learn go through :meth:`ModelHandle.submit` as one batch, exactly as the rows of a
  ``/learn`` body would (dense float64 rows, or CSR rows for sparse ones);
* :meth:`Feedback.resolve_stream` -- Redis stream entries ``{fid, y}`` become ordinary entries
  (``xd`` bytes or sparse JSON ``x``, the same float64 values) before validation.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import scipy.sparse as sp

from svmstream.app.errors import InvalidInput
from svmstream.app.ingest.decode import describe
from svmstream.app.ingest.weights import parse_weights
from svmstream.app.models.feedback_ledger import Ledger
from svmstream.app.models.feedback_memory import MemoryStore
from svmstream.app.models.feedback_meters import ServedMeter
from svmstream.app.models.feedback_store import RedisStore, RowBatch, belongs, decode_row

log = logging.getLogger("svmstream.feedback")

#: Most ids in one ``/feedback`` body.
MAX_FEEDBACK_IDS = 100_000
#: Longest id accepted (ours are 22 characters in Redis, 32 in the process).
MAX_ID_CHARS = 64


def rows_matrix(records: list[dict[str, bytes]]) -> tuple[np.ndarray | sp.csr_matrix, bool]:
    """``(X, sparse)`` of stored records: a dense (n, d) float64 matrix when every row was
    dense (one buffer), else a CSR matrix as wide as the widest row (rows as they were sent)."""
    widths = {r["w"] for r in records}
    if len(widths) == 1 and all(r["k"] == b"d" for r in records):
        n, d = len(records), int(next(iter(widths)))
        return np.frombuffer(b"".join([r["x"] for r in records]), dtype="<f8").reshape(n, d).copy(), False
    rows = [decode_row(r) for r in records]
    width = max(r["width"] for r in rows)
    data, indices, indptr = [], [], [0]
    for r in rows:
        if r["sparse"]:
            data.append(r["x"])
            indices.append(r["indices"])
        else:
            nz = np.flatnonzero(r["x"])
            data.append(r["x"][nz])
            indices.append(nz.astype(np.int64))
        indptr.append(indptr[-1] + data[-1].size)
    X = sp.csr_matrix(
        (np.concatenate(data), np.concatenate(indices), np.asarray(indptr)), shape=(len(rows), width)
    )
    X.sort_indices()
    return X, True


def served_figures(records: list[dict[str, bytes]], arrived: list[Any], now: float):
    """``(served labels, probability served for each arriving label or None, delays (n,) s)``
    of stored records."""
    served = [orjson.loads(r["l"]) for r in records]
    index_of: dict[bytes, dict] = {}
    probs: list[float | None] = []
    for r, label in zip(records, arrived):
        c = r.get("c")
        if c is None:
            probs.append(None)
            continue
        where = index_of.get(c)
        if where is None:
            where = index_of[c] = {v: k for k, v in enumerate(orjson.loads(c))}
        k = where.get(label)
        probs.append(float(np.frombuffer(r["p"], dtype="<f8")[k]) if k is not None else 0.0)
    delays = np.maximum(0.0, now - np.array([float(r["t"]) for r in records]))
    return served, probs, delays


def check_feedback_body(obj: Any) -> tuple[str | None, list[str], list[Any], Any]:
    """``(model, ids, y, w)`` of a decoded ``/feedback`` body (``w``: (n,) float64 importance
    weights, or None: every row weighs 1; ``docs/weights.md``).

    Raises InvalidInput (422) naming the field: not an object, unknown field, ``ids`` not a
    non-empty list of strings (at most :data:`MAX_FEEDBACK_IDS`), ``y`` not a list as long,
    ``w[i]`` not a finite number >= 0."""
    if not isinstance(obj, dict):
        raise InvalidInput(f"body: expected a JSON object, got {describe(obj)}", field="body")
    unknown = sorted(set(obj) - {"model", "ids", "y", "w"})
    if unknown:
        raise InvalidInput(
            f"{unknown[0]}: unknown field; allowed fields are ['ids', 'model', 'w', 'y']", field=unknown[0]
        )
    model = obj.get("model")
    if model is not None and not isinstance(model, str):
        raise InvalidInput(f"model: expected a string, got {describe(model)}", field="model")
    ids, y = obj.get("ids"), obj.get("y")
    if not isinstance(ids, list) or not ids:
        raise InvalidInput(
            f"ids: expected a non-empty list of prediction ids, got {describe(ids)}", field="ids"
        )
    if len(ids) > MAX_FEEDBACK_IDS:
        raise InvalidInput(f"ids: {len(ids)} ids, at most {MAX_FEEDBACK_IDS} per request", field="ids")
    for i, rid in enumerate(ids):
        if not isinstance(rid, str) or not 0 < len(rid) <= MAX_ID_CHARS:
            raise InvalidInput(
                f"ids[{i}]: expected a prediction id (a string), got {describe(rid)}",
                field=f"ids[{i}]",
                index=i,
            )
    if not isinstance(y, list):
        raise InvalidInput(f"y: expected a list of labels, got {describe(y)}", field="y")
    if len(y) != len(ids):
        raise InvalidInput(f"y: has {len(y)} labels for {len(ids)} ids", field="y")
    return model, ids, y, parse_weights(obj.get("w"), len(ids))


class Feedback:
    """The process's feedback: store, ledgers and meters.

    Parameters
    ----------
    store : :class:`~.feedback_memory.MemoryStore` or :class:`~.feedback_store.RedisStore`
    ttl_s : float, ``feedback_ttl_s``
    window : int, ``feedback_window``
    ledger_dir : Path or None, where the ledgers' logs go (None: in memory only)
    """

    #: ``submit(handle, X, y, **kwargs)``: how a batch is queued (the registry's, with its bounds)
    submit: Callable[..., Future] = staticmethod(lambda handle, X, y, **kwargs: handle.submit(X, y, **kwargs))
    #: ``generation_of(name)``: the identity of model ``name`` (the registry's handle's)
    generation_of: Callable[[str], str | None] = staticmethod(lambda name: None)

    def __init__(self, store, ttl_s: float, window: int, ledger_dir: Path | None = None):
        self.store = store
        self.ttl_s = ttl_s
        self.window = window
        self.ledger_dir = ledger_dir
        self._lock = threading.Lock()
        self._ledgers: dict[str, Ledger] = {}
        self._meters: dict[str, ServedMeter] = {}

    # ------------------------------------------------------------------ predictions
    def remember(
        self, view, X, decision: np.ndarray, labels: list[Any], proba=None, authenticated: bool = True
    ) -> list[str]:
        """Keep each row of a served prediction; returns one id per row (in order).  A
        tokenless request (``authenticated`` False) writes into its model's tokenless quota
        (:class:`~.feedback_memory.MemoryStore`), which never evicts an authenticated record.

        ``X``: the rows as conformed for ``view`` (dense float64 (n, d) or CSR); ``decision``:
        (n,) or (n, K) float64; ``labels``: the served JSON labels; ``proba``: the served
        ``(classes, (n, K) probabilities)`` when the answer has them, else None: the served
        log-loss is that of probabilities that were served (computing them for every remembered
        row cost a single-row prediction 0.12 ms of its 0.17 ms of remembering)."""
        now = time.time()
        generation = self.generation_of(view.name)
        batch = RowBatch(
            view.name, view.version, now, X, [orjson.dumps(v) for v in labels], decision, proba, generation
        )
        return self.store.put_batch(batch, now, model=view.name, authenticated=authenticated)

    # ------------------------------------------------------------------ ledgers, meters
    def ledger(self, handle) -> Ledger:
        """The ledger of ``handle`` (read back from its log on first use; a new one for a
        replaced model)."""
        with self._lock:
            ledger = self._ledgers.get(handle.name)
            if ledger is None or ledger.handle is not handle:
                if ledger is not None:
                    ledger.close()
                path = self.ledger_dir / f"{handle.name}.log" if self.ledger_dir is not None else None
                ledger = self._ledgers[handle.name] = Ledger(handle, path, self.ttl_s)
            return ledger

    def meter(self, name: str) -> ServedMeter:
        """The served-accuracy meter of model ``name`` (created on first use)."""
        meter = self._meters.get(name)
        if meter is None:
            with self._lock:
                meter = self._meters.setdefault(name, ServedMeter(self.window))
        return meter

    def figures(self, name: str) -> dict[str, Any]:
        """What ``GET /models/{name}`` shows of the feedback (:meth:`ServedMeter.figures`)."""
        return self.meter(name).figures()

    def dashboard_figures(self, name: str) -> dict[str, Any]:
        """``served_accuracy`` and ``served_log_loss`` of ``name`` (None without feedback yet)."""
        meter = self._meters.get(name)
        figures = meter.figures() if meter is not None else {}
        return {k: figures.get(k) for k in ("served_accuracy", "served_log_loss")}

    def meters(self) -> dict[str, ServedMeter]:
        with self._lock:
            return dict(self._meters)

    # ------------------------------------------------------------------ learning
    def classify(
        self, ledger: Ledger, handle, ids: list[str], records: list
    ) -> tuple[list[int], list[int], list[int], list]:
        """Under the ledger's lock: ``(learn, duplicate, expired, rows)`` positions of ``ids``
        and the stored records to learn.  An id of another model, or of a model of that name
        replaced since (another generation), is ``expired`` (never learned), id by id."""
        learn, dup, expired, rows = [], [], [], []
        taken: set[str] = set()
        name, generation = handle.name, handle.generation
        for i, (rid, rec) in enumerate(zip(ids, records)):
            if rid in ledger.learned or rid in taken:
                dup.append(i)
                continue
            if not belongs(rec, name, generation):
                expired.append(i)
                continue
            taken.add(rid)
            learn.append(i)
            rows.append(rec)
        return learn, dup, expired, rows

    def learn(self, handle, ids: list[str], y: list[Any], w=None) -> tuple[Future | None, dict[str, Any]]:
        """``POST /feedback`` for a validated body: queue the learnable rows as one batch
        (``w``: their importance weights, None: ones).

        Returns ``(future of the new view or None, answer)``; the answer has ``learned``,
        ``duplicate``, ``expired`` (counts) and their ``*_indices``.  Raises InvalidInput (a bad
        label: nothing learned), LearnerBusy, ModelClosed, BatchModelReadOnly."""
        handle.codec.encode_with_new(y)  # every label checked before anything is learned
        records = self.store.get(ids, model=handle.name)
        ledger = self.ledger(handle)
        meter = self.meter(handle.name)
        with ledger.lock:
            learn, dup, expired, rows = self.classify(ledger, handle, ids, records)
            answer = {
                "model": handle.name,
                "learned": len(learn),
                "duplicate": len(dup),
                "expired": len(expired),
                "learned_indices": learn,
                "duplicate_indices": dup,
                "expired_indices": expired,
            }
            meter.count(received=len(ids), duplicate=len(dup), expired=len(expired))
            if not learn:
                return None, answer
            arrived = [y[i] for i in learn]
            y_idx, new = handle.codec.encode_with_new(arrived)
            X, sparse = rows_matrix(rows)
            learned_ids = [ids[i] for i in learn]
            future = self.commit(
                ledger,
                learned_ids,
                lambda extra: self.submit(
                    handle,
                    X,
                    y_idx,
                    sparse=sparse,
                    new_labels=new,
                    extra=extra,
                    weights=None if w is None else w[learn],
                    schema_rows=True,
                ),  # fmt: skip
            )
        self.watch(future, ledger, meter, rows, arrived)
        return future, answer

    def commit(self, ledger: Ledger, ids: list[str], submit: Callable[[dict], Future]) -> Future:
        """Under the ledger's lock: number the batch, log its ids, queue it with
        ``submit({"feedback_seq": seq})``; a refused batch forgets its ids and re-raises."""
        with ledger.lock:
            seq = ledger.commit(ids)
            try:
                future = submit({"feedback_seq": seq})
            except BaseException:
                ledger.failed(seq, ids)
                raise
        future.add_done_callback(lambda f: f.exception() is not None and ledger.failed(seq, ids))
        return future

    def watch(self, future: Future, ledger: Ledger, meter: ServedMeter, rows: list, arrived: list) -> None:
        """When ``future`` succeeds: the served accuracy, log-loss and delays of ``rows`` (stored
        records)."""

        def done(f: Future) -> None:
            if f.exception() is not None:
                return
            served, probs, delays = served_figures(rows, arrived, time.time())
            meter.add(served, arrived, probs, delays)
            meter.count(learned=len(rows))

        future.add_done_callback(done)

    # ------------------------------------------------------------------ upkeep
    def on_snapshot(self, handle, view, path) -> None:
        """Snapshot listener: compact the model's ledger (old ids forgotten, log rewritten)."""
        ledger = self._ledgers.get(handle.name)
        if ledger is not None and ledger.handle is handle:
            ledger.compact()

    def save(self) -> bool:
        """Save the in-process store (the snapshotter's round and shutdown)."""
        return self.store.save()

    def close(self) -> None:
        with self._lock:
            for ledger in self._ledgers.values():
                ledger.close()


def open_feedback(settings, registry) -> Feedback:
    """The process's :class:`Feedback`: a :class:`~.feedback_store.RedisStore` with
    ``redis_url``, else a :class:`~.feedback_memory.MemoryStore` kept in
    ``<snapshot_dir>/.feedback/store.json`` (when snapshots are on); ledgers in
    ``<snapshot_dir>/.feedback/``.  A learner also compacts a model's ledger at each snapshot."""
    folder = Path(settings.snapshot_dir) / ".feedback" if registry.store is not None else None
    # without a token every request is authenticated: no quota is set aside for tokenless ones
    tokenless = settings.token() is not None
    quotas = {
        "open_total_bytes": settings.feedback_open_max_bytes if tokenless else 0,
        "open_model_bytes": settings.feedback_open_model_bytes if tokenless else 0,
    }
    if settings.redis_url:
        import redis

        client = redis.Redis.from_url(settings.redis_url, socket_timeout=30.0)
        store: Any = RedisStore(client, settings.feedback_ttl_s, settings.feedback_max_bytes, **quotas)
    else:
        path = folder / "store.json" if folder is not None else None
        store = MemoryStore(settings.feedback_ttl_s, settings.feedback_max_bytes, path, **quotas)
    feedback = Feedback(store, settings.feedback_ttl_s, settings.feedback_window, folder)
    feedback.submit = registry.submit  # the server-wide bound on a model that grows applies too
    feedback.generation_of = lambda name: registry.get(name).generation
    if settings.role == "learner":
        registry.snapshot_listeners.append(feedback.on_snapshot)
    return feedback
