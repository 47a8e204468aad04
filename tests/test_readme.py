"""The README runs top to bottom: its curl commands, in order, against the service (a
TestClient; the answers the README shows come from a real server on a fresh clone), each
answered 2xx with the fields its comment shows, and the replay commands use a model of their
own (the curl examples make a 2-feature model, which a 22-feature file cannot continue)."""

import json
import re
import shlex
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from svmstream.app.main import create_app
from svmstream.app.settings import Settings

README = Path(__file__).resolve().parent.parent / "README.md"


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
    flushed = next(a for a in answers if "flushed" in a)
    assert flushed["flushed"] == 3 and flushed["buffered"] == 0
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
