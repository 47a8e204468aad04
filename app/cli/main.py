"""Command line: ``svmstream serve``, ``svmstream replay``, ``svmstream healthcheck`` and
``svmstream train`` -- the parser and the dispatch (the console script's entry point is
:func:`main`).

* ``svmstream serve`` runs the service with uvicorn (one worker: models live in memory),
  :mod:`svmstream.app.cli.serve`.
* ``svmstream replay FILE --url URL`` streams a LIBSVM file (``.bz2``/``.gz`` too) into
  ``POST /learn`` in file order, batch by batch, with a progress bar, then optionally scores
  a test file through ``POST /predict``; ``svmstream replay FILE --redis URL`` produces the
  file into the model's Redis stream instead (pipelined XADD, see ``docs/stream.md``),
  :mod:`svmstream.app.cli.replay`.
* ``svmstream healthcheck`` exits 0 when ``GET /health`` answers 200 (the container health
  check, run every 10 s; it sends ``SVMSTREAM_API_TOKEN`` if set), :func:`healthcheck`.
* ``svmstream train`` trains the batch solvers locally or as a job of a server,
  :mod:`svmstream.app.cli.train` (``docs/jobs.md``).
* ``svmstream search`` runs a grid search locally, on a dask cluster or as a job of a server,
  :mod:`svmstream.app.cli.search` (``docs/jobs.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from svmstream.app.cli.client import DEFAULT_URL, api_token, auth_headers
from svmstream.app.cli.search import add_search_parser
from svmstream.solvers._hyperparameters import BATCH_ALGORITHMS, Hyperparameter, rows

HYPER_ARGS = tuple(row.name for row in rows(cli="replay"))
"""Destinations of the model hyperparameter options of ``replay`` (rows of the hyperparameter
table, :mod:`svmstream.solvers._hyperparameters`, whose ``cli`` names it)."""

SERVE_PENDING: tuple[str, ...] = ()
"""Table rows ``serve`` has no flag for (none: ``svmstream.app.cli.serve`` maps every flag of
the table to its setting)."""

SERVE_HYPER_SETTINGS = {row.name: row.setting for row in rows(cli="serve") if row.name not in SERVE_PENDING}
"""``serve`` option destination -> the setting it overrides (``default_<name>``)."""

POLL_S = 0.5
"""Default seconds between two polls of ``svmstream train --server``."""


def _number(
    name: str, kind: type, words: tuple[str, ...] = (), **bounds: float | None
) -> Callable[[str], Any]:
    """The argparse ``type`` of a numeric option: a ``kind`` within ``bounds`` (``ge``, ``gt``,
    ``le``), or one of ``words`` (``--gamma scale``)."""
    checks = {"ge": (float.__ge__, ">="), "gt": (float.__gt__, ">"), "le": (float.__le__, "<=")}

    def parse(text: str) -> Any:
        if text in words:
            return text
        try:
            value = kind(text)
        except ValueError:
            either = " or ".join([f"an {kind.__name__}" if kind is int else "a number", *map(repr, words)])
            raise argparse.ArgumentTypeError(f"{name} must be {either}, got {text!r}") from None
        for key, bound in bounds.items():
            test, op = checks[key]
            if bound is not None and not test(float(value), float(bound)):
                raise argparse.ArgumentTypeError(f"{name} must be {op} {bound:g}, got {text!r}")
        return value

    return parse


def _hyper_option(row: Hyperparameter) -> dict[str, Any]:
    """The ``add_argument`` keywords of a row's flag: its type or choices, its help (and the
    server's default)."""
    default = row.server_default
    shown = (
        ""
        if default is None
        else f" (server default {str(default).lower() if row.type is bool else default})"
    )
    option: dict[str, Any] = {"dest": row.name, "help": (row.help + shown).replace("%", "%%")}
    if row.type is bool:
        option.update(action=argparse.BooleanOptionalAction, default=None)
    elif row.choices is not None:
        option["choices"] = row.choices
    else:
        option.update(
            type=_number(row.json_name, row.type, row.words, **row.bounds), metavar=row.json_name.upper()
        )
    return option


def _add_hyper(parser: argparse.ArgumentParser, command: str, what: str) -> None:
    """The flags of the hyperparameter table's rows that ``command`` exposes."""
    g = parser.add_argument_group(f"hyperparameters ({what})")
    for row in rows(cli=command):
        if command != "serve" or row.name not in SERVE_PENDING:
            g.add_argument(row.flag, **_hyper_option(row))


