"""The benchmarks' runner: one registry (``python -m benchmarks list``, the README's table) and
the one way to compare two trees (``python -m benchmarks compare``), run for real on two tiny
trees whose benchmark writes a results JSON."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks.runner import BENCHMARKS, markdown_table

REPO = Path(__file__).resolve().parents[1]


def _modules_with_main() -> set[str]:
    return {
        p.stem
        for p in (REPO / "benchmarks").glob("*.py")
        if p.stem != "__main__" and re.search(r"^if __name__ == .__main__.:", p.read_text(), re.M)
    }


def test_list_names_every_benchmark_module_with_a_main():
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "list"], cwd=REPO, capture_output=True, text=True, check=True
    )
    listed = [line.split()[0] for line in done.stdout.splitlines() if line.strip()]
    assert len(listed) == len(set(listed))
    assert set(listed) == _modules_with_main()
    assert set(listed) == set(BENCHMARKS)


def test_every_benchmark_writes_through_write_results():
    for name in BENCHMARKS:
        assert "write_results(" in (REPO / "benchmarks" / f"{name}.py").read_text(), name


def test_write_results_records_the_machine_load_and_table(tmp_path, monkeypatch):
    from benchmarks import common

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    rows = [{"part": "A", "method": "x", "seconds": 1.5}, {"part": "B", "method": "y", "seconds": 2.0}]
    common.write_results("plain", {"rows": rows}, rows, "Plain", "a note")
    common.write_results("own", {"machine": {"cpus": 2}}, rows, "Own", markdown="# Own layout\n")
    plain = json.loads((tmp_path / "plain.json").read_text())
    assert plain["table"] == rows and plain["machine"]["load_avg_at_start"] >= 0
    assert list(plain) == ["machine", "rows", "table"]
    text = (tmp_path / "plain.md").read_text()
    assert text.startswith("# Plain\n") and "## Part A" in text and "| B | y | 2 |" in text
    own = json.loads((tmp_path / "own.json").read_text())
    assert own["machine"]["cpus"] == 2 and own["machine"]["load_avg_at_write"] >= 0
    assert (tmp_path / "own.md").read_text() == "# Own layout\n"


def test_readme_table_is_the_registry():
    readme = (REPO / "benchmarks" / "README.md").read_text()
    assert markdown_table() in readme
    rows = [line for line in readme.splitlines() if line.startswith("| `python -m benchmarks.")]
    assert len(rows) == len(BENCHMARKS)


def test_run_is_python_dash_m(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "run", "nonexistent_bench"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "unknown benchmark 'nonexistent_bench'" in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "run", "bench_stream", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "--parts" in done.stdout


# A benchmark in a tree of its own: the k-th run of the tree (k = 0 for the warm-up) writes the
# figures VALUES[k] (one row per method), so the per-round ratios are known in advance; "shown"
# is a figure formatted as text, which changes from run to run and so does not name the row.
FAKE = """
import json, sys
from pathlib import Path

VALUES = {values}
results = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
counter = results.parent / "runs.txt"
k = len(counter.read_text().split()) if counter.exists() else 0
counter.write_text(counter.read_text() + " x" if counter.exists() else "x")
speed, acc = VALUES[k]
rows = [
    {{"method": "fast", "B": 500, "speed": speed, "accuracy": acc, "note": None, "shown": f"{{speed:.0f}}/s"}},
    {{"method": "slow", "B": 500, "speed": speed / 2, "accuracy": acc}},
]
if "--only-fast" in sys.argv:
    rows = rows[:1]
payload = {{"machine": {{"load_avg_at_start": 0.5}}, "rows": rows}}
if {table}:  # what common.write_results stores; an older tree's results have no table
    payload["table"] = rows
