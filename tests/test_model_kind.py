"""``GET /models/{name}``'s ``kind`` says what the model is (a race, its leader, or one plain
pipeline), and ``--no-selection`` alone gives one plain model of the defaults (``serve`` and
``replay``)."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from svmstream.app.cli.main import HYPER_ARGS, build_parser
from svmstream.app.cli.serve import settings_from_args
from svmstream.app.main import create_app
from svmstream.app.models.registry import Registry
from svmstream.app.settings import Settings
from tests.conftest import two_moons_like


@pytest.fixture
def client(tmp_path):
    settings = Settings(snapshot_dir=tmp_path / "snap", snapshot_interval_s=3600, warm_up=False)
    with TestClient(create_app(settings)) as c:
        yield c


def _learn(client, name: str, n: int) -> None:
    X, y = two_moons_like(n, d=4, seed=5)
    X = X * np.array([1.0, 300.0, 0.01, 2.0])  # raw, unscaled
    labels = np.where(y > 0, "yes", "no").tolist()
    for lo in range(0, n, 500):
        r = client.post(
            "/learn", json={"model": name, "x": X[lo : lo + 500].tolist(), "y": labels[lo : lo + 500]}
        )
        assert r.status_code == 200, r.text
    assert client.post(f"/models/{name}/flush").status_code == 200


def test_a_no_settings_model_says_it_races_and_which_candidate_leads(client):
    assert client.put("/models/race", json={}).status_code == 201
    info = client.get("/models/race").json()
    assert info["config"]["selection"] is True
    assert info["kind"] == "selection of 4 candidates (warm-up window open: 1,000 examples)", info["kind"]
    _learn(client, "race", 3000)
    info = client.get("/models/race").json()
    race = info["statistics"]["selection"]
    leader = race["leader"]
    settings = race["candidates"][leader]["settings"]
    racing = sum(c["racing"] for c in race["candidates"])
    shown = f"{settings['gamma_factor']:g} × scale (C = {settings['C']:g})"
    # the window candidate never started on a 3,000-example stream: not counted
    assert race["candidates"][-1]["settings"]["window"] and not race["candidates"][-1]["racing"]
    n = len(race["candidates"]) - 1
    if racing > 1:
        assert info["kind"] == f"selection of {n} candidates, {racing} racing, leader {shown}", info["kind"]
    else:
        assert info["kind"] == f"selection won by {shown} over {n} candidates", info["kind"]


def test_a_stream_that_ends_in_the_window_names_the_window_candidate(client):
    assert client.put("/models/short", json={}).status_code == 201
    _learn(client, "short", 300)
    assert client.post("/models/short/flush").status_code == 200
    info = client.get("/models/short").json()
    race = info["statistics"]["selection"]
    assert race["leader"] == 4 and race["candidates"][4]["settings"]["window"], race
    assert info["kind"] == "selection of 5 candidates, 5 racing, leader 1 × scale (C = 1, BSCA)", info["kind"]


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        ({"selection": False}, "BSGD pipeline, gss merging, budget 500"),
        (
            {"C": 32, "budget": 200, "merge_solver": "lookup-wd"},
            "BSCA pipeline, lookup-wd merging, budget 200",
        ),
        ({"kernel": "linear"}, "linear BSGD pipeline (weight vector, no budget)"),
        ({"maintenance": "remove", "budget": 50}, "BSGD pipeline, remove maintenance, budget 50"),
    ],
)
def test_a_plain_model_says_which_pipeline_it_is(client, body, kind):
    r = client.put("/models/plain", json=body)
    assert r.status_code == 201, r.text
    assert r.json()["kind"] == kind
    assert client.get("/models/plain").json()["kind"] == kind


def test_no_selection_alone_is_one_plain_model_of_the_defaults(client, tmp_path):
    """``replay --no-selection`` sends ``{"selection": false}``: the defaults, without the race;
    ``serve --no-selection`` makes the default model so."""
    args = build_parser().parse_args(["replay", "f.libsvm", "--no-selection"])
    hyper = {k: v for k in HYPER_ARGS if (v := getattr(args, k)) is not None}
    assert hyper == {"selection": False}
    assert client.put("/models/one", json=hyper).status_code == 201
    assert client.put("/models/race", json={}).status_code == 201
    one, race = (client.get(f"/models/{m}").json()["config"] for m in ("one", "race"))
    assert one["selection"] is False and one["selection_bytes"] is None
    assert {k: v for k, v in one.items() if not k.startswith("selection")} == {
        k: v for k, v in race.items() if not k.startswith("selection")
    }
    serve = build_parser().parse_args(["serve", "--no-selection", "--snapshot-dir", str(tmp_path)])
    registry = Registry(settings_from_args(serve))
    config = registry.resolve_config({})
    assert config.selection is False and config.budget == 500 and config.gamma == "scale"
    selected = build_parser().parse_args(
        ["serve", "--selection", "--budget", "300", "--snapshot-dir", str(tmp_path)]
    )
    config = Registry(settings_from_args(selected)).resolve_config({})
    assert config.selection is True and config.budget == 300  # a setting given, the race asked for
