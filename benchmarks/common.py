"""Helpers shared by the benchmarks: data location, result files, a real server process."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from svmstream.app.jobs.datasets import load_dataset

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


def data_dir() -> Path:
    """``$SVMSTREAM_DATA`` (default ``../shared/data`` next to the repository)."""
    return Path(os.environ.get("SVMSTREAM_DATA", REPO.parent / "shared" / "data"))


def data_file(name: str) -> Path:
    """Path of a benchmark data file; exits with a clear message when it is missing."""
    path = data_dir() / name
    if not path.exists():
        sys.exit(f"benchmark data {path} not found: set SVMSTREAM_DATA to the folder with the LIBSVM files")
    return path


def load_pair(train: str, test: str, n_features: int | None = None, dense: bool = True):
    """(X, y, X_test, y_test) of a LIBSVM train/test pair; dense float64 unless ``dense=False``."""
    X, y = load_dataset(data_file(train), n_features=n_features, fmt="libsvm")
    Xt, yt = load_dataset(data_file(test), n_features=X.shape[1], fmt="libsvm")
    if dense:
        X, Xt = np.ascontiguousarray(X.toarray()), np.ascontiguousarray(Xt.toarray())
    return X, y, Xt, yt


def machine() -> dict:
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_avg_at_start": os.getloadavg()[0],
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def write_results(name: str, payload: dict, table_rows: list[dict], title: str, notes: str = "") -> None:
    """Write ``benchmarks/results/<name>.json`` and ``<name>.md`` (a Markdown table)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2, default=float) + "\n")
    lines = [f"# {title}", "", f"Machine: {json.dumps(payload.get('machine', {}))}", ""]
    if notes:
        lines += [notes, ""]
    groups: dict = {}
    for row in table_rows:  # one table per value of the "part" column, if any
        groups.setdefault(row.get("part"), []).append(row)
    for part, rows in groups.items():
        columns = list(dict.fromkeys(key for row in rows for key in row))
        if part is not None:
            lines += [f"## Part {part}", ""]
        lines.append("| " + " | ".join(columns) + " |")
        lines.append("|" + "---|" * len(columns))
        for row in rows:
            lines.append("| " + " | ".join(_fmt(row.get(c)) for c in columns) + " |")
        lines.append("")
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return "" if value is None else str(value)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A real ``svmstream serve`` process on a free port (context manager)."""

    def __init__(self, snapshot_dir: Path, *args: str, env: dict | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # the repository first, but a PYTHONPATH already set (e.g. a worktree's package
        # symlinks) keeps precedence over it
        path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)]))
        full_env = {**os.environ, "PYTHONPATH": path, **(env or {})}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "svmstream.app.cli.main",
                "serve",
                "--port",
                str(self.port),
                "--snapshot-dir",
                str(snapshot_dir),
                "--log-level",
                "warning",
                *args,
            ],
            cwd=REPO,
            env=full_env,
        )

    def __enter__(self):
        import httpx

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.2)
        raise TimeoutError("server did not start")

    def rss_mb(self) -> float:
        import psutil

        return psutil.Process(self.proc.pid).memory_info().rss / 2**20

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(60)
