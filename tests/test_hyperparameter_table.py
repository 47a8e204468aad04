"""Every exposure of an online model's hyperparameters agrees with the one table,
``svmstream.solvers._hyperparameters``: ``ModelConfig``, the ``PUT /models`` schema of the served
``/openapi.json``, the ``SVMSTREAM_DEFAULT_*`` settings, the flags of ``serve`` and ``replay``, the
estimator factory, the estimators' ``__init__`` defaults and ``docs/hyperparameters.md``.

Each check takes the rows to compare with and returns the disagreements it finds, so that the
same checks run against deliberately altered copies of the table must find something.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

import svmstream.solvers as solvers
from svmstream.app.cli import main as cli
from svmstream.app.main import create_app
from svmstream.app.models.config import ModelConfig
from svmstream.app.models.factory import ONLINE_ESTIMATORS, make_estimator, routed_params
from svmstream.app.settings import Settings
from svmstream.solvers import _hyperparameters as table
from svmstream.solvers._hyperparameters import HYPERPARAMETERS, STAGES, Hyperparameter, stage_params

DOCS = Path(__file__).resolve().parents[1] / "docs" / "hyperparameters.md"

#: The class whose ``__init__`` holds each stage's defaults.  Today one estimator class per algorithm
#: owns every stage; with the streaming pipeline the stages other than ``estimator`` move to it.
#: who takes each stage's rows: the plain estimator its own, the streaming pipeline the others
STAGE_OWNERS = {
    stage: ONLINE_ESTIMATORS
    if stage == "estimator"
    else dict.fromkeys(ONLINE_ESTIMATORS, solvers.StreamingClassifier)
    for stage in STAGES
    if stage != "service"
}


# ---------------------------------------------------------------------------- helpers
def _facts(prop: dict[str, Any]) -> dict[str, Any]:
    """What a JSON-schema property says: value kinds, enum values, bounds, nullability."""
    branches = prop.get("anyOf", [prop])
    facts: dict[str, Any] = {"types": set(), "enum": set(), "bounds": {}, "null": False}
    for branch in branches:
        if branch.get("type") == "null":
            facts["null"] = True
            continue
        facts["types"].add(branch.get("type"))
        facts["enum"].update(branch.get("enum", []))
        if "const" in branch:
            facts["enum"].add(branch["const"])
        for key, name in (("minimum", "ge"), ("exclusiveMinimum", "gt"), ("maximum", "le")):
            if key in branch:
                facts["bounds"][name] = branch[key]
    return facts


_JSON_TYPES = {
    int: {"integer"},
    float: {"number"},
    bool: {"boolean"},
    str: {"string"},
    list: {"array"},
    dict: {"object"},
}


def _schema_problems(
    where: str, row: Hyperparameter, prop: dict[str, Any] | None, *, stored: bool
) -> list[str]:
    if prop is None:
        return [f"{where}: no property {row.json_name!r}"]
    facts, problems = _facts(prop), []
    if facts["bounds"] != row.bounds:
        problems.append(f"{where}.{row.json_name}: bounds {facts['bounds']} != table {row.bounds}")
    choices = set(row.choices or ()) | set(row.stored if stored else ()) | set(row.words)
    if facts["enum"] != choices:
        problems.append(f"{where}.{row.json_name}: enum {sorted(facts['enum'])} != table {sorted(choices)}")
    expected_types = _JSON_TYPES[row.type] | ({"string"} if row.words else set())
    if facts["types"] != expected_types:
        problems.append(f"{where}.{row.json_name}: types {facts['types']} != table {expected_types}")
    if prop.get("description") != row.help:
        problems.append(f"{where}.{row.json_name}: description {prop.get('description')!r} != table help")
    return problems


def _other_value(row: Hyperparameter) -> Any:
    """A valid value of ``row`` that is neither its default nor the server's."""
    taken = {repr(row.default), repr(row.server_default)}
    if row.choices:
        return next(c for c in row.choices if repr(c) not in taken)
    if row.type is bool:
        return not row.default
    if row.type is list:
        return ["a", "b"]
    if row.type is dict:
        return row.words[0]  # "balanced" (a mapping is a JSON object: no env string of its own)
    low = row.ge if row.ge is not None else (row.gt if row.gt is not None else 0)
    for candidate in (low + 1, low + 2, low + 3):
        candidate = row.type(candidate)
        if repr(candidate) not in taken and (row.le is None or candidate <= row.le):
            return candidate
    raise AssertionError(row)  # pragma: no cover


