"""``POST /learn`` on a learner that does not own the model: the batch goes to the model's
stream (``docs/cluster.md``, "Any node takes any request").

The owner applies it exactly once like any streamed entry (validated entry by entry there, bad
rows dead-lettered with their reason); the answer is ``202`` with the entry IDs.  Appending was
chosen over forwarding the request to the owner: it needs no owner address, survives a hand-off
in the middle (the entries wait in the stream), and costs one Redis round trip.  The shape of
the body is checked here (``X`` and ``y`` lists of equal, non-zero length, at most
``MAX_APPEND_ROWS`` rows; the body itself is bounded by ``max_body_bytes``), so that what a caller can make this node write is bounded like ``/learn``.
"""

from __future__ import annotations

from typing import Any

import orjson

from svmstream.app.errors import InvalidInput, ModelNotFound

MAX_APPEND_ROWS = 100_000


def stream_entries(obj: Any, max_rows: int = MAX_APPEND_ROWS) -> list[dict[str, bytes]]:
    """One stream entry ``{"y", "x"}`` (JSON) per example of a ``/learn`` body."""
    X, y = obj.get("X"), obj.get("y")
    if not isinstance(X, list) or not X:
        raise InvalidInput("X must be a non-empty list of examples", field="X")
    if not isinstance(y, list) or len(y) != len(X):
        raise InvalidInput(f"y must be a list of {len(X)} labels, one per row of X", field="y")
    if len(X) > max_rows:
        raise InvalidInput(f"at most {max_rows} examples per request", field="X")
    out = []
    for i, (row, label) in enumerate(zip(X, y)):
        if not isinstance(row, (list, dict)):
            raise InvalidInput("an example is a list of numbers or an {index: value} object", field=f"X[{i}]")
        if isinstance(label, (list, dict)) or label is None:
            raise InvalidInput("a label is a number or a string", field=f"y[{i}]")
        out.append({"y": orjson.dumps(label), "x": orjson.dumps(row)})
    return out


def append_learn(
    coordinator, obj: Any, default_model: str, max_rows: int = MAX_APPEND_ROWS
) -> dict[str, Any]:
    """XADD the examples of ``obj`` to the stream of their model, owned by another learner.

    Raises :class:`ModelNotFound` when the deployment has no such model, :class:`InvalidInput`
    on a malformed body."""
    name = obj.get("model") if isinstance(obj, dict) else None
    name = name if isinstance(name, str) else default_model
    if not isinstance(obj, dict) or not coordinator.catalogued(name):
        raise ModelNotFound(f"model {name!r} not found")
    entries = stream_entries(obj, max_rows)
    key = coordinator.settings.stream_keys(name)[0]
    pipe = coordinator.client.pipeline(transaction=True)
    for fields in entries:
        pipe.xadd(key, fields)
    ids = pipe.execute()
    return {
        "model": name,
        "n_examples": len(entries),
        "queued": True,
        "stream": key,
        "owner": coordinator.owner_of(name),
        "first_id": ids[0].decode(),
        "last_id": ids[-1].decode(),
    }
