"""``svmstream replay`` of a file of named-field events: a CSV file with a header or a file of
JSON lines (``.csv``, ``.jsonl``/``.ndjson``; ``.gz``/``.bz2`` read directly), each row an
object of its fields sent to ``POST /learn`` as named-field JSON (``docs/fields.md``), then
``POST /models/{name}/flush``.

* The label is the field ``--label`` (default ``label``, else ``y``); an optional weight field
  ``--weight`` goes as ``w`` (``docs/weights.md``).  Both are taken out of the row.
* CSV cells have no types: a cell that reads as a finite number is that number, an empty cell
  is missing (null), ``true``/``false`` are booleans, anything else is a string (a category).
  JSON lines keep their JSON types.
* The rows go in the file's order (``--file-order``) or shuffled (``--shuffle SEED``), in
  batches of at most ``--batch`` rows; a refused batch stops the replay with the server's
  message (nothing of it was learned).
"""

from __future__ import annotations

import bz2
import csv
import gzip
import math
import sys
import time
from typing import Any

import numpy as np
import orjson

from svmstream.app.cli.client import http_client
from svmstream.app.cli.replay_bodies import ReplayError, check

#: File name endings read as named-field events.
NAMED_SUFFIXES = (".csv", ".jsonl", ".ndjson")


def is_named_file(path: str) -> bool:
    """Whether ``path`` is a CSV or JSON-lines file (compressed or not)."""
    base = path.removesuffix(".gz").removesuffix(".bz2").lower()
    return base.endswith(NAMED_SUFFIXES)


def _open(path: str):
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    if path.endswith(".bz2"):
        return bz2.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def csv_value(cell: str) -> Any:
    """A CSV cell as JSON: a finite number, null (empty), a boolean, or the string."""
    if cell == "":
        return None
    if cell in ("true", "false"):
        return cell == "true"
    try:
        value = float(cell)
    except ValueError:
        return cell
    if not math.isfinite(value) or "_" in cell:
        return cell
    return int(value) if value.is_integer() and cell.lstrip("+-").isdigit() else value


def read_events(path: str) -> list[dict[str, Any]]:
    """The file's rows as dicts (CSV with a header, or one JSON object per line)."""
    with _open(path) as f:
        if path.removesuffix(".gz").removesuffix(".bz2").lower().endswith(".csv"):
            return [{k: csv_value(v) for k, v in row.items()} for row in csv.DictReader(f)]
        rows = []
        for number, line in enumerate(f, start=1):
            if line.strip():
                value = orjson.loads(line)
                if not isinstance(value, dict):
                    raise ReplayError(f"{path}:{number}: expected a JSON object of named fields")
                rows.append(value)
        return rows


def split_events(rows: list[dict], label: str | None, weight: str | None):
    """``(rows without the label and weight, labels, weights or None)``.  Raises ReplayError
    naming the row without a label."""
    key = label or ("label" if rows and "label" in rows[0] else "y")
    y, w, out = [], [] if weight else None, []
    for i, row in enumerate(rows):
        row = dict(row)
        if key not in row or row[key] is None:
            raise ReplayError(f"row {i}: no label field {key!r} (--label names it)")
        y.append(row.pop(key))
        if weight:
            w.append(row.pop(weight, 1.0))
        out.append(row)
    return out, y, w


def run_named_replay(
    file: str, url: str, model: str = "default", batch: int = 1000, hyper: dict | None = None,
    label: str | None = None, weight: str | None = None, shuffle_seed: int | None = 0,
    token: str | None = None, out=sys.stderr,
) -> dict[str, Any]:  # fmt: skip
    """Replay a file of named-field events into a running service (see the module docstring);
    the model is created with ``hyper`` when it does not exist.  Returns ``examples``,
    ``seconds``, ``examples_per_s``, ``requests`` and ``model`` (GET /models info)."""
    rows, y, w = split_events(read_events(file), label, weight)
    order = (
        np.arange(len(rows))
        if shuffle_seed is None
        else np.random.default_rng(shuffle_seed).permutation(len(rows))
    )
    with http_client(url, token) as client:
        if client.get(f"/models/{model}").status_code == 404:
            check(
                client.put(f"/models/{model}", json={k: v for k, v in (hyper or {}).items() if v is not None})
            )
        t0, requests = time.perf_counter(), 0
        for lo in range(0, len(rows), batch):
            part = order[lo : lo + batch]
            body: dict[str, Any] = {"model": model, "X": [rows[i] for i in part], "y": [y[i] for i in part]}
            if w is not None:
                body["w"] = [w[i] for i in part]
            check(
                client.post(
                    "/learn", content=orjson.dumps(body), headers={"content-type": "application/json"}
                )
            )
            requests += 1
        check(client.post(f"/models/{model}/flush"))
        seconds = time.perf_counter() - t0
        info = check(client.get(f"/models/{model}"))
    print(f"replayed {len(rows):,} named-field events from {file} in {seconds:.2f} s", file=out)
    return {
        "file": file, "model_name": model, "examples": len(rows), "requests": requests, "seconds": seconds,
        "examples_per_s": len(rows) / seconds if seconds > 0 else float("inf"), "model": info,
        "order": "file" if shuffle_seed is None else f"shuffled (seed {shuffle_seed})",
    }  # fmt: skip
