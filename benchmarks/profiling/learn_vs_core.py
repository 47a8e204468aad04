"""Server CPU per example of /learn against the same model in process, interleaved.

Per round: the plain estimator's ``partial_fit`` and the in-process pipeline on ijcnn1's
49,990 rows in batches of 1,000 (``time.process_time``), then a real ``svmstream serve``
fed the same batches as JSON and as the binary tensor body of ``app/ingest/learn_tensors.py``
(``application/octet-stream`` with ``Inference-Header-Content-Length``: FP64 ``X``, INT64 ``y``)
(the server's CPU from psutil; 3 batches to another model first, so that numba's cached kernels
are loaded), stages off and default stages.
Run from a tree: ``python benchmarks/profiling/learn_vs_core.py [rounds]``.
"""

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import httpx
import numpy as np
import orjson
import psutil
from sklearn.datasets import load_svmlight_file

from svmstream.solvers import BudgetedSGDClassifier, StreamingClassifier

HYP = {"budget": 500, "gamma": 2.0, "C": 32.0, "merge_solver": "lookup-wd", "random_state": 0}
OFF = {
    "scaling": "none",
    "shuffle_buffer": 0,
    "run_guard": False,
    "rehearsal": 0,
    "on_drift": "none",
    "warmup": 0,
}
X, y = load_svmlight_file(
    os.environ.get("SVMSTREAM_DATA", "/work/shared/data") + "/ijcnn1.bz2", n_features=22
)
X = np.ascontiguousarray(X.toarray())
y = y.astype(np.int64)
N = X.shape[0]
SLICES = [slice(i, i + 1000) for i in range(0, N, 1000)]


def in_process(make) -> float:
    model = make()
    started = time.process_time()
    for s in SLICES:
        model.partial_fit(X[s], y[s], classes=[-1, 1])
    return time.process_time() - started


def json_body(s: slice) -> tuple[bytes, dict]:
    body = orjson.dumps({"model": "m", "X": X[s].tolist(), "y": y[s].tolist()})
    return body, {"Content-Type": "application/json"}


def binary_body(s: slice) -> tuple[bytes, dict]:
    """The same batch as an OIP v2 binary tensor body (the JSON header, then X's and y's bytes)."""
    xb, yb = np.ascontiguousarray(X[s], dtype="<f8").tobytes(), y[s].astype("<i8").tobytes()
    n = X[s].shape[0]
    tensors = [
        {
            "name": "X",
            "datatype": "FP64",
            "shape": [n, X.shape[1]],
            "parameters": {"binary_data_size": len(xb)},
        },
        {"name": "y", "datatype": "INT64", "shape": [n], "parameters": {"binary_data_size": len(yb)}},
    ]
    header = orjson.dumps({"model": "m", "inputs": tensors})
    kind = {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(header))}
    return header + xb + yb, kind


def server(hyper: dict, body=json_body) -> float:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SVMSTREAM_")}
    env.update(SVMSTREAM_CREATE_DEFAULT_MODEL="false", SVMSTREAM_LOG_LEVEL="warning")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "svmstream.app.cli.main",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        proc = subprocess.Popen(
            [*cmd, "--snapshot-dir", tmp], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(600):
                try:
                    if httpx.get(url + "/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            ps = psutil.Process(proc.pid)
            with httpx.Client(base_url=url, timeout=120) as c:
                # the background solver warm-up (app/models/warmup.py) is start-up work, not the
                # per-example cost: measured only once it is done
                for _ in range(3000):
                    if c.get("/health").json().get("solvers") == "ready":
                        break
                    time.sleep(0.1)
                for name in ("warm", "m"):  # "warm": numba's cached kernels load into the server
                    assert c.put(f"/models/{name}", json={"algorithm": "bsgd", **hyper}).status_code == 201
                for s in SLICES[:3]:
                    c.post("/learn", json={"model": "warm", "X": X[s].tolist(), "y": y[s].tolist()})
                bodies = [body(s) for s in SLICES]
                c0 = sum(ps.cpu_times()[:2])
                for b, headers in bodies:
                    r = c.post("/learn", content=b, headers=headers)
                    assert r.status_code == 200, r.text
                return sum(ps.cpu_times()[:2]) - c0
        finally:
            proc.terminate()
            proc.wait(timeout=60)


rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
in_process(lambda: BudgetedSGDClassifier(**HYP))  # numba cache
rows = []
for rnd in range(rounds):
    load = os.getloadavg()[0]
    r = {
        "plain partial_fit": in_process(lambda: BudgetedSGDClassifier(**HYP)),
        "server, stages off": server({**HYP, **OFF}),
        "server binary, stages off": server({**HYP, **OFF}, binary_body),
        "pipeline, default stages": in_process(lambda: StreamingClassifier(BudgetedSGDClassifier(**HYP))),
        "server, default stages": server(HYP),
        "server binary, default stages": server(HYP, binary_body),
        "pipeline, stages off": in_process(lambda: StreamingClassifier(BudgetedSGDClassifier(**HYP), **OFF)),
    }
    r["ratio off (server / plain)"] = r["server, stages off"] / r["plain partial_fit"]
    r["ratio default (server / pipeline)"] = r["server, default stages"] / r["pipeline, default stages"]
    r["ratio off, binary (server / plain)"] = r["server binary, stages off"] / r["plain partial_fit"]
    r["ratio default, binary (server / pipeline)"] = (
        r["server binary, default stages"] / r["pipeline, default stages"]
    )
    r["load"] = load
    rows.append(r)
    print(f"round {rnd + 1}:", json.dumps({k: round(v, 3) for k, v in r.items()}), flush=True)
for k in rows[0]:
    print(f"| {k} | {statistics.median(r[k] for r in rows):.3f} | {', '.join(f'{r[k]:.3f}' for r in rows)} |")
