"""A model's history: which of its snapshot files are kept, and why (``docs/versions.md``).

Every snapshot of a model is a version of it (``<model>-<seq>.svmstate``, its header's
``version`` = batches applied, the ``model_version`` predictions answer).  Retention keeps:

* the newest ``keep_versions`` files ("recent");
* every file *marked* with a reason — promoted, a rollback's target, the version a rollback
  made — in ``<snapshot_dir>/<model>/history.json`` (``{"format": 1, "generation": id,
  "marks": {seq: reason}}``, written atomically; the marks of another generation of the
  model — replaced, or deleted and created again — are not its marks);

within ``max_history_bytes`` per model: past it the oldest files go first, unmarked before
marked, and the newest file is never deleted (it is the live model).  A missing marks file
means no marks; a corrupt one is logged with its reason and read as no marks (never an error
to the caller).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from svmstream.solvers.persistence import write_atomic

log = logging.getLogger("svmstream.snapshots")

MARKS_FILE = "history.json"
MARKS_FORMAT = 1


@dataclass(frozen=True)
class KeptFile:
    """One snapshot file of a model: ``seq`` (file order), ``path``, ``size`` in bytes."""

    seq: int
    path: Path
    size: int


def read_marks(directory: Path, generation: str | None = None) -> dict[int, str]:
    """``seq -> reason`` of the marked files of the model in ``directory`` ({} when there is no
    marks file, or it holds another ``generation``'s marks when one is given; a corrupt one is
    logged at WARNING with its reason and read as {})."""
    path = Path(directory) / MARKS_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        log.warning("history %s unreadable (%s): read as no marks", path, exc)
        return {}
    try:
        body = json.loads(raw)
        marks = body["marks"]
        if generation is not None and body.get("generation") not in (None, generation):
            return {}
        return {int(seq): str(reason) for seq, reason in marks.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("history %s is corrupt (%s: %s): read as no marks", path, type(exc).__name__, exc)
        return {}


def add_marks(directory: Path, marks: dict[int, str], generation: str | None = None) -> dict[int, str]:
    """Mark files ``seq -> reason`` of the model of ``generation`` (a file already marked keeps
    both reasons; another generation's marks are dropped); returns all marks.  Written
    atomically (temp file, fsync, rename)."""
    merged = read_marks(directory, generation)
    for seq, reason in marks.items():
        old = merged.get(int(seq))
        merged[int(seq)] = reason if old is None or reason in old else f"{old}; {reason}"
    body = {
        "format": MARKS_FORMAT,
        "generation": generation,
        "marks": {str(seq): reason for seq, reason in sorted(merged.items())},
    }
    write_atomic(Path(directory) / MARKS_FILE, json.dumps(body, indent=1).encode())
    return merged


def files_to_prune(
    files: list[KeptFile], marks: dict[int, str], keep_versions: int, max_bytes: int | None
) -> list[KeptFile]:
    """The files retention deletes, from ``files`` listed newest first: all but the newest
    ``keep_versions`` and the marked ones; then, while the rest exceeds ``max_bytes``, the
    oldest unmarked, then the oldest marked — never the newest file."""
    kept = [f for i, f in enumerate(files) if i < keep_versions or f.seq in marks]
    doomed = [f for f in files if f not in kept]
    if max_bytes is None:
        return doomed
    total = sum(f.size for f in kept)
    newest = files[0] if files else None
    for marked in (False, True):  # oldest unmarked first, then oldest marked
        for f in reversed(list(kept)):
            if total <= max_bytes:
                return doomed
            if f is newest or (f.seq in marks) != marked:
                continue
            kept.remove(f)
            doomed.append(f)
            total -= f.size
    return doomed


def reasons(files: list[KeptFile], marks: dict[int, str], keep_versions: int) -> dict[int, str]:
    """Why each of ``files`` (newest first) is kept: ``seq -> reason``."""
    out = {}
    for i, f in enumerate(files):
        why = []
        if i == 0:
            why.append("live")
        elif i < keep_versions:
            why.append("recent")
        if f.seq in marks:
            why.append(marks[f.seq])
        out[f.seq] = "; ".join(why) or "kept"
    return out
