"""``svmstream search``: grid search over one of our estimators (``GridSearchCV``).

Locally (default) the search runs in this process (``--dask ADDRESS``: on that dask
cluster through joblib's dask backend) and prints the table of scores; ``--save`` writes the
best model (refitted on all rows, pickle-free).  With ``--server URL`` it submits a search
job (``POST /jobs`` with ``"algorithm": "search"``), uploads the file unless
``--server-path``, follows the job and prints its table; the server then serves the best
model (online estimators keep learning through ``/learn``).  Ctrl-C cancels the job.

Grid: ``--grid C=0.5,8,32 --grid gamma=0.01,0.1`` (values parsed as JSON numbers when they
are).  See ``docs/jobs.md``.

Only argparse and the standard library are imported at module level: ``svmstream`` builds
every sub-command's parser, and ``svmstream healthcheck`` must start fast.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

POLL_S = 0.5
"""Seconds between two polls of the job (``--server``)."""


class SearchError(Exception):
    """A refused request, a failed job or a bad option (printed, exit status 1)."""


def _grid_item(text: str) -> tuple[str, list[Any]]:
    name, sep, values = text.partition("=")
    if not sep or not name.strip() or not values.strip():
        raise argparse.ArgumentTypeError(f"--grid wants NAME=V1,V2,..., got {text!r}")
    out: list[Any] = []
    for v in values.split(","):
        v = v.strip()
        try:
            out.append(json.loads(v))
        except ValueError:
            out.append(v)
    return name.strip(), out


def _param(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--param wants KEY=VALUE, got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value


def add_search_parser(sub) -> argparse.ArgumentParser:
    """Register the ``search`` sub-command on the ``svmstream`` sub-parsers."""
    p = sub.add_parser(
        "search",
        help="grid search (GridSearchCV, stratified folds) over bsgd/bsca/dcsvm/avsf/liblinear-cd; "
        "locally, on a dask cluster (--dask) or as a job of a server (--server)",
    )
    p.add_argument("train", metavar="TRAIN", help="training data: LIBSVM or CSV (label first), .bz2/.gz ok")
    p.add_argument("--estimator", required=True, choices=("bsgd", "bsca", "dcsvm", "avsf", "liblinear-cd"))
    p.add_argument(
        "--grid",
        dest="grid",
        type=_grid_item,
        action="append",
        required=True,
        metavar="NAME=V1,V2,...",
        help="values of one parameter (repeat per parameter; at most 256 combinations)",
    )
    p.add_argument("--cv", type=int, default=3, help="stratified folds, 2..10 (default 3)")
    p.add_argument("--random-state", dest="random_state", type=int, default=0, help="seed of the folds")
    p.add_argument(
        "--param",
        dest="params",
        type=_param,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a fixed parameter of every candidate (bsgd/bsca: model fields such as budget)",
    )
    p.add_argument("--dask", metavar="ADDRESS", help="local run: fit the candidates on this dask scheduler")
    p.add_argument("--save", help="local run: save the best model to this file (.svmstate)")
    p.add_argument("--top", type=int, default=10, help="rows of the score table printed (default 10)")
    p.add_argument("--json", dest="json_out", action="store_true", help="print the result as one JSON line")
    s = p.add_argument_group("submitting to a server")
    s.add_argument("--server", metavar="URL", help="submit a search job to this service instead")
    s.add_argument(
        "--server-path", action="store_true", help="TRAIN is a path in the server's data directory: no upload"
    )
    s.add_argument("--model", help="name of the served best model (default: <TRAIN stem>-search)")
    s.add_argument("--replace", action="store_true", help="replace an existing model of that name")
    s.add_argument("--token", help="API token (default: env SVMSTREAM_API_TOKEN)")
    s.add_argument("--no-progress", action="store_true", help="no messages while waiting")
    return p


def search_local(args: argparse.Namespace) -> dict[str, Any]:
    """Run the search here (or on ``--dask``); returns the result dict of
    :func:`svmstream.app.jobs.search.run_search` (plus ``saved_to``)."""
    from svmstream.app.jobs.search import prepare_search, run_search
    from svmstream.app.jobs.uploads import JobError
    from svmstream.app.models.config import ModelConfig
    from svmstream.app.settings import Settings

    defaults = Settings().model_defaults()
    try:
        prepared = prepare_search(
            args.estimator,
            dict(args.grid),
            args.cv,
            args.random_state,
            dict(args.params),
            resolve_config=lambda fields: ModelConfig.model_validate({**defaults, **fields}),
        )
    except JobError as exc:
        raise SearchError(str(exc)) from None
    task = {"data": args.train, "data_format": None, **prepared["task"]}
    client = None
    if args.dask:
        from distributed import Client

        client = Client(args.dask, set_as_default=False, timeout="10s")
    try:
        est, result = run_search(task, client=client)
    finally:
        if client is not None:
            client.close()
    if args.save:
        from svmstream.solvers.persistence import save_estimator

        save_estimator(est, args.save)
        result["saved_to"] = args.save
    return result


def search_on_server(args: argparse.Namespace, out=None) -> dict[str, Any]:
    """Submit the search job, wait for it, return the final job record.

    Raises
    ------
    SearchError
        The server refused a request, or the job failed / was cancelled.
    """
    from svmstream.app.cli.client import api_token, check_response, http_client
    from svmstream.app.cli.train import upload_file

    out = out if out is not None else sys.stderr
    with http_client(args.server, api_token(args.token)) as client:
        data = (
            args.train
            if args.server_path
            else check_response_id(upload_file(client, args.train, progress=not args.no_progress, out=out))
        )
        body = {
            "algorithm": "search",
            "estimator": args.estimator,
            "grid": dict(args.grid),
            "cv": args.cv,
            "random_state": args.random_state,
            "params": dict(args.params),
            "data": data,
            "model": args.model or f"{Path(args.train).name.split('.')[0]}-search",
            "replace": bool(args.replace),
        }
        job = check_response(client.post("/jobs", json=body), SearchError)
        if not args.no_progress:
            print(
                f"job {job['id']} submitted to {args.server} (model {body['model']!r})", file=out, flush=True
            )
        try:
            while job["state"] not in ("succeeded", "failed", "cancelled"):
                time.sleep(POLL_S)
                job = check_response(client.get(f"/jobs/{job['id']}"), SearchError)
        except KeyboardInterrupt:
            print(f"\ncancelling job {job['id']} ...", file=out, flush=True)
            check_response(client.delete(f"/jobs/{job['id']}"), SearchError)
            raise
    if job["state"] != "succeeded":
        raise SearchError(f"job {job['id']} {job['state']}: {job.get('error')}")
    return job


def check_response_id(answer: dict[str, Any]) -> str:
    """The ``id`` of an upload's answer."""
    return answer["id"]


