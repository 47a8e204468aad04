"""docs/feedback.md's example runs: its bash block, with the real ``curl`` and ``bash``, against a
real server; each command answers what its comment shows."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "feedback.md"


def test_the_curl_example_of_docs_feedback_runs(start_server, tmp_path):
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    block = re.search(r"```bash\n(.*?)```", DOC.read_text(), flags=re.S).group(1)
    server = start_server(tmp_path / "snap")
    script = block.replace("localhost:8000", server.url.removeprefix("http://"))
    script = "\n".join(line + ("; echo" if line.startswith("curl") else "") for line in script.splitlines())
    bin_dir = tmp_path / "bin"  # python3 of the example: this interpreter
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    out = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    answers = [line for line in out.stdout.splitlines() if line.strip()]
    feedback = [json.loads(a) for a in answers if a.startswith('{"model":"clicks","learned"')]
    assert [(f["learned"], f["duplicate"], f["expired"]) for f in feedback] == [(2, 0, 0), (0, 2, 0)]
    assert feedback[1]["duplicate_indices"] == [0, 1]
    last = answers[-1]
    assert "'learned': 2, 'duplicate': 2, 'expired': 0" in last, last
