"""The regression race through the real service (issue 38: "a model created with no settings ...
regression races its candidates"): ``{"task": "regression"}`` on raw, unscaled rows races γ,
serves what the in-process :class:`SelectionRegressor` of the same configuration serves, says so
in ``kind`` and ``statistics.selection``, keeps its race through a restart, takes a challenger
(scored with paired absolute errors, promoted by hand, then a rollback to the race), and answers
OIP v2 ``/infer`` with the serving candidate's values."""

from __future__ import annotations

import numpy as np

from svmstream.app.models.factory import make_estimator
from svmstream.app.models.registry import Registry
from svmstream.app.settings import Settings
from svmstream.solvers.online.selection import SelectionRegressor
from tests.conftest import assert_examples_account
from tests.test_task_challengers import infer
from tests.test_task_service import friedman, post_rows, refused

NEVER = "100000"


def _values(c, name, X):
    r = c.post("/predict", json={"model": name, "X": X.tolist(), "interval": 0.9})
    assert r.status_code == 200, r.text
    return np.asarray(r.json()["values"]), np.asarray(r.json()["lower"]), r.json()["model_version"]


def test_the_no_settings_regressor_races_gamma_through_the_service(start_server, tmp_path):
    X, y = friedman(3000)
    probe = friedman(200, seed=5)[0]
    snap = tmp_path / "snap"
    server = start_server(snap, args=("--snapshot-interval", NEVER))
    with server.client() as c:
        # the race varies gamma: a gamma given with selection is refused, naming selection
        refused(c.put("/models/r", json={"task": "regression", "selection": True, "gamma": 0.3}), "selection")
        r = c.put("/models/r", json={"task": "regression"})
        assert r.status_code == 201, r.text
        body = {"task": "regression", "selection": True, "challengers": [{"gamma": 0.02}]}
        assert c.put("/models/c", json=body).status_code == 201  # a race champion with a challenger
        post_rows(c, "r", X[:1500], y[:1500])
        racing = c.get("/models/r").json()
        race = racing["statistics"]["selection"]
        assert [cand["racing"] for cand in race["candidates"]] == [True, True] and race["rungs"] == []
        assert racing["kind"].startswith("ε-SVR regression: selection of 2 candidates, 2 racing, leader ")
        post_rows(c, "r", X[1500:], y[1500:])
        post_rows(c, "c", X, y)
        info = c.get("/models/r").json()
        race = info["statistics"]["selection"]
        (rung,) = race["rungs"]
        assert set(rung["mse"]) == {"0", "1"} and len(rung["kept"]) == 1
        assert race["leader"] == rung["kept"][0] == min((v, int(k)) for k, v in rung["mse"].items())[1]
        assert_examples_account(c, "r", sent=3000)
        values, lower, version = _values(c, "r", probe)

        # the service's model is the in-process selector of the same configuration, exactly
        registry = Registry(Settings(snapshot_dir=tmp_path / "local", warm_up=False), None)
        local = make_estimator(registry.resolve_config({"task": "regression"}))
        assert type(local) is SelectionRegressor
        for lo in range(0, 3000, 250):
            local.partial_fit(X[lo : lo + 250], y[lo : lo + 250])
        np.testing.assert_array_equal(values, local.predict(probe))
        np.testing.assert_array_equal(lower, local.predict_interval(probe, 0.9)[0])

        # OIP v2: the serving candidate's values
        outputs = infer(c, "r", probe[:20])
        np.testing.assert_array_equal(np.asarray(outputs["value"]["data"]), values[:20])

        # the challenger of a race champion: paired absolute errors, never promoted on its own
        # (γ = 0.02, five times wider than "scale" on these 10 standardised features), promoted by
        # hand, rolled back to the race
        info = c.get("/models/c").json()
        (challenger,) = info["challengers"]
        assert challenger["paired_examples"] > 1000 and info["promotion"]["promotions"] == 0
        assert challenger["window_loss"] > challenger["champion_window_loss"]  # mean absolute errors
        before = c.post("/models/c/snapshot").json()["version"]
        race_values, _, _ = _values(c, "c", probe)
        r = c.post("/models/c/promote", json={"challenger": 0})
        assert r.status_code == 200, r.text
        promoted = c.get("/models/c").json()
        assert promoted["config"]["selection"] is False and promoted["config"]["gamma"] == 0.02
        assert promoted["kind"].startswith("ε-SVR regression: BSCA pipeline")
        r = c.post("/models/c/rollback", json={"version": before})
        assert r.status_code == 200, r.text
        back = c.get("/models/c").json()
        assert back["config"]["selection"] is True and "selection" in back["statistics"]
        np.testing.assert_array_equal(_values(c, "c", probe)[0], race_values)
        assert c.post("/models/r/snapshot").status_code == 200
    server.terminate()

    server = start_server(snap, args=("--snapshot-interval", NEVER))
    with server.client() as c:  # restored: the same race, the same answers, learning on exactly
        again, _, _ = _values(c, "r", probe)
        np.testing.assert_array_equal(again, values)
        assert c.get("/models/r").json()["statistics"]["selection"]["rungs"] == [rung]
        post_rows(c, "r", X[:500], y[:500])
        for lo in range(0, 500, 250):
            local.partial_fit(X[lo : lo + 250], y[lo : lo + 250])
        np.testing.assert_array_equal(_values(c, "r", probe)[0], local.predict(probe))
        assert_examples_account(c, "r", sent=3500)