def _summary(result: dict[str, Any], args: argparse.Namespace) -> list[str]:
    s = result["search"]
    lines = [
        f"{s['estimator']} on {Path(args.train).name}: {result['n_train']:,} examples x "
        f"{result['n_features']:,} features, {len(result['classes'])} classes; {s['n_candidates']} "
        f"candidates x {s['cv']} folds ({s['backend']}) in {result['train_seconds']:.2f} s",
        f"best: {json.dumps(s['best_params'])}  mean accuracy {100 * s['best_score']:.2f}%",
        "rank  mean%   std%   params",
    ]
    for row in s["table"][: args.top]:
        lines.append(
            f"{row['rank']:>4}  {100 * row['mean_test_score']:6.2f}  {100 * row['std_test_score']:5.2f}  "
            f"{json.dumps(row['params'])}"
        )
    if result.get("saved_to"):
        lines.append(f"best model saved to {result['saved_to']}")
    if result.get("model"):
        lines.append(f"served as model {result['model']!r} by {args.server}")
    return lines


def search(args: argparse.Namespace) -> int:
    """Run ``svmstream search``; returns the exit status (0 ok, 1 error, 2 connection,
    130 interrupted)."""
    import httpx

    try:
        if args.server:
            if args.save or args.dask:
                raise SearchError("--save and --dask are for local runs (the server has its own cluster)")
            job = search_on_server(args)
            output = {"job": job["id"], **(job["result"] or {})}
        else:
            if args.server_path or args.model or args.replace:
                raise SearchError("--server-path, --model and --replace need --server")
            output = search_local(args)
    except SearchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except httpx.HTTPError as exc:
        print(f"error: cannot talk to {args.server}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if args.json_out:
        print(json.dumps(output))
    else:
        print("\n".join(_summary(output, args)))
    return 0
