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
    """Only classes given: selection on, four candidates (γ ¼, 1, 4 × "scale", and 4 × with C = 0.1); a race small
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
        assert len(race["candidates"]) == 5 and len(race["rungs"]) == 2, race
        window = race["candidates"].pop()  # the window candidate: never started on a long stream
        assert window["settings"]["window"] and window["settings"]["solver"] == "bsca", window
        assert not window["racing"] and window["learned"] == 0, window
        assert sum(cand["racing"] for cand in race["candidates"]) == 1, race
        assert race["leader"] == next(i for i, cand in enumerate(race["candidates"]) if cand["racing"])
        factors = sorted(cand["settings"]["gamma_factor"] for cand in race["candidates"])
        assert factors == [0.25, 1.0, 4.0, 4.0]
        assert [cand["settings"]["C"] for cand in race["candidates"]] == [1.0, 1.0, 1.0, 0.1]
        plain = _race(c, "plain")
        assert plain["leader"] is not None and all(cand["racing"] for cand in plain["candidates"][:4]), plain
        assert not plain["candidates"][4]["racing"], plain  # the window candidate: a long stream
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
        ({"selection": True, "C": 1.0}, "give C or selection, not both"),
        ({"selection": True, "lambda": 1e-4}, "give lambda or selection, not both"),
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


def test_the_race_fits_max_model_bytes(start_server, tmp_path):
    """A no-settings model races as many candidates as fit ``selection_bytes`` (by default
    ``max_model_bytes`` less room for the labels) at its dimension, at least one: 6 features
    race all four; 2,000 sparse features (sparse support vectors, estimated by their 2,048-nonzero
    bound) race one under the default 256 MiB ``max_model_bytes``, the default candidate, and every
    example is still counted; the server's size estimate counts the candidates that race."""
    X, y = two_moons_like(1600, d=6, seed=5)
    server = start_server(tmp_path / "snap")
    with server.client() as c:
        for name in ("narrow", "wide"):
            r = c.put(f"/models/{name}", json={})
            assert r.status_code == 201, r.text
            bound = r.json()["config"]["selection_bytes"]
            assert 0 < bound < 256 * 2**20, r.json()["config"]
        _learn(c, "narrow", X, y)
        rng = np.random.default_rng(0)
        for lo in range(0, 1600, 400):
            rows = [
                {str(int(j)): float(v) for j, v in zip(rng.choice(2000, 5, replace=False), X[i, :5])}
                for i in range(lo, lo + 400)
            ]
            r = c.post("/learn", json={"model": "wide", "X": rows, "y": y[lo : lo + 400].tolist()})
            assert r.status_code == 200, r.text
        narrow, wide = _race(c, "narrow"), _race(c, "wide")
        assert narrow["race_size"] == 4 and sum(x["racing"] for x in narrow["candidates"]) == 4, narrow
        assert wide["race_size"] == 1 and [x["racing"] for x in wide["candidates"]] == [
            True,
            False,
            False,
            False,
            False,  # the window candidate: a flush inside the window starts it
        ]
        assert wide["leader"] == 0 and wide["candidates"][0]["settings"]["gamma_factor"] == 1.0
        for name in ("narrow", "wide"):
            assert_examples_account(c, name, sent=1600)


def test_a_flip_after_the_race_starts_a_warm_challenger_from_the_survivor(start_server, tmp_path):
    """The service's default ``on_drift="challenger"`` with a selection champion: a detection
    while candidates race starts nothing (the race is the alternative); after the race a label
    flip starts a drift challenger copied from the sole survivor, a plain pipeline with the
    survivor's numeric γ and rehearsal; nothing is lost."""
    X, y = two_moons_like(12_000, d=6, seed=7)
    y = y.copy()
    y[6000:] = -y[6000:]
    server = start_server(tmp_path / "snap")
    with server.client() as c:
        r = c.put("/models/m", json={"selection": True, "warmup": 200, "shuffle_buffer": 200})
        assert r.status_code == 201 and r.json()["config"]["on_drift"] == "challenger", r.text
        _learn(c, "m", X[:6000], y[:6000])
        race = _race(c, "m")
        assert len(race["rungs"]) == 2, race
        survivor = race["candidates"][race["leader"]]["settings"]
        _learn(c, "m", X[6000:], y[6000:])
        info = c.get("/models/m").json()
        history = info["promotion"]["history"]
        started = [e for e in history if e["event"] == "drift challenger started"]
        assert started and started[0]["start"] == "warm" and started[0]["at"] > 6000, history
        promoted = [e for e in history if e["event"] == "promoted"]
        settings = promoted[0]["settings"] if promoted else info["challengers"][0]["settings"]
        assert settings["selection"] is False and settings["gamma"] == survivor["gamma"], settings
        # settings list what differs from the champion's configuration (rehearsal 1 there)
        assert settings.get("rehearsal", 1) == survivor["rehearsal"], settings
        assert_examples_account(c, "m", sent=12_000)
        assert info["n_discarded"] == 0