(results / "fake.json").write_text(json.dumps(payload))
(results / "fake.md").write_text("# fake\\n")
"""


def _tree(root: Path, values: list[tuple[float, float]], table: bool = True) -> Path:
    (root / "benchmarks" / "results").mkdir(parents=True)
    (root / "benchmarks" / "__init__.py").write_text("")
    (root / "benchmarks" / "bench_fake.py").write_text(
        textwrap.dedent(FAKE.format(values=values, table=table))
    )
    (root / "benchmarks" / "results" / "fake.json").write_text('{"committed": 1}')
    (root / "benchmarks" / "results" / "other.md").write_text("kept")
    return root


@pytest.mark.parametrize("old_before", [False, True], ids=["tables", "before-without-table"])
def test_compare_runs_both_trees_interleaved_and_reports_median_ratios(tmp_path, old_before):
    values = [(1.0, 90.0), (100.0, 90.0), (100.0, 90.0), (200.0, 90.0)]
    before = _tree(tmp_path / "before", values, table=not old_before)
    after = _tree(tmp_path / "after", [(1.0, 90.0), (300.0, 90.0), (100.0, 91.0), (100.0, 90.0)])
    out = f"compare_fake_{tmp_path.name}"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "compare", "--before", str(before), "--after", str(after)]
        + ["--rounds", "3", "--out", out, "bench_fake", "--quick"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    results = REPO / "benchmarks" / "results"
    try:
        assert done.returncode == 0, done.stderr
        payload = json.loads((results / f"{out}.json").read_text())
        assert (results / f"{out}.md").read_text().startswith("# bench_fake: after / before, interleaved")
    finally:
        for suffix in (".json", ".md"):
            (results / f"{out}{suffix}").unlink(missing_ok=True)
    # warm-up + 3 rounds in each tree, each a process of its own
    for tree in (before, after):
        assert (tree / "benchmarks" / "runs.txt").read_text().split() == ["x"] * 4
        # the trees' result files are back as they were
        assert (tree / "benchmarks" / "results" / "fake.json").read_text() == '{"committed": 1}'
        assert (tree / "benchmarks" / "results" / "other.md").read_text() == "kept"
        assert not (tree / "benchmarks" / "results" / "fake.md").exists()
    assert [(r["round"], r["side"]) for r in payload["runs"]] == [
        (k, side) for k in (1, 2, 3) for side in ("before", "after")
    ]
    assert all(r["cpu_s"] >= 0 and r["wall_s"] > 0 and r["load_avg"] >= 0 for r in payload["runs"])
    assert payload["figures_from"] == ("results JSON" if old_before else "table")
    prefix = "rows " if old_before else ""  # the whole JSON: the rows under their key
    rows = {row["figure"].removeprefix(prefix): row for row in payload["rows"]}
    # speed ratios per round: 300/100, 100/100, 100/200 -> median 1.0; both rows scale alike
    for name in ("[method=fast] / speed", "[method=slow] / speed"):
        assert rows[name]["ratios after/before"] == "3, 1, 0.5"
        assert rows[name]["median ratio"] == pytest.approx(1.0)
    assert rows["[method=fast] / speed"]["before (median)"] == pytest.approx(100.0)
    assert rows["[method=fast] / speed"]["max |after − before|"] == pytest.approx(200.0)
    assert rows["[method=fast] / accuracy"]["median ratio"] == pytest.approx(1.0)
    assert rows["[method=fast] / accuracy"]["max |after − before|"] == pytest.approx(1.0)
    assert rows["[method=fast] / B"]["max |after − before|"] == 0
    cpu = rows["CPU s of the run (incl. children)"]
    per_round = [
        next(r for r in payload["runs"] if r["round"] == k and r["side"] == "after")["cpu_s"]
        / next(r for r in payload["runs"] if r["round"] == k and r["side"] == "before")["cpu_s"]
        for k in (1, 2, 3)
    ]
    assert cpu["median ratio"] == pytest.approx(statistics.median(per_round))
    assert "wall s of the run" in rows


def test_compare_refuses_fewer_than_three_rounds_and_a_missing_benchmark(tmp_path):
    tree = _tree(tmp_path / "t", [(1.0, 1.0)] * 4)
    base = [sys.executable, "-m", "benchmarks", "compare", "--before", str(tree), "--after", str(tree)]
    done = subprocess.run([*base, "--rounds", "2", "bench_fake"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode != 0 and "at least 3" in done.stderr
    done = subprocess.run([*base, "bench_skeleton"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode != 0 and "has no benchmarks/bench_skeleton.py" in done.stderr
    assert not (tree / "benchmarks" / "runs.txt").exists()


def test_results_hold_the_current_result_of_registered_benchmarks_only():
    """``benchmarks/results/`` holds what a registered benchmark writes (``<name>`` or
    ``<name>_<part>``, ``name`` its module without ``bench_``) and the compose CI run's
    ``compose.md``; no tree comparison (``compare_*``: quoted where used, not committed)."""
    stems = {p.name.split(".")[0] for p in (REPO / "benchmarks" / "results").iterdir()}
    prefixes = {name.removeprefix("bench_") for name in BENCHMARKS} | {"compose"}
    assert stems
    assert not sorted(s for s in stems if s.startswith("compare_"))
    stray = sorted(s for s in stems if not any(s == p or s.startswith(p + "_") for p in prefixes))
    assert not stray, stray
