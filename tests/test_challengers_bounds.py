"""Challengers count in the model-size bounds (``docs/challengers.md``, "Bounds"), through the real
service: ``max_model_bytes`` holds the champion and its challengers together,
``max_total_model_bytes`` counts them among all models; a ``PUT`` over a bound is a 422 naming
``challengers`` that changes nothing; a drift challenger that would not fit is not started; and a batch that would widen a challenged model past a bound is refused naming
``X[0]`` with the challengers in the message.  The bounds are set from the same estimates the
service uses (:func:`svmstream.app.models.limits.estimate_bytes`), one byte short of the sum."""

from __future__ import annotations

import numpy as np

from svmstream.app.models.config import ModelConfig
from svmstream.app.models.limits import set_bytes
from svmstream.app.settings import Settings
from tests.conftest import assert_examples_account, learn_all

D = 100
CHAMPION = {
    "budget": 200,
    "gamma": 1.0,
    "shuffle_buffer": 0,
    "warmup": 0,
    "classes": [-1, 1],
    "on_drift": "none",
}
BIG = {"budget": 400}  # a challenger that does not fit beside the champion
SMALL = {"budget": 20}  # one that does


def _bytes(*models: dict, d: int = D) -> int:
    """The service's estimate of a champion and challengers of these fields (the server's
    defaults under them)."""
    defaults = Settings(_env_file=None).model_defaults()
    return set_bytes([ModelConfig.model_validate({**defaults, **fields}) for fields in models], d)


def _rows(n: int, d: int, seed: int = 0) -> tuple[list, list]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X.tolist(), np.where(X[:, 0] > 0, 1, -1).tolist()


def test_max_model_bytes_holds_the_champion_with_its_challengers(start_server):
    champion = {**CHAMPION, "n_features": D}
    bound = _bytes(champion, {**champion, **BIG}) - 1
    assert _bytes(champion, {**champion, **SMALL}) <= bound
    server = start_server(env={"SVMSTREAM_MAX_MODEL_BYTES": str(bound)})
    with server.client() as c:
        X, y = _rows(300, D)
        assert c.put("/models/m", json={**CHAMPION, "n_features": D}).status_code == 201
        assert c.post("/learn", json={"model": "m", "X": X, "y": y}).status_code == 200
        before = c.get("/models/m").json()
        # replacing m by a champion with a challenger over the bound: 422, m unchanged
        r = c.put("/models/m", json={**CHAMPION, "n_features": D, "challengers": [SMALL, BIG]})
        assert r.status_code == 422 and r.json()["field"] == "challengers", r.text
        assert "max_model_bytes" in r.json()["detail"] and "2 challengers" in r.json()["detail"], r.text
        after = c.get("/models/m").json()
        assert (after["version"], after["n_seen"], after["config"]) == (
            before["version"], before["n_seen"], before["config"]
        )  # fmt: skip
        assert after["challengers"] == [] and after["promotion"] is None
        # a new model: refused, not created
        r = c.put("/models/n", json={**CHAMPION, "n_features": D, "challengers": [BIG]})
        assert r.status_code == 422 and r.json()["field"] == "challengers", r.text
        assert c.get("/models/n").status_code == 404
        # no slot is reserved for a drift challenger (one starts only if it fits then)
        r = c.put("/models/n", json={**CHAMPION, "n_features": D, "budget": 400, "on_drift": "challenger"})
        assert r.status_code == 201, r.text
        assert c.delete("/models/n").status_code == 200
        # what fits is accepted
        r = c.put("/models/n", json={**CHAMPION, "n_features": D, "challengers": [SMALL]})
        assert r.status_code == 201 and len(r.json()["challengers"]) == 1, r.text
        # no declared dimension: the batch that fixes it past the bound is refused, nothing learned
        assert c.put("/models/w", json={**CHAMPION, "challengers": [BIG]}).status_code == 201
        r = c.post("/learn", json={"model": "w", "X": X, "y": y})
        assert r.status_code in (413, 422) and r.json()["field"] == "X[0]", r.text
        assert "challengers" in r.json()["detail"] and "max_model_bytes" in r.json()["detail"], r.text
        assert c.get("/models/w").json()["n_seen"] == 0
        narrow, labels = _rows(300, 10)
        assert c.post("/learn", json={"model": "w", "X": narrow, "y": labels}).status_code == 200
        for name, sent in (("m", 300), ("w", 300)):
            assert_examples_account(c, name, sent=sent)
    server.terminate()


