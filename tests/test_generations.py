"""A model's identity is its generation (made at ``PUT``), never its path: after ``PUT``
replacing a model, or ``DELETE`` then ``PUT``, the old model's history is not listed, pinning
answers the new model's versions only, a rollback to a version the new model never had is a 404,
``history.json`` holds the new model's marks; the old model's feedback ids answer ``expired``
id by id (never a 422 for the whole body, never learned).  A rollback forgets the feedback ids
the model no longer holds (``docs/feedback.md``).  All through the real service."""

from __future__ import annotations

import json

import numpy as np

from tests.conftest import two_moons_like

NEVER = "100000"  # snapshots only when the test asks
CONFIG = {"budget": 40, "gamma": 1.0, "C": 10, "shuffle_buffer": 0, "warmup": 0}


def _learn(c, model, X, y, batch=200):
    for i in range(0, len(X), batch):
        r = c.post(
            "/learn", json={"model": model, "x": X[i : i + batch].tolist(), "y": y[i : i + batch].tolist()}
        )
        assert r.status_code == 200, r.text


def _versions(c, model) -> list[int]:
    r = c.get(f"/models/{model}/versions")
    assert r.status_code == 200, r.text
    return [v["version"] for v in r.json()["versions"]]


def _snap(c, model) -> int:
    r = c.post(f"/models/{model}/snapshot")
    assert r.status_code == 200, r.text
    return r.json()["version"]


def _history(c, model, count, X, y, per=1):
    """``count`` snapshotted versions of ``model`` (``per`` batches each); their numbers."""
    out = []
    for k in range(count):
        rows = slice(200 * per * k, 200 * per * (k + 1))
        _learn(c, model, X[rows], y[rows])
        out.append(_snap(c, model))
    return out


def _replace(c, model, how, config):
    if how == "delete":
        assert c.delete(f"/models/{model}").status_code in (200, 204)
        assert c.put(f"/models/{model}", json=config).status_code == 201
    else:
        r = c.put(f"/models/{model}", json=config)
        assert r.status_code in (200, 201), r.text


def test_a_replaced_model_answers_from_its_own_history_only(start_server, tmp_path):
    server = start_server(args=("--snapshot-interval", NEVER))
    X, y = two_moons_like(3200, d=4, seed=1)
    probe = X[:50]
    with server.client() as c:
        for how in ("put", "delete"):
            model = f"m-{how}"
            assert c.put(f"/models/{model}", json=CONFIG).status_code == 201
            old = _history(c, model, 4, X, y)  # versions 1..4 of the first model
            assert set(old) <= set(_versions(c, model))
            r = c.post("/predict", json={"model": model, "x": probe.tolist(), "version": old[1]})
            assert r.status_code == 200 and r.json()["model_version"] == old[1]  # pinned once: cached

            _replace(c, model, how, {**CONFIG, "gamma": 0.5})
            assert _versions(c, model) == [0]  # the new model: its creation only
            new = _history(c, model, 2, X[1000:], y[1000:], per=5)  # versions 5 and 10: not 1..4
            assert not set(new) & set(old)
            listed = _versions(c, model)
            assert sorted(set(listed)) == sorted({0, *new}), listed
            for gone in sorted(set(old) - set(listed)):
                r = c.post("/predict", json={"model": model, "x": probe.tolist(), "version": gone})
                assert r.status_code == 404 and r.json()["field"] == "version", r.text
                r = c.post(f"/models/{model}/rollback", json={"version": gone})
                assert r.status_code == 404, r.text
            # pinning a version both models had answers the new model's
            r = c.post("/predict", json={"model": model, "x": probe.tolist(), "version": new[0]})
            assert r.status_code == 200 and r.json()["model_version"] == new[0]
            live_then = np.asarray(r.json()["decision"])
            r = c.post(f"/models/{model}/rollback", json={"version": new[0]})
            assert r.status_code == 200, r.text
            r = c.post("/predict", json={"model": model, "x": probe.tolist()})
            np.testing.assert_array_equal(np.asarray(r.json()["decision"]), live_then)
            marks = json.loads((server.snapshot_dir / model / "history.json").read_text())
            assert marks["generation"] is not None and len(marks["marks"]) == 2, marks
            kept = {
                v["version"]: v["kept_because"] for v in c.get(f"/models/{model}/versions").json()["versions"]
            }
            assert "rolled back to" in kept[new[0]], kept


def test_feedback_ids_of_a_replaced_model_answer_expired_each(start_server, tmp_path):
    server = start_server(args=("--snapshot-interval", NEVER))
    X, y = two_moons_like(1200, d=6, seed=2)
    with server.client() as c:
        assert c.put("/models/fb", json=CONFIG).status_code == 201
        _learn(c, "fb", X[:400], y[:400])
        old_ids = c.post("/predict", json={"model": "fb", "x": X[400:410].tolist(), "remember": True}).json()[
            "ids"
        ]

        # same width: the old ids are not the new model's (today: learned)
        assert c.put("/models/fb", json=CONFIG).status_code in (200, 201)
        _learn(c, "fb", X[:400], y[:400])
        new_ids = c.post("/predict", json={"model": "fb", "x": X[410:415].tolist(), "remember": True}).json()[
            "ids"
        ]
        r = c.post(
            "/feedback",
            json={
                "model": "fb",
                "ids": [*old_ids[:3], *new_ids],
                "y": y[[400, 401, 402, *range(410, 415)]].tolist(),
            },
        )
        assert r.status_code == 200, r.text
        assert (r.json()["expired_indices"], r.json()["learned"]) == ([0, 1, 2], 5), r.text

        # another width: one stale id never makes the whole body a 422 (today: X[499])
        assert c.put("/models/fb", json={**CONFIG, "n_features": 3}).status_code in (200, 201)
        _learn(c, "fb", X[:400, :3], y[:400])
        fresh = c.post(
            "/predict", json={"model": "fb", "x": X[420:422, :3].tolist(), "remember": True}
        ).json()["ids"]
        r = c.post(
            "/feedback", json={"model": "fb", "ids": [old_ids[5], *fresh], "y": y[[405, 420, 421]].tolist()}
        )
        assert r.status_code == 200, r.text
        assert (r.json()["expired_indices"], r.json()["learned"]) == ([0], 2), r.text


def test_a_rollback_forgets_the_feedback_ids_the_model_no_longer_holds(start_server, tmp_path):
    server = start_server(args=("--snapshot-interval", NEVER))
    X, y = two_moons_like(1200, d=4, seed=3)
    with server.client() as c:
        assert c.put("/models/rb", json=CONFIG).status_code == 201
        _learn(c, "rb", X[:400], y[:400])
        ids = c.post("/predict", json={"model": "rb", "x": X[400:420].tolist(), "remember": True}).json()[
            "ids"
        ]
        first = c.post("/feedback", json={"model": "rb", "ids": ids[:10], "y": y[400:410].tolist()})
        assert first.json()["learned"] == 10
        target = _snap(c, "rb")  # holds the first ten
        c.post("/feedback", json={"model": "rb", "ids": ids[10:], "y": y[410:420].tolist()})
        _snap(c, "rb")
        assert c.post("/models/rb/rollback", json={"version": target}).status_code == 200
        again = c.post("/feedback", json={"model": "rb", "ids": ids, "y": y[400:420].tolist()}).json()
        # the version rolled back to holds the first ten (duplicate); the last ten it never learned
        assert (again["duplicate_indices"], again["learned"]) == (list(range(10)), 10), again