def add_serve_parser(sub) -> argparse.ArgumentParser:
    """Register ``serve`` on the ``svmstream`` sub-parsers."""
    serve = sub.add_parser("serve", help="run the HTTP service (one uvicorn worker)")
    serve.add_argument("--host", help="bind address (default 127.0.0.1; env SVMSTREAM_HOST)")
    serve.add_argument("--port", type=int, help="port (default 8000; env SVMSTREAM_PORT)")
    serve.add_argument("--snapshot-dir", help="snapshot directory (default ./snapshots)")
    serve.add_argument(
        "--snapshot-interval",
        dest="snapshot_interval_s",
        type=float,
        help="seconds between snapshots (default 30)",
    )
    serve.add_argument(
        "--keep-versions",
        type=int,
        help="snapshot files (versions) kept per model besides marked ones (default 20)",
    )
    serve.add_argument(
        "--max-history-bytes", type=int, help="disk budget of one model's history (default 1 GiB)"
    )
    serve.add_argument("--max-body-bytes", type=int, help="largest accepted request body (default 64 MiB)")
    serve.add_argument("--default-model", help="name of the model created at start (default 'default')")
    serve.add_argument(
        "--classes",
        help="labels of the default model, comma separated; write --classes=-1,1 (default: learned from the data)",
    )
    serve.add_argument("--log-level", default=None, help="debug, info, warning, ...")
    serve.add_argument(
        "--redis-url", help="consume Redis streams from this URL (env SVMSTREAM_REDIS_URL; default: off)"
    )
    serve.add_argument(
        "--stream-models", help="models that consume their stream: '*' or comma-separated names"
    )
    serve.add_argument(
        "--role",
        choices=("learner", "replica"),
        help="learner (default): learns and publishes snapshots to Redis for replicas; replica: serves "
        "predictions only, following the learner through --redis-url (docs/deployment.md)",
    )
    serve.add_argument(
        "--advertise-url", help="the learner's URL named by replicas (default http://HOST:PORT)"
    )
    _add_hyper(serve, "serve", "of models created without them, e.g. the default model")
    return serve


def _add_feedback_args(replay) -> None:
    """The options of ``replay --feedback`` (:mod:`svmstream.app.cli.replay_feedback`)."""
    replay.add_argument(
        "--feedback",
        action="store_true",
        help="play the file as a delayed-label stream: /predict with remember, then /feedback after a "
        "delay ~ Exponential(--delay-mean) (docs/feedback.md)",
    )
    replay.add_argument(
        "--delay-mean", type=float, default=10.0, help="--feedback: mean label delay, simulated s"
    )
    replay.add_argument("--rate", type=float, default=100.0, help="--feedback: rows per simulated second")
    replay.add_argument("--warm", type=int, default=1000, help="--feedback: rows learned by /learn first")


def _add_named_args(replay) -> None:
    """The file, and the options of a replay of named-field events (:mod:`svmstream.app.cli.replay_named`)."""
    replay.add_argument(
        "file",
        help="LIBSVM/svmlight file, or named-field events: a CSV file with a header or JSON lines "
        "(.csv, .jsonl; .bz2 and .gz are read directly)",
    )
    replay.add_argument(
        "--label", default=None, help="CSV / JSON lines: the label field (default 'label', else 'y')"
    )
    replay.add_argument("--weight", default=None, help="CSV / JSON lines: a field of importance weights (w)")