def test_max_total_model_bytes_counts_the_challengers(start_server):
    champion = {**CHAMPION, "n_features": D}
    bound = _bytes(champion, {**champion, **BIG}) - 1
    assert _bytes(champion) <= bound
    env = {"SVMSTREAM_MAX_TOTAL_MODEL_BYTES": str(bound), "SVMSTREAM_CREATE_DEFAULT_MODEL": "false"}
    server = start_server(env=env)
    with server.client() as c:
        r = c.put("/models/m", json={**CHAMPION, "n_features": D, "challengers": [BIG]})
        assert r.status_code == 422 and r.json()["field"] == "challengers", r.text
        assert "max_total_model_bytes" in r.json()["detail"], r.text
        assert c.get("/models").json()["models"] == []
        assert c.put("/models/m", json={**CHAMPION, "n_features": D}).status_code == 201  # alone it fits
        assert c.delete("/models/m").status_code == 200
        # no declared dimension: the batch that would grow the model and its challenger past the
        # total is refused (413), nothing learned; a narrower one is learned
        assert c.put("/models/w", json={**CHAMPION, "challengers": [BIG]}).status_code == 201
        X, y = _rows(300, D)
        r = c.post("/learn", json={"model": "w", "X": X, "y": y})
        assert r.status_code == 413 and r.json()["field"] == "X[0]", r.text
        assert "max_total_model_bytes" in r.json()["detail"], r.text
        assert c.get("/models/w").json()["n_seen"] == 0
        narrow, labels = _rows(300, 10)
        assert c.post("/learn", json={"model": "w", "X": narrow, "y": labels}).status_code == 200
        assert_examples_account(c, "w", sent=300)
    server.terminate()


def test_a_drift_challenger_that_would_not_fit_is_not_started(start_server):
    """After a promotion of a larger challenger, a drift challenger (the new champion's
    settings) no longer fits ``max_model_bytes``: a detection records "drift
    challenger not started" with the estimate, the champion keeps learning, nothing is lost."""
    from tests.conftest import two_moons_like

    small = {"budget": 10, "gamma": 1000.0, "C": 10.0, "shuffle_buffer": 0, "warmup": 200, "rehearsal": 0,
             "classes": [-1, 1], "n_features": 6, "on_drift": "challenger"}  # fmt: skip
    large = {"budget": 10_000, "gamma": 1.0}
    bound = _bytes(small, {**small, **large}, small, d=6)  # a drift challenger fits before the promotion
    assert _bytes({**small, **large}, {**small, **large}, d=6) > bound  # after the promotion
    X, y = two_moons_like(8000, d=6, seed=31)
    y = y.copy()
    y[3000:] = -y[3000:]
    server = start_server(env={"SVMSTREAM_MAX_MODEL_BYTES": str(bound)})
    with server.client() as c:
        r = c.put("/models/d", json={**small, "challengers": [large]})
        assert r.status_code == 201, r.text
        learn_all(c, "d", X, y, batch=250)
        info = c.get("/models/d").json()
        events = [e["event"] for e in info["promotion"]["history"]]
        assert events[:3] == ["promoted", "drift detected", "drift challenger not started"], events
        (refused,) = [e for e in info["promotion"]["history"] if e["event"] == "drift challenger not started"]
        assert "max_model_bytes" in refused["reason"] and refused["at"] > 3000, refused
        assert info["challengers"] == [] and info["config"]["budget"] == 10_000
        assert info["n_discarded"] == 0
        assert_examples_account(c, "d", sent=8000)
    server.terminate()
