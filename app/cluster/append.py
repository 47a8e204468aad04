"""``POST /learn`` for a model this learner does not own, appended to the model's stream
(``docs/cluster.md``, "Any node takes any request"; the other route, forwarding to the owner,
is :mod:`.forward`).

The owner applies the entries exactly once like any streamed entry (validated entry by entry
there, bad rows dead-lettered with their reason); the answer is ``202`` with the entry IDs.  The
shape of the body is checked here (``X`` and ``y`` lists of equal, non-zero length, at most
``MAX_APPEND_ROWS`` rows, ``w`` a list of one number per row; the body itself is bounded by
``max_body_bytes``), so that what a caller can make this node write is bounded like ``/learn``.

The appends of a forward (:mod:`.forward`: the owner's, and the forwarding learner's fallback)
are made **once per forward id** (:data:`APPEND_ONCE`): the entries and a marker
``svmstream:{m}:examples:once:<id>`` holding their IDs (kept :data:`ONCE_TTL_MS`) are written in
one script, and a second append with the same id writes nothing and answers the first one's
IDs.  A forward whose outcome is unknown (the owner died while answering) falls back to
appending under the forward's id: if the owner had appended, nothing is written twice.
"""

from __future__ import annotations

from typing import Any

import orjson

from svmstream.app.errors import InvalidInput, ModelNotFound

MAX_APPEND_ROWS = 100_000
#: The shortest time the marker of an append made once stays (ms; :func:`.forward.once_ttl_ms`).
ONCE_TTL_MS = 600_000

APPEND_ONCE = """
local done = redis.call('get', KEYS[2])
if done then
  return {done, 0}
end
local first, last = nil, nil
local i = 2
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  local id
  if n == 1 then
    id = redis.call('xadd', KEYS[1], '*', ARGV[i + 1], ARGV[i + 2])
  elseif n == 2 then
    id = redis.call('xadd', KEYS[1], '*', ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4])
  else
    id = redis.call('xadd', KEYS[1], '*', ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4],
                    ARGV[i + 5], ARGV[i + 6])
  end
  first = first or id
  last = id
  i = i + 1 + 2 * n
end
local ids = first .. ' ' .. last
redis.call('set', KEYS[2], ids, 'PX', ARGV[1])
return {ids, 1}
"""
"""KEYS: stream, once-marker; ARGV: ttl ms, then per entry its field count and fields.  Returns
``["<first id> <last id>", 1]``, or ``[.., 0]`` when that id was appended before (nothing
written)."""


def model_of(obj: Any, default_model: str) -> str:
    """The model a ``/learn`` body names (``"model"``), else the server's default."""
    name = obj.get("model") if isinstance(obj, dict) else None
    return name if isinstance(name, str) else default_model


def stream_entries(
    obj: Any, max_rows: int = MAX_APPEND_ROWS, labels_optional: bool = False
) -> list[dict[str, bytes]]:
    """One stream entry ``{"y", "x"[, "w"]}`` (JSON) per example of a ``/learn`` body;
    ``labels_optional``: a body without ``y`` gives entries without one (a novelty model, once
    the owner validated the body)."""
    X, y, w = obj.get("X", obj.get("x")), obj.get("y"), obj.get("w")
    if not isinstance(X, list) or not X:
        raise InvalidInput("X must be a non-empty list of examples", field="X")
    if not (y is None and labels_optional) and (not isinstance(y, list) or len(y) != len(X)):
        raise InvalidInput(f"y must be a list of {len(X)} labels, one per row of X", field="y")
    if w is not None and (not isinstance(w, list) or len(w) != len(X)):
        raise InvalidInput(f"w must be a list of {len(X)} weights, one per row of X", field="w")
    if len(X) > max_rows:
        raise InvalidInput(f"at most {max_rows} examples per request", field="X")
    out = []
    for i, row in enumerate(X):
        if not isinstance(row, (list, dict)):
            raise InvalidInput("an example is a list of numbers or an {index: value} object", field=f"X[{i}]")
        entry = {"x": orjson.dumps(row)}
        if y is not None:
            if isinstance(y[i], (list, dict)) or y[i] is None:
                raise InvalidInput("a label is a number or a string", field=f"y[{i}]")
            entry["y"] = orjson.dumps(y[i])
        if w is not None:
            if isinstance(w[i], (bool, list, dict, str)) or w[i] is None:
                raise InvalidInput("a weight is a number", field=f"w[{i}]")
            entry["w"] = orjson.dumps(w[i])
        out.append(entry)
    return out


def append_once(
    client, key: str, once_id: str, entries: list[dict[str, bytes]], ttl_ms: int = ONCE_TTL_MS
) -> tuple[str, str, bool]:
    """XADD ``entries`` to ``key`` unless the append ``once_id`` was made before (its marker
    kept ``ttl_ms``); returns ``(first id, last id, written)``."""
    args: list[Any] = [ttl_ms]
    for fields in entries:
        args.append(len(fields))
        for k, v in fields.items():
            args += [k, v]
    ids, written = client.eval(APPEND_ONCE, 2, key, f"{key}:once:{once_id}", *args)
    first, _, last = ids.decode().partition(" ")
    return first, last, bool(written)


def append_learn(
    coordinator,
    obj: Any,
    default_model: str,
    max_rows: int = MAX_APPEND_ROWS,
    once_id: str | None = None,
    once_ttl: int = ONCE_TTL_MS,
) -> dict[str, Any]:
    """Append the examples of ``obj`` to the stream of their model, owned by another learner
    (once per ``once_id``, :func:`append_once`; None: a plain MULTI of XADDs).

    Raises :class:`ModelNotFound` when the deployment has no such model, :class:`InvalidInput`
    on a malformed body."""
    name = model_of(obj, default_model)
    if not isinstance(obj, dict) or not coordinator.catalogued(name):
        raise ModelNotFound(f"model {name!r} not found")
    entries = stream_entries(obj, max_rows)
    key = coordinator.settings.stream_keys(name)[0]
    if once_id is not None:
        first, last, _ = append_once(coordinator.client, key, once_id, entries, once_ttl)
    else:
        pipe = coordinator.client.pipeline(transaction=True)
        for fields in entries:
            pipe.xadd(key, fields)
        ids = pipe.execute()
        first, last = ids[0].decode(), ids[-1].decode()
    return {
        "model": name,
        "n_examples": len(entries),
        "queued": True,
        "route": "appended",
        "stream": key,
        "owner": coordinator.owner_of(name),
        "first_id": first,
        "last_id": last,
    }