# ---------------------------------------------------------------------------- the checks
def model_config_problems(rows: tuple[Hyperparameter, ...]) -> list[str]:
    fields = ModelConfig.model_fields
    problems = []
    if list(fields) != [row.name for row in rows]:
        problems.append(f"ModelConfig fields {list(fields)} != table {[row.name for row in rows]}")
    schema = ModelConfig.model_json_schema(by_alias=True)["properties"]
    for row in rows:
        field = fields.get(row.name)
        if field is None:
            continue
        if field.default != row.default or field.alias != row.alias:
            problems.append(f"ModelConfig.{row.name}: default/alias {field.default!r}/{field.alias!r}")
        prop = schema.get(row.json_name)
        problems += _schema_problems("ModelConfig", row, prop, stored=True)
        if prop is not None and _facts(prop)["null"] != row.nullable:
            problems.append(f"ModelConfig.{row.name}: null accepted != table nullable={row.nullable}")
    return problems


#: Body fields whose served schema states a server setting as its maximum.
SERVER_MAXIMA = {"budget": "max_budget", "n_features": "max_features"}


def put_schema_problems(rows: tuple[Hyperparameter, ...], openapi: dict[str, Any]) -> list[str]:
    body = openapi["paths"]["/models/{name}"]["put"]["requestBody"]["content"]["application/json"]["schema"]
    # "challengers" and "fields" are the body fields that are no hyperparameters: each challenger is
    # a set of them, "fields" a declared schema of named fields (docs/fields.md)
    props = {k: v for k, v in body["properties"].items() if k not in ("challengers", "fields")}
    problems = []
    if set(props) != {row.json_name for row in rows}:
        problems.append(f"PUT /models properties {sorted(props)} != table")
    settings = Settings()
    for row in rows:
        prop = props.get(row.json_name)
        served = row  # the served document also states the server's own maxima (app/api/openapi.py)
        if row.json_name in SERVER_MAXIMA:
            served = dataclasses.replace(row, le=getattr(settings, SERVER_MAXIMA[row.json_name]))
        problems += _schema_problems("PUT /models", served, prop, stored=False)
        if prop is None:
            continue
        if not _facts(prop)["null"] or row.json_name in body.get("required", ()):
            problems.append(f"PUT /models.{row.json_name}: not optional (null accepted, not required)")
        for key, value in row.schema:
            if prop.get(key) != value:
                problems.append(f"PUT /models.{row.json_name}: {key} {prop.get(key)!r} != table {value!r}")
    return problems


def settings_problems(rows: tuple[Hyperparameter, ...]) -> list[str]:
    problems = []
    fields = Settings.model_fields
    schema = Settings.model_json_schema()["properties"]
    ours = {name for name in fields if name.startswith("default_")} - {"default_model"}
    if ours != {row.setting for row in rows}:
        problems.append(f"Settings default_* {sorted(ours)} != table {sorted(row.setting for row in rows)}")
    defaults = Settings().model_defaults()
    for row in rows:
        if row.setting not in fields:
            continue
        if (
            fields[row.setting].default != row.server_default
            or defaults.get(row.json_name) != row.server_default
        ):
            problems.append(f"Settings.{row.setting}: default {fields[row.setting].default!r}")
        problems += _schema_problems("Settings", row, schema.get(row.setting), stored=False)
        value = _other_value(row)
        os.environ[row.env] = json.dumps(value) if row.type in (bool, list) else str(value)
        try:
            if getattr(Settings(), row.setting) != value:
                problems.append(f"{row.env}={os.environ[row.env]} does not set Settings.{row.setting}")
        finally:
            del os.environ[row.env]
    if list(defaults) != [row.json_name for row in rows]:
        problems.append(f"model_defaults() keys {list(defaults)} != table")
    return problems


def _options(command: str) -> dict[str, argparse.Action]:
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {opt: action for action in sub.choices[command]._actions for opt in action.option_strings}


