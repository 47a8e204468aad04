"""A user's settings mean what they say: explicit hyperparameters through the service against
the plain estimator with the same settings.

1. phishing (the papers' 70/30 split of ``bench_rehearsal.load``, the training part shuffled by
   each seed): a model
   created with ``PUT /models/p {"budget": 500, "gamma": 8, "C": 8}`` (a C without lambda: the
   service runs BSCA), fed through HTTP ``/learn`` in batches of 1,000, then flushed; against
   the plain estimator of the algorithm it runs (``BudgetedSCAClassifier(budget=500, gamma=8,
   C=8, random_state=seed).fit``) on the same rows; and the same with ``"algorithm": "bsgd"``
   (with and without ``n_samples``) against ``BudgetedSGDClassifier(...).fit``.
2. ijcnn1 (the shared train/test files): the README's explicit example
   (``svmstream replay ... --budget 500 --gamma 2 --C 32``: λ = 1/(n·C), n = rows of the file,
   shuffled) against the same replay with no settings.

Medians over seeds.  Run: ``python -m benchmarks.bench_settings [--seeds 0 1 2]``.
Writes ``benchmarks/results/settings.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import numpy as np
import psutil

from benchmarks import datasets
from benchmarks.bench_defaults import ours
from benchmarks.bench_rehearsal import load
from benchmarks.common import REPO, Server, child_pythonpath, machine, write_results
from svmstream.solvers import BudgetedSCAClassifier, BudgetedSGDClassifier

PAPER = {"budget": 500, "gamma": 8.0, "C": 8.0}
PLAIN = {"bsca": BudgetedSCAClassifier, "bsgd": BudgetedSGDClassifier}


def phishing_rows(seeds) -> list[dict]:
    X, y, Xt, yt = load("phishing")
    sparse = False
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            perm = np.random.default_rng(seed).permutation(X.shape[0])
            Xp, yp = X[perm], y[perm]
            with Server(Path(tmp) / f"p{seed}") as server:
                process = psutil.Process(server.proc.pid)
                # C without lambda and no algorithm: the service runs BSCA (C is its box constraint)
                service = ours(server.url, "p", Xp, yp, Xt, yt, sparse, process, PAPER)
                algorithm = _algorithm(server.url, "p")
                # BSGD named: λ = 1/(n·C) needs n, which a stream does not know (n = 30,000 assumed) ...
                bsgd = ours(server.url, "g", Xp, yp, Xt, yt, sparse, process, {**PAPER, "algorithm": "bsgd"})
                # ... unless n_samples gives it
                bsgd_n = ours(
                    server.url,
                    "gn",
                    Xp,
                    yp,
                    Xt,
                    yt,
                    sparse,
                    process,
                    {**PAPER, "algorithm": "bsgd", "n_samples": X.shape[0]},
                )
            plain = PLAIN[algorithm](**PAPER, random_state=seed).fit(Xp, yp)
            plain_bsgd = BudgetedSGDClassifier(**PAPER, random_state=seed).fit(Xp, yp)
            rows.append(
                {
                    "set": "phishing",
                    "what": 'PUT {"budget": 500, "gamma": 8, "C": 8} via HTTP vs plain fit',
                    "seed": seed,
                    "service_%": service["accuracy_%"],
                    "service algorithm": algorithm,
                    "service scaling": service["scaling"],
                    "service_cpu_s": service["service_cpu_s"],
                    "plain_fit_%": 100 * plain.score(Xt, yt),
                    "bsgd_service_%": bsgd["accuracy_%"],
                    "bsgd_service_cpu_s": bsgd["service_cpu_s"],
                    "bsgd_service_with_n_samples_%": bsgd_n["accuracy_%"],
                    "bsgd_plain_fit_%": 100 * plain_bsgd.score(Xt, yt),
                }
            )
            print(rows[-1], flush=True)
    return rows


def _algorithm(url: str, model: str) -> str:
    with httpx.Client(base_url=url, timeout=60) as client:
        return client.get(f"/models/{model}").json()["algorithm"]


def _replay(url: str, model: str, seed: int, extra: list[str]) -> float:
    """``svmstream replay`` of ijcnn1 into ``model`` (shuffled by ``seed``); its test accuracy in %."""
    cmd = [
        sys.executable,
        "-m",
        "svmstream.app.cli.main",
        "replay",
        str(datasets.path("ijcnn1")),
        "--test",
        str(datasets.path("ijcnn1", "test")),
        "--url",
        url,
        "--model",
        model,
        "--shuffle",
        str(seed),
        "--no-progress",
        "--json",
        *extra,
    ]
    out = subprocess.run(
        cmd,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": child_pythonpath()},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return 100 * float(json.loads(out.strip().splitlines()[-1])["test_accuracy"])


def ijcnn1_rows(seeds) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            with Server(Path(tmp) / f"i{seed}") as server:
                explicit = _replay(
                    server.url, "explicit", seed, ["--budget", "500", "--gamma", "2", "--C", "32"]
                )
                none = _replay(server.url, "nosettings", seed, [])
            rows.append(
                {
                    "set": "ijcnn1",
                    "what": "README replay --budget 500 --gamma 2 --C 32 vs no settings",
                    "seed": seed,
                    "explicit_%": explicit,
                    "no_settings_%": none,
                }
            )
            print(rows[-1], flush=True)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--parts", nargs="+", default=["phishing", "ijcnn1"], choices=["phishing", "ijcnn1"])
    args = parser.parse_args(argv)
    rows = []
    if "phishing" in args.parts:
        rows += phishing_rows(args.seeds)
    if "ijcnn1" in args.parts:
        rows += ijcnn1_rows(args.seeds)
    summary = {}
    for key in (
        "service_%",
        "plain_fit_%",
        "bsgd_service_%",
        "bsgd_service_with_n_samples_%",
        "bsgd_plain_fit_%",
        "explicit_%",
        "no_settings_%",
    ):
        values = [r[key] for r in rows if key in r]
        if values:
            summary[f"median {key}"] = float(np.median(values))
    payload = {"machine": machine(), "rows": rows, "summary": summary, "load_avg_at_end": os.getloadavg()[0]}
    write_results(
        "settings",
        payload,
        rows,
        "Explicit settings through the service against the plain estimator",
        "Medians: " + ", ".join(f"{k} = {v:.2f}" for k, v in summary.items()),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
