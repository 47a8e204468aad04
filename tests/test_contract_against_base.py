"""The contract changes no figure, decision or state (issue 37): this tree against the tree before it.

``SVMSTREAM_BASE_TREE`` (default ``/work/base``) names a checkout of the tree before the contract
with its own ``.venv``; without one these tests skip (they compare two trees, they need both).

* the figures ``GET /models`` shows (``estimator_stats``), the published copy's decisions and the
  size estimates of plain BSGD, BSCA, Pegasos pipelines and selectors along a stream
  (``tests/scenarios/model_figures.py``, run by both trees): equal, max |Δ| = 0;
* states written by the tree before load here and continue identically
  (``tests/scenarios/old_states.py``);
* on real data (ijcnn1, letter, reuters from ``SVMSTREAM_DATA``; skipped without them): plain
  BSGD, BSCA, Pegasos pipelines and the no-settings selector in process, and the no-settings
  selector and a model whose challenger is promoted through the service's app and over HTTP
  (``tests/scenarios/real_decisions.py``): equal decisions (max |Δ| = 0), equal promotions.
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
DATA = Path(os.environ.get("SVMSTREAM_DATA", "/work/shared/data"))
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


@pytest.mark.skipif(not (DATA / "ijcnn1.bz2").exists(), reason=f"no LIBSVM data sets in {DATA}")
def test_real_data_decisions_and_promotions_equal_the_tree_before():
    script = SCENARIOS / "real_decisions.py"
    before = json.loads(_run(PYTHON, script, cwd=BASE))
    now = json.loads(_run(sys.executable, script, cwd=Path(__file__).parent.parent))
    assert set(now) == set(before) == {"ijcnn1", "letter", "reuters"}
    for data, parts in before.items():
        assert set(now[data]) == set(parts) == {"in_process", "app", "http"}
        for part, cases in parts.items():
            assert set(now[data][part]) == set(cases)
            for case, figures in cases.items():
                got = now[data][part][case]
                assert got["decisions"] == figures["decisions"], (data, part, case)  # max |Δ| = 0
                assert got.get("at") == figures.get("at"), (data, part, case)
        for part in ("app", "http"):  # the challenged model's challenger is promoted on every set
            assert parts[part]["promoted"]["promotions"] >= 1, (data, part)
