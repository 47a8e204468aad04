"""``svmstream train``: train DC-SVM / AVSF / LIBLINEAR dual CD on a data file.

Locally (default) the solver runs in this process with a progress display per DC-SVM level
or linear-CD problem (tqdm), then prints the training seconds and the test accuracy, and
optionally saves the model (``--save``, :func:`svmstream.solvers.persistence.save_estimator`,
pickle-free; load it with :func:`svmstream.solvers.persistence.load_estimator`).

With ``--server URL`` it submits a job to a running service instead: the files are
uploaded (``POST /uploads``) unless ``--server-path`` says that TRAIN/TEST are paths in the
server's data directory; it then polls ``GET /jobs/{id}`` and shows the same progress
display, and prints the result.  Ctrl-C cancels the job (``DELETE /jobs/{id}``).

The options are parsed by :func:`svmstream.app.cli.main.add_train_parser`.  See ``docs/jobs.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from svmstream.app.cli.client import api_token, check_response, http_client
from svmstream.app.jobs.worker import run_training
from svmstream.app.models.config import BATCH_ALGORITHMS
from svmstream.app.models.factory import make_job_estimator
from svmstream.solvers.persistence import save_estimator

PHASES = ("starting", "loading", "training", "testing", "saving")
"""Job phases (``progress.phase``); the other timeline stages are the solver's."""

# option dest -> (estimator parameter, algorithms it applies to)
_DC = ("dcsvm",)
_ALL = BATCH_ALGORITHMS
PARAM_OPTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "C": ("C", _ALL),
    "tol": ("tol", _ALL),
    "max_iter": ("max_iter", _ALL),
    "random_state": ("random_state", _ALL),
    "gamma": ("gamma", _DC),
    "kernel": ("kernel", _DC),
    "degree": ("degree", _DC),
    "coef0": ("coef0", _DC),
    "bias": ("bias", _DC),
    "k": ("k", _DC),
    "n_levels": ("n_levels", _DC),
    "n_sample": ("n_sample", _DC),
    "level_tol": ("level_tol", _DC),
    "cache_size": ("cache_size", _DC),
    "n_jobs": ("n_jobs", _DC),
    "refine": ("refine", _DC),
    "shrinking": ("shrinking", _DC),
}


class TrainError(RuntimeError):
    """A refused request or a failed job; the message is for the user."""


def collect_params(args: argparse.Namespace) -> dict[str, Any]:
    """The estimator parameters given on the command line.

    Raises
    ------
    TrainError
        An option that does not apply to ``--algorithm`` (e.g. ``--gamma`` for avsf).
    """
    params: dict[str, Any] = {}
    for dest, (name, algorithms) in PARAM_OPTIONS.items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        if args.algorithm not in algorithms:
            raise TrainError(f"--{dest.replace('_', '-')} does not apply to {args.algorithm}")
        params[name] = value
    for key, value in args.extra_params:
        params[key] = value
    return params


def default_model_name(train: str, algorithm: str) -> str:
    """``<file stem>-<algorithm>`` cleaned to the model-name alphabet (``ijcnn1-dcsvm``)."""
    stem = Path(train).name
    for suffix in (".bz2", ".gz", ".csv", ".libsvm", ".svm", ".txt"):
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-._") or "model"
    return f"{stem}-{algorithm}"[:64]


# =============================================================================== progress


class StepLine:
    """What :class:`ProgressDisplay` shows of one step off a terminal: the part of tqdm's
    interface it uses, and one line when the step ends (``[  12.3 s] level 2 (16 clusters):
    16/16 sub obj=...``) instead of a bar redrawn with carriage returns into a log."""

    def __init__(self, desc: str, total: int | None, unit: str, out, t0: float):
        self.desc, self.total, self.unit, self.out, self.t0 = desc, total, unit, out, t0
        self.n = 0
        self.postfix = ""

    def update(self, n: int) -> None:
        self.n += n

    def set_description_str(self, desc: str, refresh: bool = True) -> None:
        self.desc = desc

    def set_postfix_str(self, postfix: str, refresh: bool = True) -> None:
        self.postfix = postfix

    def refresh(self) -> None:
        """Nothing: the line is written once, at :meth:`close`."""

    def close(self) -> None:
        count = f"{self.n:,}/{self.total:,}" if self.total else f"{self.n:,}"
        tail = f" {self.postfix}" if self.postfix else ""
        line = f"[{time.perf_counter() - self.t0:7.1f} s] {self.desc}: {count} {self.unit}{tail}"
        print(line, file=self.out, flush=True)


