"""The service answers /health while the solver kernels compile in the background (issue 17,
item 3): a fresh install (an empty numba cache) is healthy before the warm-up is done, the
log says what is being compiled, and a request that arrives meanwhile waits and says so."""

from __future__ import annotations

import time

import numpy as np


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
    with server.client() as c:
        assert c.put("/models/early", json={"warmup": 20, "shuffle_buffer": 0}).status_code == 201
        r = c.post("/learn", json={"model": "early", "X": X, "y": y})
        assert r.status_code == 200, r.text
        assert c.post("/predict", json={"model": "early", "X": X[:3]}).status_code == 200
    deadline = time.monotonic() + 600
    while "solver warm-up done" not in server.log_text() and time.monotonic() < deadline:
        time.sleep(0.5)
    log = server.log_text()
    assert "solver warm-up done" in log
    assert "learning a batch of model 'early' waits for the solver kernels being compiled" in log
