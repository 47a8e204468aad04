"""The regression and novelty benchmarks' models through a real service (issue 38: "one pass
through HTTP /learn"): :class:`HttpModel` learns by ``POST /learn`` (batches of the benchmark's
size) and predicts by ``POST /predict`` on a ``svmstream serve`` process (:class:`.common.Server`),
with the methods the in-process pipelines have (``partial_fit``, ``flush``, ``predict``,
``predict_interval``, ``score_samples``, ``outlier``); :func:`server_cpu` reads the server's CPU
seconds (the CPU per example of a model is the server's, not the client's JSON encoding)."""

from __future__ import annotations

import itertools
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from .common import Server

#: Rows per /predict (a body well under the default body limit).
PREDICT_ROWS = 2000
_NAMES = itertools.count()


@contextmanager
def service():
    """``(server, client)``: a fresh ``svmstream serve`` (no stream, no snapshots kept)."""
    import httpx

    with (
        tempfile.TemporaryDirectory() as snap,
        Server(Path(snap), clean_env=True) as server,
        httpx.Client(base_url=server.url, timeout=600) as client,
    ):
        yield server, client


def server_cpu(server) -> float:
    """The server process's CPU seconds so far (user + system)."""
    import psutil

    times = psutil.Process(server.proc.pid).cpu_times()
    return float(times.user + times.system)


class HttpModel:
    """A model created by ``PUT /models/{name}`` with ``settings`` on the service of ``client``."""

    def __init__(self, client, settings: dict):
        self.client = client
        self.name = f"bench-{next(_NAMES)}"
        r = client.put(f"/models/{self.name}", json=settings)
        if r.status_code != 201:
            raise RuntimeError(f"PUT /models/{self.name}: {r.status_code} {r.text}")

    def partial_fit(self, X, y=None):
        body = {"model": self.name, "X": np.asarray(X).tolist()}
        if y is not None:
            body["y"] = np.asarray(y).tolist()
        r = self.client.post("/learn", json=body)
        if r.status_code != 200:
            raise RuntimeError(f"/learn: {r.status_code} {r.text}")
        return self

    def flush(self):
        self.client.post(f"/models/{self.name}/flush")
        return self

    def _predict(self, X, **extra) -> dict:
        parts: dict[str, list] = {}
        X = np.asarray(X)
        for lo in range(0, X.shape[0], PREDICT_ROWS):
            body = {"model": self.name, "X": X[lo : lo + PREDICT_ROWS].tolist(), **extra}
            r = self.client.post("/predict", json=body)
            if r.status_code != 200:
                raise RuntimeError(f"/predict: {r.status_code} {r.text}")
            for key, value in r.json().items():
                if isinstance(value, list):
                    parts.setdefault(key, []).extend(value)
        return {k: np.asarray(v) for k, v in parts.items()}

    def predict(self, X):
        return self._predict(X)["values"]

    def predict_interval(self, X, level=0.9):
        got = self._predict(X, interval=level)
        return got["lower"], got["upper"]

    def score_samples(self, X):
        return self._predict(X)["scores"]

    def outlier(self, X):
        return self._predict(X)["outlier"].astype(bool)

    def info(self) -> dict:
        return self.client.get(f"/models/{self.name}").json()

    def delete(self) -> None:
        self.client.delete(f"/models/{self.name}")
