"""The distribution installs one import name, ``svmstream``; nothing generic like ``app``."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _declared_packages() -> set[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    return set(config["tool"]["setuptools"]["packages"])


def test_every_source_package_is_declared():
    found = {
        "svmstream." + ".".join(init.parent.relative_to(REPO).parts)
        for top in ("app", "solvers")
        for init in (REPO / top).rglob("__init__.py")
    }
    assert found == _declared_packages()


def test_wheel_holds_only_the_svmstream_package(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("svmstream-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"svmstream"}
    assert "svmstream/solvers/budgeted/_bsgd.py" in names and "svmstream/app/main.py" in names
    assert not any(n.startswith(("app/", "solvers/", "tests/", "benchmarks/")) for n in names)
    # the dashboard's static files (package data): every file of app/static, nothing else there
    static = {
        "svmstream/app/" + p.relative_to(REPO / "app").as_posix()
        for p in (REPO / "app" / "static").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert "svmstream/app/static/vendor/uplot/uPlot.iife.min.js" in static
    assert "svmstream/app/static/vendor/uplot/LICENSE" in static
    assert "svmstream/app/static/dashboard/index.html" in static
    assert static == {n for n in names if n.startswith("svmstream/app/static/")}