class ProgressDisplay:
    """Progress bars per DC-SVM level / stage and per linear-CD problem (tqdm).

    Feed it solver progress dicts (:func:`svmstream.app.jobs.worker.normalise_progress` shape) with
    :meth:`update` and job phases (loading, training, testing, ...) with :meth:`stage`;
    a new bar starts whenever the problem, stage or level changes, the previous one is
    left on screen as a log of that step.  Off a terminal (``out`` is no TTY: a log file, a
    pipe) each step is one line written when it ends (:class:`StepLine`), not a bar.
    """

    def __init__(self, enabled: bool = True, out=None):
        self.enabled = enabled
        self.out = out if out is not None else sys.stderr
        #: bars only on a terminal; elsewhere (a log, a pipe) one line per finished step
        self.tty = bool(getattr(self.out, "isatty", lambda: False)())
        self.bar = None
        self.key: tuple | None = None
        self._stage: str | None = None
        self.t0 = time.perf_counter()

    def _close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        self.key = None

    def stage(self, name: str) -> None:
        if name == self._stage:
            return
        self._stage = name
        self._close()
        if self.enabled and name not in ("training", "done"):
            print(f"[{time.perf_counter() - self.t0:7.1f} s] {name}", file=self.out, flush=True)

    def update(self, p: dict[str, Any]) -> None:
        if not self.enabled:
            return
        stage = p.get("stage")
        key = (p.get("problem"), stage, p.get("level"))
        prefix = ""
        if (p.get("n_problems") or 1) > 1:
            prefix = f"problem {int(p.get('problem', 0)) + 1}/{p['n_problems']} "
        if stage == "done":
            self._close()
            return
        if key != self.key:
            self._close()
            self.key = key
            if stage == "level":
                desc, total, unit = (
                    f"{prefix}level {p.get('level')} ({p.get('n_clusters')} clusters)",
                    p.get("subproblems"),
                    "sub",
                )
            elif stage == "kmeans":
                desc, total, unit = (
                    f"{prefix}level {p.get('level')} kernel k-means ({p.get('n_clusters')})",
                    p.get("rows"),  # rows assigned to their nearest centre, once the sample is clustered
                    "rows",
                )
            elif stage in ("refine", "global"):
                desc, total, unit = f"{prefix}{stage} solve", None, "upd"
            else:
                desc, total, unit = f"{prefix}{p.get('selection', 'solve')}", None, "it"
            # no rate in the format: with --server the counts come in jumps between polls
            fmt = (
                "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"
                if total or stage == "kmeans"  # k-means learns its total (rows) from its first report
                else "{desc}: {n_fmt} " + unit + " [{elapsed}{postfix}]"
            )
            self.bar = (
                tqdm(
                    total=total,
                    desc=desc,
                    unit=unit,
                    file=self.out,
                    leave=True,
                    mininterval=0.25,
                    dynamic_ncols=True,
                    bar_format=fmt,
                )
                if self.tty
                else StepLine(desc, total, unit, self.out, self.t0)
            )
        if stage == "kmeans":
            n = p.get("rows_done") if p.get("step") == "assign" else None
            if self.bar is not None and p.get("rows") and self.bar.total != p["rows"]:
                self.bar.total = p["rows"]
            if self.bar is not None and p.get("step"):
                self.bar.set_description_str(
                    f"{prefix}level {p.get('level')} kernel k-means ({p.get('n_clusters')}): {p['step']}",
                    refresh=False,
                )
        else:
            n = p.get("subproblems_done") if stage == "level" else p.get("iterations", p.get("iteration"))
        if n is not None and self.bar is not None and int(n) > self.bar.n:
            self.bar.update(int(n) - self.bar.n)  # (update, not assignment: keeps tqdm's rate right)
        post = []
        if p.get("objective") is not None:
            post.append(f"obj={p['objective']:.6g}")
        if p.get("max_violation") is not None:
            post.append(f"viol={p['max_violation']:.3g}")
        if p.get("active") is not None:
            post.append(f"active={p['active']}")
        if p.get("n_steps") is not None:
            post.append(f"steps={p['n_steps']:,}")
        if self.bar is not None:
            self.bar.set_postfix_str(" ".join(post), refresh=False)
            self.bar.refresh()

    def close(self) -> None:
        self._close()


# =============================================================================== local


def train_local(args: argparse.Namespace, params: dict[str, Any]) -> dict[str, Any]:
    """Train in this process; returns the result dict of :func:`svmstream.app.jobs.worker.run_training`
    (plus ``saved_to``)."""
    display = ProgressDisplay(enabled=not args.no_progress)
    task = {
        "algorithm": args.algorithm,
        "data": args.train,
        "test": args.test,
        "params": params,
        "early_level": args.early_level,
        "default_n_jobs": None,
    }
    try:
        est, result = run_training(task, display.update, None, display.stage, label_indices=False)
    finally:
        display.close()
    if args.save:
        save_estimator(est, args.save)
        result["saved_to"] = args.save
    return result


# =============================================================================== server


def _check(response) -> Any:
    return check_response(response, TrainError)


