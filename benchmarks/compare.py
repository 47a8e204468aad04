"""The one way to compare two source trees: one benchmark run alternately in both, interleaved.

``python -m benchmarks compare --before DIR [--after DIR] [--rounds 3] NAME [args...]`` runs
``python -m benchmarks.NAME args...`` in the *before* and the *after* tree (default: this one)
alternately — one untimed warm-up run in each first (numba fills its on-disk cache there), then
``--rounds`` rounds of before, after — every run a fresh process with its own tree as working
directory and its own code first on ``PYTHONPATH``: a folder ``svmstream/app`` →
``TREE/app``, ``svmstream/solvers`` → ``TREE/solvers`` (so the editable install of whichever
tree runs the command does not win), then ``TREE`` itself (older layouts import ``app`` and
``solvers`` from there).  Each run records its CPU seconds (``getrusage`` of the children,
so the servers and producers it starts count), its wall seconds and the load average at its
start, and reads the results JSON files the run wrote in its tree's ``benchmarks/results``.

Figures: the rows of the table the run gave ``common.write_results`` (its JSON's ``table``;
the whole JSON when a tree's version does not store it), each row named by its non-numeric
fields (``#2``, ``#3`` … when several rows share them), each numeric field a figure.  The
report gives, per figure present in every run, the per-round ratios after/before, their
median, the medians of both sides and the largest \\|after − before\\| of a round (0 for a
figure that is identical: decisions, accuracies); then the same for the CPU and wall seconds
of the whole run.  Writes ``benchmarks/results/compare_<NAME>.{json,md}`` in this tree (or
``--out``).  The result files of both trees are put back as they were before the first run
(the benchmark's runs would overwrite the committed ones).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO, machine, write_results


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_text(value) -> bool:
    return isinstance(value, str | bool)


def _walk_text(obj, keys: str, out: dict, top: bool = True) -> None:
    """``(keys, row index, field) -> value`` of every text field of every list row in ``obj``
    (``keys``: the dict keys leading to the list)."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if not (top and key in SKIPPED):
                _walk_text(value, f"{keys}/{key}", out, False)
    elif isinstance(obj, list):
        for index, item in enumerate(obj):
            if isinstance(item, dict):
                out.update({(keys, index, k): v for k, v in item.items() if _is_text(v)})
                _walk_text({k: v for k, v in item.items() if not _is_text(v)}, keys, out, False)


def _flatten(obj, label: str, out: dict[str, float], varying: set, keys: str = "", top: bool = True) -> None:
    """Numeric leaves of ``obj`` under readable labels.  A list's dict items are named by their
    text fields (``#k`` appended for repeats) except the ``varying`` ones (``(keys, field)``:
    formatted figures that differ between runs); other list items by their index."""
    if _is_number(obj):
        out[label] = float(obj)
    elif isinstance(obj, dict):
        for key, value in obj.items():
            if not (top and key in SKIPPED):
                _flatten(
                    value, f"{label} / {key}" if label else str(key), out, varying, f"{keys}/{key}", False
                )
    elif isinstance(obj, list):
        seen: dict[str, int] = {}
        for index, item in enumerate(obj):
            if isinstance(item, dict):
                name = ", ".join(
                    f"{k}={v}" for k, v in item.items() if _is_text(v) and (keys, k) not in varying
                )
                seen[name] = seen.get(name, 0) + 1
                if seen[name] > 1 or not name:
                    name = f"{name} #{seen[name]}" if name else f"#{index + 1}"
                fields = {k: v for k, v in item.items() if not _is_text(v)}
                _flatten(fields, f"{label} [{name}]" if label else f"[{name}]", out, varying, keys, False)
            else:
                _flatten(item, f"{label}[{index}]", out, varying, keys, False)


SKIPPED = ("machine", "date", "args")
"""Top-level keys of a results JSON that hold no figure."""


def _source(payload: dict, use_table: bool):
    return payload["table"] if use_table else {k: v for k, v in payload.items() if k != "table"}


def varying_text(runs: list[dict[str, dict]], use_table: bool) -> set:
    """``(stem, keys, field)`` of the text fields whose value at some row differs between runs
    (``runs``: each run's ``{results file stem: JSON}``): formatted figures, not row names."""
    values: dict[tuple, set] = {}
    for payloads in runs:
        for stem, payload in payloads.items():
            text: dict = {}
            _walk_text(_source(payload, use_table), "", text)
            for (keys, index, field), value in text.items():
                values.setdefault((stem, keys, index, field), set()).add(str(value))
    return {(stem, keys, field) for (stem, keys, index, field), seen in values.items() if len(seen) > 1}


