"""The one registry of the benchmarks: every benchmark module with its options and its one-line
description, and the ``list`` / ``run`` commands of ``python -m benchmarks``.

``benchmarks/README.md``'s table is :func:`markdown_table` (``python -m benchmarks list
--markdown`` prints it; ``tests/test_bench_runner.py`` checks the two agree and that every
module of ``benchmarks/`` with a ``__main__`` block is registered here).
"""

from __future__ import annotations

import runpy
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: ``python -m benchmarks run NAME [options]`` ≡ ``python -m benchmarks.NAME``."""

    options: str
    """The options, as the README shows them (``""``: none)."""
    what: str
    """One line: what it measures."""


BENCHMARKS: dict[str, Benchmark] = {
    "bench_skeleton": Benchmark(
        "[--quick]",
        "BSGD on ijcnn1 (B=500, γ=2, C=32), solver only and through HTTP replay; server RSS after 1 and 20 passes",
    ),
    "bench_solver_pass": Benchmark(
        "[--seeds 0 1 2]",
        "one pass of the plain `BudgetedSGDClassifier` over ijcnn1 (B=500, γ=2, C=32; GSS and lookup-WD merging): "
        "CPU and wall seconds, examples per CPU second, accuracy and decision-value digests on ijcnn1.t "
        "(compare two trees with `compare`: equal decisions show as max \\|Δ\\| = 0)",
    ),
    "bench_learn_cpu": Benchmark(
        "[--rows 20000]",
        "CPU per example of the service's learn path in one process (TestClient `/learn`): a plain BSGD "
        "pipeline and the no-settings selector on ijcnn1, with their test accuracy and a digest of the decisions",
    ),
    "bench_stream": Benchmark(
        "[--parts ...]",
        "Redis stream ingestion: throughput and lag, SIGKILL restarts, dead letters, Redis restart, trimming",
    ),
    "bench_stream_ab": Benchmark(
        "[--before DIR] [--rounds 3] [--tolerance 0.2] [--rebase]",
        "Redis stream end to end (49,990 ijcnn1 `xb` entries, BSGD lookup-WD): examples/s, its ratio to the "
        "solver alone in the same round (against the stored ratio), interleaved with another tree",
    ),
    "bench_consume_long": Benchmark(
        "",
        "consume-only over a 200k-entry Redis stream (ijcnn1 four times, filled before the model exists): "
        "examples per wall second and per service CPU second",
    ),
    "bench_bsgd_paper": Benchmark(
        "[--quick] [--parts ABC]",
        "BSGD family vs the papers: removal/projection/merging (Wang et al. Tables 3–4), lookup-WD vs GSS "
        "(Glasmachers & Qaadan Tables 2–3), maintenance cost vs B",
    ),
    "bench_projection": Benchmark(
        "", "projection micro-benchmark: cost per step at B = 100/500/1000 vs merging"
    ),
    "bench_bsca": Benchmark(
        "[--merge-solver lookup-wd] [--sampling permutation] [--seeds 5]",
        "BSCA vs BSGD per epoch (accuracy, primal, dual, time)",
    ),
    "bench_dcsvm": Benchmark(
        "[--quick] [--rounds 3] [--datasets ijcnn1,a9a]",
        "DC-SVM (exact, 4-level defaults, early level 3) vs scikit-learn SVC on ijcnn1 and a9a: interleaved "
        "rounds, CPU and wall, load per row, medians of per-round ratios, per-stage profile",
    ),
    "bench_jobs": Benchmark("", "DC-SVM and AVSF jobs through HTTP while `/predict` is hammered"),
    "bench_linear": Benchmark("[--quick]", "LIBLINEAR dual CD baseline, AVSF and LIBLINEAR"),
    "bench_linear_large_c": Benchmark(
        "", "a9a at C = 100 / 1000 run to convergence (the configurations `bench_linear` caps)"
    ),
    "bench_defaults": Benchmark(
        "[--sets ...] [--seeds 0]",
        "models with no hyperparameters through HTTP, file order and shuffled, against `SVC()`, Nystroem+SGD "
        "and the majority rate",
    ),
    "bench_online": Benchmark(
        "[--parts multiclass,proba,drift] [--seeds 3]",
        "multi-class models with no settings over HTTP (letter, pendigits, digits), online probabilities vs "
        "`CalibratedClassifierCV`, drift recovery with and without `on_drift`",
    ),
    "bench_drift_t0": Benchmark("", "t0 of the schedule restart after a drift (100 / 1,000 / 10,000)"),
    "bench_dashboard": Benchmark(
        "",
        "the dashboard's `/events` feed: event build time with 1 to 1,000 models, server CPU with 0 / 1 / 10 "
        "subscribers",
    ),
    "bench_linear_online": Benchmark(
        "",
        "online linear models on reuters and sector: accuracy against `LinearSVC()`, examples per CPU second, "
        "λ and scaling choices, the shuffle buffer",
    ),
    "bench_sparse_svs": Benchmark(
        "",
        "dense vs sparse support vectors (speed, memory, snapshot size, the auto rule on a density grid)",
    ),
    "bench_metrics": Benchmark(
        "", "`GET /metrics` with 1,000 models over HTTP; prometheus-client's renderer against ours"
    ),
    "bench_dask": Benchmark(
        "[--skin]",
        "DC-SVM on a dask `LocalCluster` against the local pool (ijcnn1, skin_nonskin), a search job on the "
        "cluster against plain `GridSearchCV`",
    ),
    "bench_sparse": Benchmark(
        "[--sets reuters,sector] [--parts ABCD]",
        "wide sparse data through Redis into the service: RBF B = 500 and linear models with no settings "
        "(RSS growth, publish time, snapshot size vs SV nonzeros, accuracy), next to `LinearSVC()` and `SVC()`; "
        "linear solver-only throughput",
    ),
    "bench_learners": Benchmark(
        "[--models 1000] [--entries 300] [--rounds 3]",
        "several learner processes (docs/cluster.md): 1,000 models fed at once, 1 vs 2 vs 3 learners "
        "interleaved, examples per second and per CPU second, models per member, share moved from 2 to 3, "
        "SIGKILL of a learner to its models learning again",
    ),
    "bench_learn_route": Benchmark(
        "[--models 8] [--batches 1000] [--rows 100] [--rounds 3] [--clients 4] [--probes 50]",
        "several learners (docs/cluster.md): `/learn` sent to the learner that does not own the model, appended "
        "to its stream vs forwarded to its owner, interleaved: latency p50/p99 at the client, time until the "
        "owner has learned it, examples per second and per CPU second of both learners, what each answer says",
    ),
    "bench_replicas": Benchmark(
        "",
        "a learner and two prediction replicas on Redis: delay from each snapshot to the replicas serving it, "
        "exact decisions, SIGKILL of one replica under load",
    ),
    "bench_predict_wrk": Benchmark(
        "[--rounds 3] [--seconds 10]",
        "single-row `/predict` latency with `wrk` (8 connections), alone and while another client learns "
        "batches of 1,000; server CPU per request (event loop thread, process) and the loop's run-queue wait "
        "from `/proc`",
    ),
    "bench_regression": Benchmark(
        "[--sets diabetes,friedman1,boston,diamonds] [--rounds 3]",
        "budgeted kernel regression, one pass (B = 500, file order and shuffled; no settings and the papers' BSGD) "
        "vs batch `SVR` on standardised X and y and River's linear regression and Hoeffding tree: RMSE, 90 % "
        "interval coverage, CPU per example vs a classifier",
    ),
    "bench_novelty": Benchmark(
        "[--sets letter,pendigits] [--classes 3]",
        "budgeted one-class SVM, one pass over one class of letter / pendigits vs batch `OneClassSVM` and River's "
        "`OneClassSVM` / `HalfSpaceTrees`: ROC AUC, false alarms of the 5 % threshold, CPU per example",
    ),
    "bench_rehearsal": Benchmark(
        "[--part grid\\|accept] [--seeds 3] [--rounds 3]",
        "one pass with rehearsal 0–8 (BSGD, BSCA; no settings and the papers' C, γ) on ijcnn1, a9a, phishing; "
        "the chosen default interleaved with SVC and Nystroem+SGD",
    ),
    "bench_many_models": Benchmark(
        "[--models 10000]",
        "N models with no settings, one batch each: service RSS, threads, `/metrics` time, SIGTERM, restart to "
        "`/health` (lazy restore), first `/predict` after it, SIGTERM of the restarted service",
    ),
    "bench_model_memory": Benchmark(
        "[--models 500]",
        "what one idle model costs, in one process: RSS per model, tracemalloc by allocating line, array bytes "
        "by component, restore time per model",
    ),
    "bench_predict": Benchmark(
        "[--part batch\\|http\\|all]",
        "batch decision values (ijcnn1.t, letter, reuters): per-row vs blocked BLAS path, CPU and wall, "
        "interleaved; single-row `/predict` p50/p99 from 8 connections alone and while a client learns "
        "batches of 1,000",
    ),
    "bench_precision": Benchmark(
        "[--rounds 4] [--parts CAB]",
        "one precision contract: ijcnn1 through HTTP JSON, Redis `xd` and `xb` and the estimator (max "
        "\\|Δ decision\\|, accuracy); consume-only `xd` vs `xb` interleaved (wall, service CPU, redis CPU); "
        "`parse_stream_entries` µs per entry, `xd` vs `xb`",
    ),
    "bench_preprocessing": Benchmark(
        "[--rounds 5]",
        "what the default preprocessing costs on ijcnn1 (B = 500, lookup-WD, CPU seconds, interleaved): "
        "`fit` with and without scaling, `partial_fit` with the raw step against the default stages",
    ),
    "bench_settings": Benchmark(
        "[--seeds 0 1 2]",
        'a user\'s settings through the service: phishing `PUT {"budget": 500, "gamma": 8, "C": 8}` via '
        "HTTP against the plain estimator's fit (and with `n_samples`); the README's explicit ijcnn1 replay "
        "against no settings",
    ),
    "bench_abuse": Benchmark(
        "",
        "the abuse probes: 65 MB bodies without a token, idle and half-header sockets, warm-up/model-count "
        "bounds, names, job bounds, disclosure, client disconnects (RSS, fds, `/health` latency, status codes)",
    ),
    "abuse_bodies": Benchmark(
        "[--mb 58] [--rounds 3]",
        "four 58 MB bodies at once, with the token, on `PUT /models`, `/promote`, `/rollback` and `/feedback`: "
        "statuses (413 by each route's own limit), RSS growth, `/health` latency",
    ),
    "bench_http_ab": Benchmark(
        "--before DIR [--before-python PY] [--rounds 3]",
        "HTTP `/learn` and `/predict` throughput of two trees, each with its own Python, interleaved "
        "(examples and requests per server CPU second, wall, p50)",
    ),
    "bench_feedback": Benchmark(
        "[--rounds 3] [--seconds 5] [--batches 20]",
        "`POST /feedback` throughput against `/learn` of the same rows; the cost of `remember` on "
        "single-row `/predict`",
    ),
    "bench_feedback_memory": Benchmark(
        "[--rows 1000000] [--bound-mib 64]",
        "RSS of the in-process feedback store against its bound",
    ),
    "bench_challengers": Benchmark(
        "[--seeds 3] [--parts flip,stationary,falsealarm]",
        'drift without loss: `on_drift="challenger"` against `"reset_schedule"` and `"none"` '
        "(label-flip recovery, stationary streams, false alarms)",
    ),
    "bench_selection": Benchmark(
        "[--explore] [--resume]",
        "online model selection with no settings (successive halving over gamma candidates), file order "
        "and shuffled, against `SVC()` and the best single candidate; CPU per example, interleaved",
    ),
    "bench_versions": Benchmark(
        "[--parts AB]",
        "versions: ijcnn1 through a Redis stream, 5,000 flipped labels, rollback to the clean version "
        "(decisions, the replica's delay, learning on, undo); history on disk over 1,000 snapshots",
    ),
    "bench_fields": Benchmark(
        "[--quick]",
        "named-field JSON through `/learn` (no settings; HouseVotes84, Soybean, credit_data, mlc_churn) against "
        "the same model on a DictVectorizer encoding and `SVC()` on it; decode CPU against positional rows; "
        "a field of 10^6 distinct values (vocabulary, RSS, restart and pinned decisions)",
    ),
}


def resolve(name: str) -> str:
    """The registered module name of ``name`` (``skeleton`` or ``bench_skeleton``).

    Raises ``SystemExit`` naming the registered benchmarks when there is none.
    """
    for candidate in (name, f"bench_{name}"):
        if candidate in BENCHMARKS:
            return candidate
    sys.exit(f"unknown benchmark {name!r}; `python -m benchmarks list` lists them")


def markdown_table() -> str:
    """The README's table of benchmarks: command and what it measures, one row per benchmark."""
    lines = ["| command | what |", "|---|---|"]
    for name, bench in BENCHMARKS.items():
        command = f"python -m benchmarks.{name}" + (f" {bench.options}" if bench.options else "")
        lines.append(f"| `{command}` | {bench.what} |")
    return "\n".join(lines)


def list_benchmarks(markdown: bool = False) -> str:
    """One line per benchmark (``NAME  options — what``), or the README table with ``markdown``."""
    if markdown:
        return markdown_table()
    width = max(map(len, BENCHMARKS))
    return "\n".join(
        f"{name:<{width}}  {bench.options + ' — ' if bench.options else ''}{bench.what}".replace("\\|", "|")
        for name, bench in BENCHMARKS.items()
    )


def run(name: str, args: list[str]) -> None:
    """Run benchmark ``name`` with ``args`` exactly as ``python -m benchmarks.<name> args`` would."""
    module = f"benchmarks.{resolve(name)}"
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
