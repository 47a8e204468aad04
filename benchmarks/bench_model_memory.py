"""What one idle model costs, by component (10,000 models in one service).

Builds N models in this process the way the service does (a
:class:`~svmstream.app.models.registry.Registry` with a snapshot store; each model created
with no settings, then taught one batch of 20 raw rows with string labels through
``LabelCodec.encode_with_new`` and ``Registry.learn``, as ``POST /learn`` does) and reports

* the RSS growth per model (``psutil``, after ``gc.collect``), and the same after snapshotting
  every model (what the service holds after its first periodic snapshot);
* tracemalloc's allocated bytes per model, grouped by the source line that allocated them
  (numpy reports its data buffers to tracemalloc);
* the bytes of the numpy arrays each component of one model holds (``nbytes``, shared
  arrays counted once) and how many of them are resident: ``np.zeros`` of a large array is
  a ``calloc`` that the kernel maps lazily, so a 1 MB buffer of which 20 rows are written
  costs one page of RSS but a whole mapping (and a line in tracemalloc);
* parking: every model but one parked (``Registry.park_idle``: estimator and published copy
  dropped, the snapshot decoded again on next use), RSS per model after it;
* a restore: N snapshot files read back with ``Registry.restore`` (seconds, RSS per model).

Usage: ``python -m benchmarks.bench_model_memory [--models 500]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from benchmarks.common import machine, write_results


def _rss() -> float:
    import psutil

    gc.collect()
    return psutil.Process().memory_info().rss


def _timed_phase(call, phase, rss_base: float, n: int) -> dict:
    """The row of a phase: ``call()`` timed, ``phase(its result)`` as the name, and the RSS
    per model above ``rss_base`` after it."""
    started = time.perf_counter()
    result = call()
    seconds = time.perf_counter() - started
    return {"phase": phase(result), "seconds": seconds, "rss_kb_per_model": (_rss() - rss_base) / n / 1024}


def _maps() -> int:
    try:
        with open(f"/proc/{os.getpid()}/maps") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return -1


def _arrays(obj, seen, depth=0):
    """(id, ndarray) of every array reachable through ``__dict__``/lists/tuples/dicts."""
    if depth > 6 or id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        base = obj if obj.base is None else obj.base
        yield id(base), obj
        return
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _arrays(v, seen, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _arrays(v, seen, depth + 1)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        yield from _arrays(vars(obj), seen, depth + 1)


def _component_bytes(handle) -> list[dict]:
    """nbytes of the arrays of each component of one model (arrays shared with an earlier
    component counted there)."""
    est = handle._est
    view_est = handle.view.estimator
    parts = [
        ("estimator: scaler stage", getattr(est, "_scaler", None)),
        ("estimator: order stage", getattr(est, "_order", None)),
        ("estimator: calibrator", getattr(est, "calibrator_", None)),
        ("estimator: drift monitor", getattr(est, "drift_", None)),
        ("estimator: rest (SV pool, scratch)", est),
        ("view: published copy", view_est),
        ("handle: prequential window", handle.prequential),
        ("handle: rest (checkpoint, journal)", handle),
    ]
    counted: set[int] = set()
    rows = []
    for label, obj in parts:
        total, n = 0, 0
        for base_id, arr in _arrays(obj, set()):
            if base_id in counted:
                continue
            counted.add(base_id)
            total += arr.nbytes
            n += 1
        rows.append({"component": label, "arrays": n, "nbytes": total})
    return rows


def _learn_one(registry, name, X, labels):
    handle = registry.get(name)
    y, new = handle.codec.encode_with_new(labels)
    registry.learn(name, X, y, new_labels=new).result()


def main(argv=None) -> None:
    from svmstream.app.models.registry import Registry
    from svmstream.app.models.snapshots import SnapshotStore
    from svmstream.app.settings import Settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=500)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--no-results", action="store_true", help="print only; write no result files")
    args = parser.parse_args(argv)
    n = args.models
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 6)) * 40.0 + 5.0
    labels = np.where(X[:, 0] + 0.3 * X[:, 1] > 5.0, "churn", "stay").tolist()

    rows = []
    with tempfile.TemporaryDirectory(prefix="model-memory-") as tmp:
        # parking only when park_idle is called below (no service loop here)
        settings = Settings(snapshot_dir=Path(tmp), max_loaded_models=1, park_idle_s=0)
        registry = Registry(settings, SnapshotStore(Path(tmp)))
        # one model first: imports, numba dispatchers, thread pool (not per-model costs)
        config = registry.resolve_config({})
        registry.create("warm", config)
        _learn_one(registry, "warm", X, labels)
        maps0 = _maps()
        rss0 = _rss()
        started = time.perf_counter()
        for i in range(n):
            name = f"m-{i:05d}"
            registry.create(name, registry.resolve_config({}))
            _learn_one(registry, name, X, labels)
        build_s = time.perf_counter() - started
        rss1 = _rss()
        maps1 = _maps()
        rows.append(
            {
                "phase": f"create + learn 20 rows, {n} models",
                "seconds": build_s,
                "rss_kb_per_model": (rss1 - rss0) / n / 1024,
                "mappings_per_model": (maps1 - maps0) / n,
            }
        )
        row = _timed_phase(
            registry.snapshot_changed,
            lambda written: f"then snapshot_changed ({len(written)} files)",
            rss0,
            n,
        )
        rows.append(row)
        components = _component_bytes(registry.get("m-00000"))
        row = _timed_phase(
            lambda: registry.park_idle(now=time.monotonic() + 1e6),
            lambda parked: f"then park_idle ({parked} parked)",
            rss0,
            n,
        )
        rows.append(row)
        registry.close()

        # restore: the same files read back by a fresh registry
        rss3 = _rss()
        registry2 = Registry(settings, SnapshotStore(Path(tmp)))
        started = time.perf_counter()
        restored = registry2.restore()
        restore_s = time.perf_counter() - started
        rss4 = _rss()
        rows.append(
            {
                "phase": f"restore {len(restored)} models",
                "seconds": restore_s,
                "rss_kb_per_model": (rss4 - rss3) / max(1, len(restored)) / 1024,
                "ms_per_model": restore_s / max(1, len(restored)) * 1e3,
            }
        )
        registry2.close()

        # the build again under tracemalloc (its bookkeeping would inflate the RSS figures above)
        registry3 = Registry(settings, SnapshotStore(Path(tmp) / "traced"))
        tracemalloc.start(1)
        snap0 = tracemalloc.take_snapshot()
        for i in range(n):
            name = f"t-{i:05d}"
            registry3.create(name, registry3.resolve_config({}))
            _learn_one(registry3, name, X, labels)
        snap1 = tracemalloc.take_snapshot()
        tracemalloc.stop()
        registry3.close()
        stats = snap1.compare_to(snap0, "lineno")
        traced_total = sum(s.size_diff for s in stats)
        top = []
        for s in stats[: args.top]:
            frame = s.traceback[0]
            where = f"{Path(frame.filename).parent.name}/{Path(frame.filename).name}:{frame.lineno}"
            top.append({"line": where, "kb_per_model": s.size_diff / n / 1024, "blocks": s.count_diff / n})

    for row in components:
        row["kb"] = row.pop("nbytes") / 1024
    print(f"tracemalloc: {traced_total / n / 1024:.1f} KB per model in all; top lines:")
    for row in top:
        print(f"  {row['kb_per_model']:8.1f} KB  {row['blocks']:6.1f} blocks  {row['line']}")
    payload = {
        "machine": machine(),
        "models": n,
        "rows": rows,
        "tracemalloc_kb_per_model": traced_total / n / 1024,
        "tracemalloc_top_lines": top,
        "components_of_one_model": components,
        "load_avg_at_end": os.getloadavg()[0],
    }
    table = rows + [{"part": "B", **r} for r in top] + [{"part": "C", **r} for r in components]
    if args.no_results:
        import json

        print(json.dumps(payload, indent=2, default=float))
        return
    write_results(
        "model_memory",
        payload,
        table,
        f"What one idle model costs ({n} models in one process)",
        notes="Models created with {} and taught one batch of 20 raw rows (6 features, string labels) "
        "through Registry.learn, as POST /learn does.  Part B: tracemalloc per allocating line, per model. "
        "Part C: array bytes of one model by component (allocated, not necessarily resident). Parking "
        "frees each model's estimator and published copy for reuse, but in one process that builds nothing "
        "afterwards the RSS hardly falls (freed blocks sit among live ones); in the service, models taught "
        "later reuse them (bench_many_models). The restore that follows reuses them too, so its RSS per model "
        "is a lower bound (a restarted service: bench_many_models).",
    )


if __name__ == "__main__":
    main()
