"""The README runs top to bottom: its curl commands, in order, against the service (a
TestClient; the answers the README shows come from a real server on a fresh clone), each
answered 2xx with the fields its comment shows, and the replay commands use a model of their
own (the curl examples make a 2-feature model, which a 22-feature file cannot continue)."""

import io
import json
import os
import re
import shlex
import subprocess
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from svmstream.app.main import create_app
from svmstream.app.settings import Settings

README = Path(__file__).resolve().parent.parent / "README.md"
DATA = Path(os.environ.get("SVMSTREAM_DATA", README.parent.parent / "shared" / "data"))
ACCURACY = re.compile(r"test accuracy on (\S+): ([0-9.]+)% \(([0-9,]+)/([0-9,]+)\)(?:\s+\(±([0-9.]+) pp\))?")


def _commands() -> list[str]:
    """The README's ```bash blocks as shell commands, continuation lines joined, in order."""
    text = README.read_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for command in block.replace("\\\n", " ").splitlines():
            if command.strip() and not command.lstrip().startswith("#"):
                commands.append(command.split("  #")[0].strip())
    return commands


def _curl(command: str) -> tuple[str, str, bytes | None]:
    """``(method, path, body)`` of ``curl -s [-X M] localhost:8000/PATH [-H ...] [-d BODY]``."""
    words = shlex.split(command)
    method, body, url = None, None, None
    i = 1
    while i < len(words):
        word = words[i]
        if word in ("-X", "-H", "-d"):
            value = words[i + 1]
            if word == "-X":
                method = value
            elif word == "-d":
                body = value.encode()
            i += 2
            continue
        if word.startswith("localhost:8000"):
            url = word.removeprefix("localhost:8000")
        i += 1
    assert url is not None, command
    return method or ("POST" if body is not None else "GET"), url, body


def test_the_readme_curl_commands_answer_in_order(tmp_path):
    commands = _commands()
    curls = [c for c in commands if c.startswith("curl ")]
    assert len(curls) >= 6, curls
    settings = Settings(snapshot_dir=tmp_path / "snap", snapshot_interval_s=3600, warm_up=False)
    answers = []
    with TestClient(create_app(settings)) as client:
        for command in curls:
            method, path, body = _curl(command)
            headers = {"content-type": "application/json"} if body is not None else {}
            r = client.request(method, path, content=body, headers=headers)
            assert 200 <= r.status_code < 300, (command, r.status_code, r.text)
            answers.append(r.json())
    learned = next(a for a in answers if "n_examples" in a)
    assert learned == {
        "model": "demo",
        "n_examples": 3,
        "version": 1,
        "n_seen": 3,
        "n_support_vectors": 0,
        "t": 0,
        "buffered": 3,
    }
    info = next(a for a in answers if a.get("warming_up"))
    assert info["lambda_eff"] == pytest.approx(1 / 30_000) and info["pending"] == 3
    shown_kind = re.search(r'"kind":"([^"]*)"', README.read_text()).group(1)
    assert info["kind"] == shown_kind, info["kind"]
    flushed = next(a for a in answers if "flushed" in a)
    shown_flush = json.loads(re.search(r'# (\{"model":"demo","flushed".*\})', README.read_text()).group(1))
    assert flushed == shown_flush, (flushed, shown_flush)
    predicted = answers[-1]
    assert predicted["model"] == "demo" and predicted["labels"] == [1, -1], json.dumps(predicted)


def test_the_readme_replays_use_a_model_the_curl_examples_do_not():
    commands = _commands()
    curl_models = {m for c in commands if c.startswith("curl ") for m in re.findall(r"/models/(\w+)", c)}
    curl_models |= {m for c in commands if c.startswith("curl ") for m in re.findall(r'"model": "(\w+)"', c)}
    replays = [shlex.split(c) for c in commands if " replay " in f" {c} "]
    assert len(replays) >= 2
    for words in replays:
        assert "--model" in words, words  # without it replay continues "default"
        assert words[words.index("--model") + 1] not in curl_models | {"default"}, words


def _replays_and_figures() -> list[tuple[list[str], re.Match]]:
    """The README's ``svmstream replay`` commands, each with the accuracy line its comment shows."""
    text = README.read_text()
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        lines = block.replace("\\\n", " ").splitlines()
        for i, line in enumerate(lines):
            if " replay " in f" {line} ":
                shown = next(m for later in lines[i + 1 :] if (m := ACCURACY.search(later)))
                out.append((shlex.split(line.split("  #")[0]), shown))
    return out


