"""The contract changes no figure, decision or state (issue 37): this tree against the tree before it.

``SVMSTREAM_BASE_TREE`` (default ``/work/base``) names a checkout of the tree before the contract
with its own ``.venv``; without one these tests skip (they compare two trees, they need both).

* the figures ``GET /models`` shows (``estimator_stats``), the published copy's decisions and the
  size estimates of plain BSGD, BSCA, Pegasos pipelines and selectors along a stream
  (``tests/scenarios/model_figures.py``, run by both trees): equal, max |Δ| = 0;
* states written by the tree before load here and continue identically
  (``tests/scenarios/old_states.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.scenarios.old_states import continue_from

BASE = Path(os.environ.get("SVMSTREAM_BASE_TREE", "/work/base"))
PYTHON = BASE / ".venv" / "bin" / "python"
SCENARIOS = Path(__file__).parent / "scenarios"
pytestmark = pytest.mark.skipif(not PYTHON.exists(), reason=f"no tree before the contract at {BASE}")


def _run(python, *args, cwd):
    done = subprocess.run(
        [str(python), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _unweighted(stats: dict) -> dict:
    """``stats`` without the figure of weights added since (issue 39, docs/weights.md): it must
    say that nothing was weighted."""
    statistics = dict(stats.get("statistics") or {})
    weights = statistics.pop("weights", None)
    if weights is None:
        return stats
    assert weights["weighted"] is False and weights["zero_weight"] == 0, weights
    return {**stats, "statistics": statistics}


def test_figures_decisions_and_estimates_equal_the_tree_before():
    script = SCENARIOS / "model_figures.py"
    before = json.loads(_run(PYTHON, script, cwd=BASE))
    now = json.loads(_run(sys.executable, script, cwd=Path(__file__).parent.parent))
    assert now["estimates"] == before["estimates"]
    assert set(now) == set(before)
    for key in before:
        if key == "estimates":
            continue
        for row_before, row_now in zip(before[key], now[key], strict=True):
            assert _unweighted(row_now["stats"]) == row_before["stats"], (key, row_before["at"])
            assert row_now["decision"] == row_before["decision"], (key, row_before["at"])  # max |Δ| = 0
            if "published" in row_now:  # the published copy reports what the model reports
                assert row_now["published"] == row_now["stats"], (key, row_before["at"])


def test_states_written_before_load_and_continue_identically(tmp_path):
    _run(PYTHON, SCENARIOS / "old_states.py", "write", tmp_path, cwd=BASE)
    for name, (before, now) in continue_from(tmp_path).items():
        assert now == before, name