def figures(payloads: dict[str, dict], use_table: bool, varying: set = frozenset()) -> dict[str, float]:
    """Figures of one run: ``payloads`` maps each results file the run wrote to its JSON;
    ``varying``: text fields not used to name rows (:func:`varying_text`)."""
    out: dict[str, float] = {}
    for stem, payload in sorted(payloads.items()):
        prefix = f"{stem}: " if len(payloads) > 1 else ""
        flat: dict[str, float] = {}
        ignore = {(keys, field) for s, keys, field in varying if s == stem}
        _flatten(_source(payload, use_table), "", flat, ignore)
        out.update({prefix + k: v for k, v in flat.items()})
    return out


def _shim(tree: Path) -> Path:
    """A folder whose ``svmstream/app`` and ``svmstream/solvers`` link to ``tree``'s (stable per
    tree, so numba's cache keys stay the same from one comparison to the next)."""
    digest = hashlib.sha1(str(tree).encode()).hexdigest()[:12]
    shim = Path(tempfile.gettempdir()) / f"svmstream-compare-{os.getuid()}" / digest
    (shim / "svmstream").mkdir(parents=True, exist_ok=True)
    for part in ("app", "solvers"):
        link = shim / "svmstream" / part
        if (tree / part).is_dir() and not link.exists():
            link.symlink_to(tree / part, target_is_directory=True)
    return shim


def _snapshot(results: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in results.glob("*") if p.is_file()} if results.is_dir() else {}


def _restore(results: Path, saved: dict[Path, bytes]) -> None:
    """Put ``results`` back as ``saved`` (remove files written since, rewrite changed ones)."""
    for path in list(results.glob("*")) if results.is_dir() else []:
        if path.is_file() and path not in saved:
            path.unlink()
    for path, content in saved.items():
        if not path.exists() or path.read_bytes() != content:
            path.write_bytes(content)


def run_once(tree: Path, module: str, args: list[str], log: Path) -> dict:
    """One fresh process ``python -m benchmarks.<module> args`` in ``tree``; its CPU (children's
    rusage), wall, load average at start and the results JSON files it wrote.

    Raises ``RuntimeError`` (with the end of its output) when it fails or writes no JSON.
    """
    results = tree / "benchmarks" / "results"
    stamps = {p: p.stat().st_mtime_ns for p in results.glob("*.json")} if results.is_dir() else {}
    path = [str(_shim(tree)), str(tree), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))}
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    with open(log, "ab") as out:
        code = subprocess.run(
            [sys.executable, "-m", f"benchmarks.{module}", *args], cwd=tree, env=env, stdout=out, stderr=out
        ).returncode
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime)
    tail = log.read_text(errors="replace")[-3000:]
    if code != 0:
        raise RuntimeError(f"benchmarks.{module} failed in {tree} (exit {code}):\n{tail}")
    written = {
        p.stem: json.loads(p.read_text())
        for p in (results.glob("*.json") if results.is_dir() else [])
        if stamps.get(p) != p.stat().st_mtime_ns
    }
    if not written:
        raise RuntimeError(f"benchmarks.{module} wrote no results JSON in {results}:\n{tail}")
    return {"payloads": written, "cpu_s": cpu, "wall_s": wall, "load_avg": load}


def _ratio(after: float, before: float) -> float | None:
    if before == 0:
        return 1.0 if after == 0 else None
    return after / before


def summarise(runs: list[dict], rounds: int, only: str | None = None) -> tuple[list[dict], list[str]]:
    """Rows of the report from the timed ``runs`` (``side``, ``round``, ``figures``, ``cpu_s``,
    ``wall_s``): one per figure present in every run, plus the run's CPU and wall seconds;
    and the figures left out because some run lacks them."""
    names = list(dict.fromkeys(name for run in runs for name in run["figures"]))
    common = [n for n in names if all(n in run["figures"] for run in runs)]
    missing = [n for n in names if n not in common]
    if only:
        common = [n for n in common if re.search(only, n)]
    pairs = [
        {side: next(r for r in runs if r["round"] == k and r["side"] == side) for side in ("before", "after")}
        for k in range(1, rounds + 1)
    ]
    series = [(n, lambda run, n=n: run["figures"][n]) for n in common]
    series += [
        ("CPU s of the run (incl. children)", lambda run: run["cpu_s"]),
        ("wall s of the run", lambda run: run["wall_s"]),
    ]
    rows = []
    for name, value in series:
        ratios = [_ratio(value(p["after"]), value(p["before"])) for p in pairs]
        defined = [r for r in ratios if r is not None]
        rows.append(
            {
                "figure": name,
                "before (median)": statistics.median(value(p["before"]) for p in pairs),
                "after (median)": statistics.median(value(p["after"]) for p in pairs),
                "ratios after/before": ", ".join("—" if r is None else f"{r:.4g}" for r in ratios),
                "median ratio": statistics.median(defined) if defined else None,
                "max |after − before|": max(abs(value(p["after"]) - value(p["before"])) for p in pairs),
            }
        )
    return rows, missing