def add_replay_parser(sub) -> argparse.ArgumentParser:
    """Register ``replay`` on the ``svmstream`` sub-parsers."""
    replay = sub.add_parser("replay", help="stream a LIBSVM file into POST /learn, or into a Redis stream")
    _add_named_args(replay)
    replay.add_argument(
        "--url",
        default=None,
        help=f"service URL (default {DEFAULT_URL}); with --redis only used to create the model and, "
        "with --wait/--test, to follow it",
    )
    replay.add_argument(
        "--redis", dest="redis_url", help="produce into the model's Redis stream at this URL (XADD)"
    )
    replay.add_argument(
        "--stream-key",
        default="svmstream:{model}:examples",
        help="stream key pattern for --redis (default svmstream:{model}:examples)",
    )
    replay.add_argument(
        "--wait",
        action="store_true",
        help="with --redis and --url: wait until the service has applied the whole stream",
    )
    replay.add_argument(
        "--token", default=None, help="API token for the service (default: env SVMSTREAM_API_TOKEN)"
    )
    replay.add_argument("--model", default="default", help="model name (default 'default')")
    replay.add_argument("--batch", type=int, default=1000, help="examples per request (default 1000)")
    replay.add_argument("--passes", type=int, default=1, help="passes over the file (default 1)")
    replay.add_argument("--test", help="LIBSVM test file scored through /predict afterwards")
    replay.add_argument(
        "--shuffle",
        dest="shuffle_seed",
        type=int,
        default=0,
        metavar="SEED",
        help="seed of the random order the rows are sent in (the default order; new permutation per "
        "pass; default 0)",
    )
    replay.add_argument(
        "--file-order",
        dest="file_order",
        action="store_true",
        help="send the rows in the file's order (LIBSVM files are often sorted by label)",
    )
    replay.add_argument(
        "--replace",
        action="store_true",
        help="replace an existing model whose hyperparameters differ from the ones given",
    )
    replay.add_argument(
        "--format",
        choices=("auto", "dense", "sparse", "xd", "xb"),
        default="auto",
        help="rows as dense lists, sparse maps, or (--redis only) float64 bytes 'xd' or float32 bytes "
        "'xb' (values rounded to float32) (auto: sparse below 15%% non-zeros, or below 40%% when "
        "d > 16,384; else dense (HTTP) / xd (Redis); docs/service.md 'Row formats of replay')",
    )
    replay.add_argument(
        "--max-body-bytes",
        dest="max_body_bytes",
        type=int,
        help="largest request body / XADD round trip to send (default: SVMSTREAM_MAX_BODY_BYTES or "
        "64 MiB; a 413 from the service lowers it)",
    )
    _add_feedback_args(replay)
    replay.add_argument("--no-progress", action="store_true", help="no progress bar")
    replay.add_argument(
        "--json", dest="json_out", action="store_true", help="print the result as one JSON line"
    )
    _add_hyper(
        replay,
        "replay",
        "given: create the model with them, or check an existing model has them (--replace: replace it); "
        "none: continue an existing model",
    )
    return replay


def add_healthcheck_parser(sub) -> argparse.ArgumentParser:
    """Register ``healthcheck`` on the ``svmstream`` sub-parsers."""
    health = sub.add_parser("healthcheck", help="exit 0 if GET /health answers 200 (container health check)")
    health.add_argument(
        "--url", default=None, help="service URL (default http://127.0.0.1:$SVMSTREAM_PORT, port 8000)"
    )
    health.add_argument("--timeout", type=float, default=5.0)
    return health


