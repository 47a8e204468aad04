"""Where the memory of a model goes while a field of many distinct values streams through it
(part "million" of ``benchmarks/bench_fields.py``): the same events through the same in-process
service, and every ``--every`` batches one JSON line with the process's current and peak RSS
and the bytes of the arrays each part of the model's handle reaches (the estimator, the
rollback journal and checkpoint, the challengers, the published view, the schema), counted once
per array base.  A last line after a snapshot and after ``release_free_memory``.

    python -m benchmarks.profiling.fields_rss [--events 200000] [--every 20]
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import tempfile
import types
import warnings
from pathlib import Path

import numpy as np
import orjson

from benchmarks.bench_fields import user_events

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from svmstream.app.main import create_app
from svmstream.app.models.handle import ModelHandle
from svmstream.app.models.memory import release_free_memory
from svmstream.app.models.registry import Registry
from svmstream.app.settings import Settings

MB = 1e6
_SKIP = (type, types.ModuleType, types.FrameType, Registry)


def _root(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def array_bytes(obj, seen: set[int]) -> int:
    """Bytes of the ndarrays ``obj`` reaches (a function through its closure and defaults only,
    never its globals; no other handle, no registry), each array base counted once in ``seen``."""
    total, stack, visited = 0, [obj], set()
    while stack:
        o = stack.pop()
        if id(o) in visited or isinstance(o, _SKIP) or (isinstance(o, ModelHandle) and o is not obj):
            continue
        visited.add(id(o))
        if isinstance(o, np.ndarray):
            r = _root(o)
            if id(r) not in seen:
                seen.add(id(r))
                total += r.nbytes if r.base is None else 0
            continue
        if isinstance(o, types.FunctionType):
            stack.extend(c.cell_contents for c in (o.__closure__ or ()) if _filled(c))
            stack.extend(o.__defaults__ or ())
            continue
        stack.extend(gc.get_referents(o))
    return total


def _filled(cell) -> bool:
    try:
        _ = cell.cell_contents
    except ValueError:
        return False
    return True


def rss_now() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize()


def breakdown(h: ModelHandle) -> dict:
    """Bytes of arrays per part, in this order (an array shared with an earlier part counts there)."""
    seen: set[int] = set()
    parts = {
        "estimator": h._est,
        "view": h.view,
        "challengers": h.challengers,
        "checkpoint": h._checkpoint,
        "journal": h._journal,
        "fields": h.fields,
    }
    out = {k: round(array_bytes(v, seen) / MB, 2) for k, v in parts.items()}
    out["journal_steps"] = len(h._journal)
    out["journal_input_mb"] = round(h._journal_bytes / MB, 2)
    out["checkpoint_kind"] = type(h._checkpoint).__name__
    cs = h.challengers
    out["n_challengers"] = 0 if cs is None else len(getattr(cs, "entries", []) or [])
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--every", type=int, default=20, help="batches of 5,000 between lines")
    parser.add_argument("--budget", type=int, default=100)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(snapshot_dir=Path(tmp), snapshot_interval_s=3600)
        peak0, rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, rss_now()
        with TestClient(create_app(settings)) as c:
            c.put("/models/users", json={"budget": args.budget})
            h = c.app.state.registry.get("users")
            for b, lo in enumerate(range(0, args.events, 5000)):
                rows, y = user_events(lo, 5000, rng)
                r = c.post(
                    "/learn",
                    content=orjson.dumps({"model": "users", "X": rows, "y": y}),
                    headers={"content-type": "application/json"},
                )
                assert r.status_code == 200, r.text
                if (b + 1) % args.every == 0:
                    line = {"events": lo + 5000, "rss_mb": round((rss_now() - rss0) / MB, 1)}
                    line["peak_mb"] = round(
                        (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - peak0) / MB, 1
                    )
                    line.update(breakdown(h))
                    line["width"] = c.get("/models/users").json()["fields"]["n_columns"]
                    print(json.dumps(line), flush=True)
            c.post("/models/users/snapshot")
            line = {"after": "snapshot", "rss_mb": round((rss_now() - rss0) / MB, 1)}
            line["peak_mb"] = round(
                (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - peak0) / MB, 1
            )
            line.update(breakdown(h))
            release_free_memory()
            line["rss_after_trim_mb"] = round((rss_now() - rss0) / MB, 1)
            print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
