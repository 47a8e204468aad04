"""The service answers /health while the solver kernels compile in the background: a
fresh install (an empty numba cache) is healthy before the warm-up is done, the
log says what is being compiled, and a request that arrives meanwhile waits and says so."""

from __future__ import annotations

import time

import httpx
import numpy as np

from tests.conftest import wait_for


def test_health_answers_before_the_kernels_are_compiled(start_server, tmp_path):
    server = start_server(
        env={"NUMBA_CACHE_DIR": str(tmp_path / "empty-numba-cache"), "SVMSTREAM_LOG_LEVEL": "info"}
    )
    log = server.log_text()
    assert "solver warm-up done" not in log, "the warm-up finished before /health answered"
    assert "compiling solver kernels" in log
    rng = np.random.default_rng(0)
    X = (rng.normal(size=(60, 4)) * 20).tolist()
    y = ["a" if row[0] > 0 else "b" for row in X]
    # the compilation from an empty cache takes minutes on a loaded machine: the learn request
    # waits for it, and the model answers once its batch is applied
    with httpx.Client(base_url=server.url, timeout=600) as c:
        assert c.put("/models/early", json={"warmup": 20, "shuffle_buffer": 0}).status_code == 201
        r = c.post("/learn", json={"model": "early", "X": X, "y": y})
        assert r.status_code == 200, r.text
        wait_for(
            lambda: c.post("/predict", json={"model": "early", "X": X[:3]}).status_code == 200,
            timeout=600,
            what="the first prediction after the kernels compiled",
            interval=0.5,
        )
    deadline = time.monotonic() + 600
    while "solver warm-up done" not in server.log_text() and time.monotonic() < deadline:
        time.sleep(0.5)
    log = server.log_text()
    assert "solver warm-up done" in log
    assert "learning a batch of model 'early' waits for the solver kernels being compiled" in log


def test_a_kernel_group_nobody_uses_is_warmed_when_a_model_first_needs_it(start_server, tmp_path):
    """The start-up warm-up loads the default configuration's kernels only (each group costs
    memory for good); the first BSCA model starts BSCA's warm-up, logged as at start, and
    learns and predicts; a second one starts nothing more."""
    server = start_server(env={"SVMSTREAM_LOG_LEVEL": "info"})
    deadline = time.monotonic() + 600
    while "solver warm-up done" not in server.log_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    log = server.log_text()
    assert "solver warm-up done" in log and "BSCA" not in log and "kernel=linear" not in log
    rng = np.random.default_rng(0)
    X = (rng.normal(size=(60, 4)) * 20).tolist()
    y = ["a" if row[0] > 0 else "b" for row in X]
    with server.client() as c:
        for name in ("bsca-1", "bsca-2"):
            body = {"algorithm": "bsca", "warmup": 20, "shuffle_buffer": 0}
            assert c.put(f"/models/{name}", json=body).status_code == 201
            assert c.post("/learn", json={"model": name, "X": X, "y": y}).status_code == 200
            assert c.post("/predict", json={"model": name, "X": X[:3]}).status_code == 200
        while c.get("/health").json()["solvers"] != "ready" and time.monotonic() < deadline:
            time.sleep(0.2)
    log = server.log_text()
    assert (
        "compiling solver kernels (or loading them from numba's cache): BSCA with sparse support vectors"
        in log
    )
    assert log.count("solver warm-up done") == 2 and "(bsca)" in log
    assert "kernel=linear" not in log


def test_a_learner_step_waits_for_a_running_warm_up():
    """numba's first compilations in two threads at once are not safe (a CI run's first
    ``/learn`` failed with "dictionary changed size during iteration" beside the warm-up):
    :func:`wait_for_warm_up`, called before every learner step, returns only once every
    running warm-up is done, and at once when none runs."""
    import threading

    from svmstream.app.models import warmup

    release = threading.Event()

    class HeldWarmUp(warmup.WarmUp):
        def _run(self):  # a warm-up that ends when the test says so
            try:
                release.wait(30)
            finally:
                self.done.set()
                with warmup._LOCK:
                    warmup._RUNNING.remove(self)

    held = HeldWarmUp(groups=()).start()
    waited = threading.Event()
    waiter = threading.Thread(target=lambda: (warmup.wait_for_warm_up("a test step"), waited.set()))
    waiter.start()
    assert not waited.wait(0.5), "the step ran beside a running warm-up"
    release.set()
    assert waited.wait(10) and held.done.is_set()
    waiter.join()
    started = time.perf_counter()
    warmup.wait_for_warm_up("a test step")  # nothing running: at once
    assert time.perf_counter() - started < 0.1