def _param(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--param wants KEY=VALUE, got {text!r}")
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = value
    return key.strip(), parsed


def _add_train_hyper(p: argparse.ArgumentParser) -> None:
    """The estimator parameters of ``train`` (:data:`svmstream.app.cli.train.PARAM_OPTIONS`)."""
    g = p.add_argument_group("hyperparameters (solver defaults when omitted)")
    g.add_argument("--C", dest="C", type=float, help="box constraint C")
    g.add_argument("--tol", type=float, help="stopping tolerance (default 1e-3)")
    g.add_argument(
        "--max-iter",
        dest="max_iter",
        type=int,
        help="linear: outer iterations per problem; dcsvm: coordinate updates per solve",
    )
    g.add_argument("--random-state", dest="random_state", type=int, help="seed")
    g.add_argument(
        "--gamma",
        type=_number("gamma", float, ("scale", "auto")),
        help="dcsvm: kernel width (number, 'scale' or 'auto')",
    )
    g.add_argument("--kernel", choices=("rbf", "poly", "linear"), help="dcsvm kernel (default rbf)")
    g.add_argument("--degree", type=int, help="dcsvm: degree of the polynomial kernel")
    g.add_argument("--coef0", type=float, help="dcsvm: constant of the polynomial kernel")
    g.add_argument(
        "--bias", type=float, help="dcsvm: constant feature (kernel offset bias^2; 0 = no intercept)"
    )
    g.add_argument("--k", type=int, help="dcsvm: cluster growth factor per level (default 4)")
    g.add_argument("--levels", dest="n_levels", type=int, help="dcsvm: number of levels (default 4)")
    g.add_argument("--n-sample", dest="n_sample", type=int, help="dcsvm: points sampled for kernel k-means")
    g.add_argument(
        "--level-tol", dest="level_tol", type=float, help="dcsvm: tolerance of the level sub-problems"
    )
    g.add_argument(
        "--cache-size", dest="cache_size", type=float, help="dcsvm: kernel cache in MB (default 200)"
    )
    g.add_argument("--n-jobs", dest="n_jobs", type=int, help="dcsvm: pool processes (default: all cores)")
    g.add_argument(
        "--no-refine",
        dest="refine",
        action="store_const",
        const=False,
        help="dcsvm: skip the refine step on the level-1 support vectors",
    )
    g.add_argument(
        "--no-shrinking",
        dest="shrinking",
        action="store_const",
        const=False,
        help="dcsvm: no shrinking in the dual CD solver",
    )
    g.add_argument(
        "--param",
        dest="extra_params",
        type=_param,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other estimator parameter (VALUE parsed as JSON when possible); repeatable",
    )


def add_train_parser(sub) -> argparse.ArgumentParser:
    """Register the ``train`` sub-command on the ``svmstream`` sub-parsers."""
    p = sub.add_parser(
        "train",
        help="train DC-SVM / AVSF / LIBLINEAR-CD on a LIBSVM or CSV file (locally, or as a "
        "job of a server with --server)",
    )
    p.add_argument(
        "train", metavar="TRAIN", help="training data: LIBSVM/svmlight or CSV (label first), .bz2/.gz ok"
    )
    p.add_argument(
        "--algorithm",
        required=True,
        choices=BATCH_ALGORITHMS,
        help="dcsvm (kernel SVM, divide and conquer), avsf or liblinear-cd (linear SVM, dual CD)",
    )
    p.add_argument("--test", help="test data: its accuracy is reported")
    p.add_argument(
        "--early-level",
        dest="early_level",
        type=int,
        help="dcsvm: stop after this level and use its early-prediction model",
    )
    _add_train_hyper(p)
    p.add_argument("--save", help="local run: save the fitted model to this file (pickle-free .svmstate)")
    p.add_argument("--no-progress", action="store_true", help="no progress display")
    p.add_argument("--json", dest="json_out", action="store_true", help="print the result as one JSON line")
    s = p.add_argument_group("submitting to a server")
    s.add_argument(
        "--server", metavar="URL", help="submit a job to this svmstream service instead of training here"
    )
    s.add_argument(
        "--server-path",
        action="store_true",
        help="TRAIN/TEST are paths in the server's data directory (SVMSTREAM_DATA_DIR): no upload",
    )
    s.add_argument("--model", help="name of the served model (default: <TRAIN stem>-<algorithm>)")
    s.add_argument("--replace", action="store_true", help="replace an existing model of that name")
    s.add_argument("--token", help="API token (default: env SVMSTREAM_API_TOKEN)")
    s.add_argument(
        "--poll", type=float, default=POLL_S, help=f"seconds between progress polls (default {POLL_S})"
    )
    return p


def add_score_parser(sub) -> argparse.ArgumentParser:
    """Register ``score`` on the ``svmstream`` sub-parsers (``app/cli/score.py`` runs it)."""
    p = sub.add_parser("score", help="score versions of a served model on a labelled LIBSVM file")
    p.add_argument("file", metavar="FILE", help="labelled LIBSVM/svmlight file (.bz2/.gz ok)")
    p.add_argument("--model", required=True, help="the served model")
    p.add_argument(
        "--versions", required=True, help="comma-separated versions (GET /models/{name}/versions), e.g. 12,15"
    )
    p.add_argument("--server", default=DEFAULT_URL, help=f"service URL (default {DEFAULT_URL})")
    p.add_argument("--token", help="API token (default: env SVMSTREAM_API_TOKEN)")
    p.add_argument("--json", dest="json_out", action="store_true", help="print the result as one JSON line")
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="svmstream", description="Streaming budgeted kernel SVM service.")
    sub = parser.add_subparsers(dest="command", required=True)
    add_serve_parser(sub)
    add_replay_parser(sub)
    add_healthcheck_parser(sub)
    add_train_parser(sub)
    add_search_parser(sub)
    add_score_parser(sub)
    return parser


def healthcheck(args: argparse.Namespace) -> int:
    """``GET /health`` with the token from ``SVMSTREAM_API_TOKEN`` (if any); 0 on 200."""
    url = args.url or f"http://127.0.0.1:{os.environ.get('SVMSTREAM_PORT', '8000')}"
    request = urllib.request.Request(url.rstrip("/") + "/health", headers=auth_headers(api_token()))
    try:
        with urllib.request.urlopen(request, timeout=args.timeout) as response:
            ok = response.status == 200
    except Exception as exc:
        print(f"unhealthy: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``svmstream`` console script."""
    args = build_parser().parse_args(argv)
    if args.command == "healthcheck":
        return healthcheck(args)
    # the commands' modules import uvicorn/numpy/httpx/redis/sklearn: only the one run is loaded,
    # so that `svmstream healthcheck` (every 10 s in the container) starts fast
    if args.command == "serve":
        from svmstream.app.cli.serve import serve

        return serve(args)
    if args.command == "train":
        from svmstream.app.cli.train import train

        return train(args)
    if args.command == "search":
        from svmstream.app.cli.search import search

        return search(args)
    if args.command == "score":
        from svmstream.app.cli.score import score

        return score(args)
    from svmstream.app.cli.replay import replay

    return replay(args)


if __name__ == "__main__":
    sys.exit(main())