def _flag_problems(command: str, row: Hyperparameter, action: argparse.Action | None) -> list[str]:
    where = f"svmstream {command} {row.flag}"
    if action is None:
        return [f"{where}: no such flag"]
    problems = [] if action.dest == row.name else [f"{where}: dest {action.dest!r}"]
    if not (action.help or "").replace("%%", "%").startswith(row.help):
        problems.append(f"{where}: help {action.help!r} does not start with the table's")
    if row.type is bool:
        if not isinstance(action, argparse.BooleanOptionalAction):
            problems.append(f"{where}: not a --x/--no-x flag")
    elif row.choices is not None:
        if tuple(action.choices or ()) != row.choices:
            problems.append(f"{where}: choices {action.choices} != table {row.choices}")
    else:
        value = _other_value(row)
        accepted = {str(value): value, **{w: w for w in row.words}}
        refused = [w for w in ("auto", "x") if w not in row.words]
        refused += [str(row.ge - 1)] if row.ge is not None else []
        refused += [str(row.gt)] if row.gt is not None else []
        refused += [str(row.le * 2)] if row.le is not None else []
        for text in [*accepted, *refused]:
            try:
                got = action.type(text)
            except argparse.ArgumentTypeError:
                got = "refused"
            if got != accepted.get(text, "refused"):
                problems.append(f"{where}: {text!r} gives {got!r}")
    return problems


def cli_problems(rows: tuple[Hyperparameter, ...]) -> list[str]:
    problems = []
    for command in ("serve", "replay"):
        options = _options(command)
        exposed = [row for row in rows if command in row.cli]
        if command == "serve":
            exposed = [row for row in exposed if row.name not in cli.SERVE_PENDING]
        for row in exposed:
            problems += _flag_problems(command, row, options.get(row.flag))
        for row in rows:
            if row not in exposed and row.flag in options and row.name != "classes":
                problems.append(f"svmstream {command} {row.flag}: a flag the table does not give it")
    if tuple(row.name for row in rows if "replay" in row.cli) != cli.HYPER_ARGS:
        problems.append(f"HYPER_ARGS {cli.HYPER_ARGS} != the table's replay rows")
    serve_rows = {
        row.name: row.setting for row in rows if "serve" in row.cli and row.name not in cli.SERVE_PENDING
    }
    if serve_rows != cli.SERVE_HYPER_SETTINGS:
        problems.append(f"SERVE_HYPER_SETTINGS {cli.SERVE_HYPER_SETTINGS} != table {serve_rows}")
    return problems


def factory_problems(rows: tuple[Hyperparameter, ...]) -> list[str]:
    problems = []
    for algorithm in table.ONLINE_ALGORITHMS:
        values = {
            row.name: _other_value(row) for row in rows if row.stage != "service" and row.type is not list
        }
        # kernel chooses the plain estimator (rbf: the budgeted one; linear: Pegasos, checked
        # below); the other rows are checked on the kernel model
        values["kernel"] = "rbf"
        est = make_estimator(ModelConfig(algorithm=algorithm, **values))
        params = est.get_params(deep=True)
        if algorithm == "bsgd":
            linear = make_estimator(ModelConfig(algorithm=algorithm, kernel="linear")).estimator
            if type(linear).__name__ != "PegasosClassifier":
                problems.append(
                    f"bsgd: kernel='linear' builds {type(linear).__name__}, not PegasosClassifier"
                )
        for row in rows:
            if row.stage == "service" or row.name == "kernel":
                continue
            got = params.get(row.name, params.get(f"estimator__{row.name}", "absent"))
            if algorithm in row.algorithms and row.name in values and got != values[row.name]:
                problems.append(
                    f"{algorithm}: {row.name}={values[row.name]!r} reaches the estimator as {got!r}"
                )
            if algorithm not in row.algorithms and got != "absent":
                problems.append(
                    f"{algorithm}: {row.name} reaches the estimator, the table says it does not take it"
                )
    return problems


def estimator_default_problems(rows: tuple[Hyperparameter, ...]) -> list[str]:
    problems = []
    for row in rows:
        if row.stage == "service" or not row.same_in_estimator or row.name == "kernel":
            continue  # kernel chooses the plain estimator's class (factory_problems checks it)
        for algorithm in row.algorithms:
            owner = STAGE_OWNERS[row.stage][algorithm]
            parameter = inspect.signature(owner).parameters.get(row.name)
            if parameter is None or parameter.default != row.default:
                got = None if parameter is None else parameter.default
                problems.append(f"{owner.__name__}({row.name}={got!r}) != table default {row.default!r}")
    return problems


def docs_problems(rows: tuple[Hyperparameter, ...]) -> list[str]:
    if DOCS.read_text() != table.markdown(rows):
        return ["docs/hyperparameters.md differs from `markdown() of the table module`"]
    return []


# ---------------------------------------------------------------------------- the tests
@pytest.fixture(scope="module")
def openapi(tmp_path_factory):
    settings = Settings(
        snapshot_dir=tmp_path_factory.mktemp("snap"), warm_up=False, create_default_model=False
    )
    with TestClient(create_app(settings)) as client:
        return client.get("/openapi.json").json()