def _accuracy(output: str) -> tuple[float, int, int]:
    got = ACCURACY.search(output)
    assert got is not None, output[-2000:]
    return float(got.group(2)), int(got.group(3).replace(",", "")), int(got.group(4).replace(",", ""))


@pytest.mark.skipif(not (DATA / "ijcnn1.bz2").exists(), reason=f"ijcnn1.bz2 not in SVMSTREAM_DATA ({DATA})")
def test_the_readme_replays_print_the_readme_figures(start_server, tmp_path):
    """The README's replays, in order, as written (``../shared/data`` read from
    ``SVMSTREAM_DATA``), against a real ``svmstream serve``: each prints the test accuracy its
    comment shows, within the comment's spread (±0.1 pp)."""
    from tests.conftest import CLI, REPO, subprocess_env

    replays = _replays_and_figures()
    assert len(replays) == 2, replays
    server = start_server()
    for words, shown in replays:
        assert words[:2] == [".venv/bin/svmstream", "replay"], words
        args = [str(DATA / Path(w).name) if w.startswith("../shared/data/") else w for w in words[2:]]
        proc = subprocess.run(
            [*CLI, "replay", *args, "--url", server.url, "--no-progress"],
            cwd=REPO,
            env=subprocess_env(),
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        percent, correct, total = _accuracy(proc.stdout + proc.stderr)
        assert total == int(shown.group(4).replace(",", ""))
        spread = float(shown.group(5))
        assert abs(percent - float(shown.group(2))) <= spread, (words, proc.stdout[-500:], shown.group(0))
    server.terminate()


@pytest.mark.skipif(not (DATA / "ijcnn1.bz2").exists(), reason=f"ijcnn1.bz2 not in SVMSTREAM_DATA ({DATA})")
def test_the_readme_python_example_prints_what_the_readme_shows(monkeypatch):
    """The README's scikit-learn example, run as written (in a directory where
    ``../shared/data`` is ``SVMSTREAM_DATA``): the three decisions to 1e-6 relative and the
    score to 1e-3 (the README prints them rounded; another CPU's vector code changes the last
    bits only)."""
    text = README.read_text()
    code = re.search(r"```python\n(.*?)```", text, flags=re.S).group(1)
    shown = re.search(r"# \[([^\]]*)\] ([0-9.]+)", code)
    code = code.replace("../shared/data/", f"{DATA}/")
    out = io.StringIO()
    with redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})  # noqa: S102 -- the README's own example
    printed = re.search(r"\[([^\]]*)\]\s+([0-9.]+)", out.getvalue().replace("\n", " "))
    assert printed is not None, out.getvalue()
    got = [float(v) for v in printed.group(1).split()]
    want = [float(v) for v in shown.group(1).split()]
    assert got == pytest.approx(want, rel=1e-6)
    assert float(printed.group(2)) == pytest.approx(float(shown.group(2)), abs=1e-3)


TRAIN_RANGE = re.compile(r"\(([0-9.]+)-([0-9.]+)% over")


@pytest.mark.skipif(not (DATA / "ijcnn1.bz2").exists(), reason=f"ijcnn1.bz2 not in SVMSTREAM_DATA ({DATA})")
def test_the_readme_train_command_prints_a_figure_within_its_stated_range():
    """The README's ``svmstream train`` (DC-SVM, local), as written (``../shared/data`` read from
    ``SVMSTREAM_DATA``): the test accuracy it prints lies in the range its comment states (the
    k-means pool is not deterministic, so the comment gives a range, not one figure)."""
    from tests.conftest import CLI, REPO, subprocess_env

    text = README.read_text()
    block = next(b for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S) if " train " in b)
    lines = block.replace("\\\n", " ").splitlines()
    words = shlex.split(next(line for line in lines if " train " in f" {line} "))
    shown = next(line for line in lines if ACCURACY.search(line))
    low, high = (float(v) for v in TRAIN_RANGE.search(shown).groups())
    assert words[:2] == [".venv/bin/svmstream", "train"], words
    args = [str(DATA / Path(w).name) if w.startswith("../shared/data/") else w for w in words[2:]]
    proc = subprocess.run(
        [*CLI, "train", *args], cwd=REPO, env=subprocess_env(), capture_output=True, text=True, timeout=1800
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    percent, _, total = _accuracy(proc.stdout + proc.stderr)
    assert total == int(ACCURACY.search(shown).group(4).replace(",", ""))
    assert low <= percent <= high, (percent, low, high, proc.stdout[-500:])