def upload_file(client, path: str, progress: bool = True, out=None) -> dict[str, Any]:
    """Stream a local file into ``POST /uploads``; returns the server's answer (``id`` ...)."""
    out = out if out is not None else sys.stderr

    size = os.path.getsize(path)
    bar = tqdm(
        total=size,
        unit="B",
        unit_scale=True,
        desc=f"upload {Path(path).name}",
        file=out,
        disable=None if progress else True,  # None: a bar only on a terminal
        leave=False,
    )

    def chunks():
        with open(path, "rb") as fh:
            while True:
                block = fh.read(1024 * 1024)
                if not block:
                    return
                bar.update(len(block))
                yield block

    try:
        return _check(
            client.post(
                "/uploads",
                params={"filename": Path(path).name},
                content=chunks(),
                headers={"content-type": "application/octet-stream"},
            )
        )
    finally:
        bar.close()


def train_on_server(args: argparse.Namespace, params: dict[str, Any], out=None) -> dict[str, Any]:
    """Submit the job to ``args.server``, follow its progress, return the final job record.

    Raises
    ------
    TrainError
        The server refused a request, or the job failed / was cancelled.
    """
    out = out if out is not None else sys.stderr
    display = ProgressDisplay(enabled=not args.no_progress, out=out)
    with http_client(args.server, api_token(args.token)) as client:
        if args.server_path:
            data, test = args.train, args.test
        else:
            data = upload_file(client, args.train, progress=not args.no_progress, out=out)["id"]
            test = (
                upload_file(client, args.test, progress=not args.no_progress, out=out)["id"]
                if args.test
                else None
            )
        body = {
            "algorithm": args.algorithm,
            "data": data,
            "test": test,
            "params": params,
            "model": args.model or default_model_name(args.train, args.algorithm),
            "early_level": args.early_level,
            "replace": bool(args.replace),
        }
        job = _check(client.post("/jobs", json=body))
        if not args.no_progress:
            print(
                f"job {job['id']} submitted to {args.server} (model {body['model']!r})", file=out, flush=True
            )
        shown = 0
        try:
            while True:
                # replay the job's timeline (one entry per phase / solver stage and level, the
                # last one still moving), so that stages finished between two polls show too
                timeline = job.get("timeline") or []
                for entry in timeline[shown:]:
                    if entry.get("stage") in PHASES:
                        display.stage(entry["stage"])
                    else:
                        display.update(entry)
                shown = max(shown, len(timeline) - 1)
                if job["state"] in ("succeeded", "failed", "cancelled"):
                    break
                time.sleep(args.poll)
                job = _check(client.get(f"/jobs/{job['id']}"))
        except KeyboardInterrupt:
            display.close()
            print(f"\ncancelling job {job['id']} ...", file=out, flush=True)
            job = _check(client.delete(f"/jobs/{job['id']}"))
            raise
        finally:
            display.close()
    if job["state"] == "failed":
        raise TrainError(f"job {job['id']} failed: {job.get('error')}")
    if job["state"] == "cancelled":
        raise TrainError(f"job {job['id']} was cancelled")
    return job


# =============================================================================== entry point


def _summary(result: dict[str, Any], args: argparse.Namespace) -> list[str]:
    lines = [
        f"{args.algorithm} on {Path(args.train).name}: {result['n_train']:,} examples x "
        f"{result['n_features']:,} features, {len(result['classes'])} classes"
        + (f"; model {result['mode']}" if result.get("mode") else "")
    ]
    lines.append(
        f"train seconds: {result['train_seconds']:.2f} (loading {result.get('load_seconds', 0):.2f} s)"
    )
    if result.get("n_sv") is not None:
        lines.append(f"support vectors: {result['n_sv']:,}")
    if result.get("dual_objective"):
        lines.append("dual objective: " + ", ".join(f"{v:.6g}" for v in result["dual_objective"][:10]))
    if result.get("test_accuracy") is not None:
        lines.append(
            f"test accuracy on {Path(args.test).name}: {100 * result['test_accuracy']:.2f}% "
            f"({result['test_correct']:,}/{result['n_test']:,})"
        )
    if result.get("saved_to"):
        lines.append(f"saved to {result['saved_to']}")
    if result.get("model") and args.server:
        lines.append(f"served as model {result['model']!r} by {args.server}")
    return lines


def train(args: argparse.Namespace) -> int:
    """Run ``svmstream train``; returns the exit status (0 ok, 1 error, 2 usage/connection,
    130 interrupted)."""
    try:
        params = collect_params(args)
        if args.server:
            if args.save:
                raise TrainError(
                    "--save is for local runs; with --server the model is served (and snapshotted) "
                    "by the server"
                )
            job = train_on_server(args, params)
            result = job["result"] or {}
            output: dict[str, Any] = {"job": job["id"], **result}
        else:
            if args.server_path or args.model or args.replace:
                raise TrainError("--server-path, --model and --replace need --server")
            try:
                make_job_estimator(args.algorithm, params, args.early_level)
            except ValueError as exc:
                raise TrainError(str(exc)) from None
            result = train_local(args, params)
            output = result
    except TrainError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1 if not str(exc).startswith("--") else 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (OSError, ValueError) as exc:  # unreadable / unparsable file
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        if isinstance(exc, httpx.HTTPError):
            print(f"error: cannot talk to {args.server}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        raise
    if args.json_out:
        print(json.dumps(output))
    else:
        print("\n".join(_summary(output, args)))
    return 0