def all_problems(rows: tuple[Hyperparameter, ...], openapi: dict[str, Any]) -> list[str]:
    return [
        *model_config_problems(rows),
        *put_schema_problems(rows, openapi),
        *settings_problems(rows),
        *cli_problems(rows),
        *factory_problems(rows),
        *estimator_default_problems(rows),
        *docs_problems(rows),
    ]


def test_every_exposure_agrees_with_the_table(openapi):
    assert all_problems(HYPERPARAMETERS, openapi) == []


def _altered(name: str, **changes: Any) -> tuple[Hyperparameter, ...]:
    return tuple(dataclasses.replace(row, **changes) if row.name == name else row for row in HYPERPARAMETERS)


@pytest.mark.parametrize(
    "altered",
    [
        _altered("rehearsal", le=32),
        _altered("budget", default=400),
        _altered("gamma", words=("scale", "auto")),
        _altered("maintenance", choices=("merge", "remove")),
        _altered("warmup", help="another help text"),
        _altered("random_state", setting_default=None),
        _altered("schedule", algorithms=table.ONLINE_ALGORITHMS),
        _altered("rehearsal_memory", cli=("serve",)),
        _altered("lambda_", alias=None),
        _altered("eta", type=int),
        HYPERPARAMETERS[:-1],
    ],
    ids=[
        "bound",
        "default",
        "words",
        "choices",
        "help",
        "setting",
        "algorithms",
        "cli",
        "alias",
        "type",
        "row",
    ],
)
def test_an_altered_table_is_detected(altered, openapi):
    assert all_problems(altered, openapi)


def test_stage_params_routes_each_value_to_its_stage():
    values = ModelConfig().model_dump()
    routed = stage_params(values, "bsgd")
    assert list(routed) == list(STAGES)
    assert routed["scaler"] == {"scaling": "auto", "warmup": table.DEFAULT_WARMUP}
    assert routed["order"] == {"shuffle_buffer": table.DEFAULT_SHUFFLE_BUFFER, "run_guard": True}
    assert routed["rehearsal"] == {"rehearsal": 1, "rehearsal_memory": table.DEFAULT_REHEARSAL_MEMORY}
    assert routed["drift"] == {"on_drift": "reset_schedule"}
    assert set(routed["service"]) == {
        "task",
        "epsilon",
        "nu",
        "algorithm",
        "n_features",
        "max_classes",
        "classes",
        "remember",
        "selection",
        "selection_bytes",
    }
    assert {"schedule", "kernel", "eta"} <= set(routed["estimator"])
    bsca = stage_params(values, "bsca")["estimator"]
    assert not {"schedule", "eta", "radius", "fit_intercept", "kernel"} & set(bsca)
    with pytest.raises(ValueError, match="unknown hyperparameter"):
        stage_params({"budgett": 3}, "bsgd")
    with pytest.raises(ValueError, match="algorithm"):
        stage_params({}, "dcsvm")
    assert routed_params(ModelConfig(C=None, lambda_=1e-3))["estimator"]["C"] == 1.0


def test_gamma_auto_is_refused_where_the_online_model_refuses_it():
    parser = cli.build_parser()
    for command in (["serve"], ["replay", "file"]):
        with pytest.raises(SystemExit):
            parser.parse_args([*command, "--gamma", "auto"])
        assert parser.parse_args([*command, "--gamma", "scale"]).gamma == "scale"
    train = parser.parse_args(["train", "file", "--algorithm", "dcsvm", "--gamma", "auto"])
    assert train.gamma == "auto"  # DC-SVM takes scikit-learn's "auto"
    assert parser.parse_args(["replay", "file", "--rehearsal", "3"]).rehearsal == 3


def test_serve_maps_its_flags_to_the_settings_of_the_table():
    from svmstream.app.cli.serve import _HYPER_SETTINGS, settings_from_args

    assert dict(_HYPER_SETTINGS) == cli.SERVE_HYPER_SETTINGS
    args = cli.build_parser().parse_args(["serve", "--budget", "77", "--no-run-guard", "--lambda", "0.01"])
    settings = settings_from_args(args)
    assert (settings.default_budget, settings.default_run_guard, settings.default_lambda) == (77, False, 0.01)


def test_the_table_imports_nothing_heavy():
    import subprocess

    code = (
        "import sys; import svmstream.solvers._hyperparameters, svmstream.app.models.config; "
        "print(sorted(m for m in ('numba', 'numpy', 'scipy', 'sklearn') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert solvers.C_MAX == table.C_MAX and solvers.MAINTENANCE is table.MAINTENANCE