def compare(
    before: Path,
    after: Path,
    name: str,
    args: list[str],
    rounds: int = 3,
    out: str | None = None,
    only: str | None = None,
) -> dict:
    """Run benchmark module ``name`` interleaved in the two trees and write the report
    (``benchmarks/results/<out>.{json,md}`` of this tree, ``out`` = ``compare_<name>``).

    Raises ``ValueError`` for fewer than 3 rounds, ``RuntimeError`` when a run fails.
    """
    if rounds < 3:
        raise ValueError(f"rounds: at least 3 (ratios are medians of interleaved rounds), not {rounds}")
    trees = {"before": before.resolve(), "after": after.resolve()}
    for side, tree in trees.items():
        if not (tree / "benchmarks" / f"{name}.py").exists():
            raise RuntimeError(f"the {side} tree {tree} has no benchmarks/{name}.py")
    saved = {side: _snapshot(tree / "benchmarks" / "results") for side, tree in trees.items()}
    runs: list[dict] = []
    warmup: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        logs = {side: Path(tmp) / f"{side}.log" for side in trees}
        try:
            for side, tree in trees.items():  # untimed: numba compiles into its on-disk cache
                warmup[side] = run_once(tree, name, args, logs[side])
                print(f"warm-up {side}: cpu {warmup[side]['cpu_s']:.1f} s", flush=True)
            for k in range(1, rounds + 1):
                for side, tree in trees.items():  # before, after; before, after; ...
                    runs.append({"round": k, "side": side, **run_once(tree, name, args, logs[side])})
                    last = runs[-1]
                    print(
                        f"round {k} {side}: cpu {last['cpu_s']:.1f} s, wall {last['wall_s']:.1f} s, "
                        f"load {last['load_avg']:.2f}",
                        flush=True,
                    )
        finally:
            for side, tree in trees.items():
                _restore(tree / "benchmarks" / "results", saved[side])
    use_table = all("table" in p for run in runs for p in run["payloads"].values())
    varying = varying_text([run["payloads"] for run in runs], use_table)
    for run in runs:
        run["figures"] = figures(run.pop("payloads"), use_table, varying)
    rows, missing = summarise(runs, rounds, only)
    command = " ".join(["python -m benchmarks compare", f"--rounds {rounds}", name, *args])
    payload = {
        "machine": machine(),
        "command": command,
        "trees": {side: str(tree) for side, tree in trees.items()},
        "figures_from": "table" if use_table else "results JSON",
        "warmup": {side: {k: v for k, v in w.items() if k != "payloads"} for side, w in warmup.items()},
        "runs": runs,
        "rows": rows,
        "not_in_every_run": missing,
    }
    loads = ", ".join(f"{r['load_avg']:.2f}" for r in runs)
    notes = (
        f"`{command}`; before = `{trees['before']}`, after = `{trees['after']}`. {rounds} rounds, before then "
        f"after in each, every run a fresh process after one untimed warm-up run per tree. Load average at "
        f"each run's start: {loads}. A ratio > 1: the after tree's figure is larger."
    )
    if missing:
        notes += f" Figures not in every run (left out): {len(missing)}."
    write_results(out or f"compare_{name}", payload, rows, f"{name}: after / before, interleaved", notes)
    return payload


def main(argv: list[str] | None = None) -> int:
    from benchmarks.runner import resolve

    parser = argparse.ArgumentParser(prog="python -m benchmarks compare", description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the tree before the change")
    parser.add_argument("--after", type=Path, default=REPO, help="the tree after it (default: this one)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds, at least 3 (default 3)")
    parser.add_argument("--out", default=None, help="results name (default compare_NAME)")
    parser.add_argument("--only", default=None, help="report only the figures matching this regex")
    parser.add_argument("name", help="the benchmark (python -m benchmarks list)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its options")
    ns = parser.parse_args(argv)
    module = resolve(ns.name) if not (ns.after / "benchmarks" / f"{ns.name}.py").exists() else ns.name
    try:
        compare(ns.before, ns.after, module, ns.args, ns.rounds, ns.out, ns.only)
    except (ValueError, RuntimeError) as exc:
        sys.exit(str(exc))
    return 0
