"""Online model selection through the real service (``docs/selection.md``): a model created with no
learning setting races candidates (``selection``), shows the race in ``GET /models/{name}``, is
snapshotted and restored exactly, and keeps received = learned + pending + refused; a model given
settings is the plain pipeline with exactly those settings."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import assert_examples_account, two_moons_like, wait_for

BATCH = 500


def _learn(client, model, X, y):
    for lo in range(0, X.shape[0], BATCH):
        batch = {"model": model, "X": X[lo : lo + BATCH].tolist(), "y": y[lo : lo + BATCH].tolist()}
        r = client.post("/learn", json=batch)
        assert r.status_code == 200, r.text


def _decisions(client, model, X):
    r = client.post("/predict", json={"model": model, "X": X.tolist()})
    assert r.status_code == 200, r.text
    return np.asarray(r.json()["decision"], dtype=np.float64)


def _race(client, model):
    return client.get(f"/models/{model}").json()["statistics"]["selection"]


def test_no_settings_races_then_restores_identical_decisions(start_server, tmp_path):
    """Only classes given: selection on, three candidates (γ ¼, 1, 4 × "scale"); a race small
    enough to finish (selection given explicitly with a small window, buffer and budget) drops
    candidates at its rungs; after SIGTERM and a restart both models answer identical decisions
    and learn on identically."""
    X, y = two_moons_like(7000, d=6, seed=3)
    Xt = X[6000:]
    server = start_server(tmp_path / "snap")
    with server.client() as c:
        r = c.put("/models/plain", json={"classes": [-1, 1]})
        assert r.status_code == 201, r.text
        assert r.json()["config"]["selection"] is True
        body = {"selection": True, "warmup": 200, "shuffle_buffer": 200, "budget": 50}
        r = c.put("/models/race", json=body)
        assert r.status_code == 201, r.text
        assert r.json()["config"]["selection"] is True
        _learn(c, "plain", X[:1500], y[:1500])
        _learn(c, "race", X[:5500], y[:5500])
        race = _race(c, "race")
        assert len(race["candidates"]) == 3 and len(race["rungs"]) == 2, race
        assert sum(cand["racing"] for cand in race["candidates"]) == 1, race
        assert race["leader"] == next(i for i, cand in enumerate(race["candidates"]) if cand["racing"])
        factors = sorted(cand["settings"]["gamma_factor"] for cand in race["candidates"])
        assert factors == [0.25, 1.0, 4.0]
        plain = _race(c, "plain")
        assert plain["leader"] is not None and all(cand["racing"] for cand in plain["candidates"]), plain
        before = {m: _decisions(c, m, Xt) for m in ("plain", "race")}
        infos = {m: c.get(f"/models/{m}").json() for m in ("plain", "race")}
        for m in ("plain", "race"):
            assert_examples_account(c, m, sent=1500 if m == "plain" else 5500)
    server.terminate()
    again = start_server(tmp_path / "snap")
    with again.client() as c:
        for m in ("plain", "race"):
            after = _decisions(c, m, Xt)
            assert np.max(np.abs(after - before[m])) == 0.0, m
            info = c.get(f"/models/{m}").json()
            assert info["statistics"]["selection"] == infos[m]["statistics"]["selection"], m
            assert info["examples"] == infos[m]["examples"], m
        _learn(c, "race", X[5500:6000], y[5500:6000])
        continued = _decisions(c, "race", Xt)
        assert_examples_account(c, "race", sent=6000)
    again.terminate()
    # the uninterrupted run: a fresh server learns the same 6,000 rows in the same batches
    fresh = start_server(tmp_path / "snap2")
    with fresh.client() as c:
        assert c.put("/models/race", json=body).status_code == 201
        _learn(c, "race", X[:6000], y[:6000])
        assert np.max(np.abs(_decisions(c, "race", Xt) - continued)) == 0.0
        accuracy = np.mean(np.sign(continued) == y[6000:])
        assert accuracy > 0.85, accuracy
    fresh.terminate()


@pytest.mark.parametrize(
    "body, selection",
    [
        ({"classes": [0, 1]}, True),
        ({"classes": [0, 1], "max_classes": 5, "remember": True}, True),
        ({"gamma": 0.5}, False),
        ({"C": 10.0}, False),
        ({"budget": 200}, False),
        ({"algorithm": "bsca"}, False),
        ({"rehearsal": 0}, False),
        ({"selection": False}, False),
        ({"selection": True, "budget": 200}, True),
    ],
)
def test_selection_follows_the_settings_given(start_server, tmp_path, body, selection):
    """Any learning setting makes the plain pipeline with exactly those settings; only the model's
    own fields (classes, max_classes, n_features, remember) leave selection on."""
    server = start_server(tmp_path / "snap")
    with server.client() as c:
        r = c.put("/models/m", json=body)
        assert r.status_code == 201, r.text
        assert r.json()["config"]["selection"] is selection
        for key, value in body.items():
            if key != "classes":
                assert r.json()["config"][key] == value, key
        X, y = two_moons_like(1200, d=4, seed=1)
        _learn(c, "m", X, np.where(y > 0, 1, 0))
        c.post("/models/m/flush")
        stats = c.get("/models/m").json()["statistics"]
        assert ("selection" in stats) is selection, stats
        assert_examples_account(c, "m", sent=1200)


@pytest.mark.parametrize(
    "body, words",
    [
        ({"selection": True, "gamma": 0.5}, "give gamma or selection, not both"),
        ({"selection": True, "algorithm": "bsca"}, 'algorithm "bsgd" and kernel "rbf" only'),
        ({"selection": True, "kernel": "linear"}, 'algorithm "bsgd" and kernel "rbf" only'),
        ({"selection": "yes"}, "selection"),
    ],
)
def test_contradictory_selection_is_422_naming_the_field(start_server, tmp_path, body, words):
    server = start_server(tmp_path / "snap")
    with server.client() as c:
        r = c.put("/models/m", json=body)
        assert r.status_code == 422, r.text
        assert r.json()["field"] == "selection" and words in r.json()["detail"], r.text
        assert c.get("/models/m").status_code == 404
        wait_for(lambda: c.get("/health").status_code == 200, what="health")
