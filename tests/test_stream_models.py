"""Model configurations of the service: ``algorithm="bsca"`` and the BSGD options
(maintenance, merge solver, schedule, eta, radius, bias) through the model-create route,
/learn, /predict, snapshots and the stream."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from svmstream.app.main import create_app
from svmstream.app.models.config import ModelConfig
from svmstream.app.models.factory import make_estimator
from svmstream.app.settings import Settings
from svmstream.solvers import BudgetedSCAClassifier, BudgetedSGDClassifier, StreamingClassifier
from tests.conftest import two_moons_like
from tests.test_stream import good_entries, produce, stream_settings, streaming, unique, wait_for

X, Y = two_moons_like(600, d=4, seed=21)
PROBE = two_moons_like(50, d=4, seed=22)[0]
#: the raw step these tests compare with a direct estimator: no scaling, window, buffer or guard
RAW = {"scaling": "none", "warmup": 0, "shuffle_buffer": 0, "run_guard": False}
BSCA = {
    "algorithm": "bsca",
    "budget": 30,
    "gamma": 1.0,
    "C": 5.0,
    "n_samples": 600,
    "random_state": 0,
    "maintenance": "merge",
    "merge_solver": "lookup-wd",
    **RAW,
}


def _settings(tmp_path) -> Settings:
    return Settings(
        snapshot_dir=tmp_path / "snap", snapshot_interval_s=3600, warm_up=False, create_default_model=False
    )


def _direct(config: dict, X=X, y=Y) -> np.ndarray:
    est = make_estimator(ModelConfig.model_validate({**config, "classes": [-1, 1]}))
    for start in range(0, len(X), 200):
        est.partial_fit(
            X[start : start + 200], (y[start : start + 200] == 1).astype(np.int64), classes=np.arange(2)
        )
    return est.decision_function(PROBE)


def test_make_estimator_maps_every_option():
    est = make_estimator(ModelConfig.model_validate(BSCA))
    assert isinstance(est, StreamingClassifier) and isinstance(est.estimator, BudgetedSCAClassifier)
    plain = est.estimator
    assert (plain.budget, plain.C, plain.merge_solver, plain.n_samples) == (30, 5.0, "lookup-wd", 600)
    assert (plain.gamma, plain.random_state, plain.maintenance) == (1.0, 0, "merge")
    assert {k: getattr(est, k) for k in RAW} == RAW  # the stages' settings go to the pipeline
    cfg = ModelConfig.model_validate(
        {
            "budget": 20,
            "maintenance": "remove",
            "schedule": "norma",
            "eta": 0.5,
            "radius": 3.0,
            "fit_intercept": True,
            "merge_solver": "gss-precise",
        }
    )
    est = make_estimator(cfg)
    assert isinstance(est, StreamingClassifier) and isinstance(est.estimator, BudgetedSGDClassifier)
    plain = est.estimator
    assert plain.budget == 20
    assert (
        plain.maintenance,
        plain.schedule,
        plain.eta,
        plain.radius,
        plain.fit_intercept,
        plain.merge_solver,
    ) == (
        "remove",
        "norma",
        0.5,
        3.0,
        True,
        "gss-precise",
    )


def test_bsca_model_learns_predicts_snapshots_and_restores_over_http(tmp_path):
    with TestClient(create_app(_settings(tmp_path))) as c:
        r = c.put("/models/dual", json=BSCA)
        assert r.status_code == 201, r.text
        assert r.json()["algorithm"] == "bsca" and r.json()["config"]["merge_solver"] == "lookup-wd"
        for start in range(0, 600, 200):
            r = c.post(
                "/learn",
                json={
                    "model": "dual",
                    "X": X[start : start + 200].tolist(),
                    "y": Y[start : start + 200].tolist(),
                },
            )
            assert r.status_code == 200, r.text
        before = c.post("/predict", json={"model": "dual", "X": PROBE.tolist()}).json()
        info = c.get("/models/dual").json()
    np.testing.assert_array_equal(before["decision"], _direct(BSCA))  # same steps, bit-identical
    assert info["n_seen"] == 600 and info["n_support_vectors"] <= 30 and info["statistics"]["merges"] > 0
    assert info["metrics"]["prequential_accuracy"] > 0.5
    with TestClient(create_app(_settings(tmp_path))) as c:  # restored from the shutdown snapshot
        after = c.post("/predict", json={"model": "dual", "X": PROBE.tolist()}).json()
        assert c.get("/models/dual").json()["algorithm"] == "bsca"
    assert after["decision"] == before["decision"]


@pytest.mark.parametrize(
    "options",
    [
        {"maintenance": "remove"},
        {"maintenance": "project"},
        {"merge_solver": "lookup-wd"},
        {"merge_solver": "lookup-h", "fit_intercept": True},
        {"schedule": "norma", "eta": 0.5},
        {"schedule": "perceptron", "eta": 0.1, "radius": 5.0},
    ],
)
def test_bsgd_options_reach_the_solver(tmp_path, options):
    config = {
        "algorithm": "bsgd",
        "budget": 20,
        "gamma": 1.0,
        "C": 5.0,
        "n_samples": 600,
        "random_state": 0,
        **RAW,
        **options,
    }
    with TestClient(create_app(_settings(tmp_path))) as c:
        r = c.put("/models/opt", json=config)
        assert r.status_code == 201, r.text
        assert all(r.json()["config"][k] == v for k, v in options.items())
        for start in range(0, 600, 200):
            assert (
                c.post(
                    "/learn",
                    json={
                        "model": "opt",
                        "X": X[start : start + 200].tolist(),
                        "y": Y[start : start + 200].tolist(),
                    },
                ).status_code
                == 200
            )
        got = c.post("/predict", json={"model": "opt", "X": PROBE.tolist()}).json()["decision"]
    np.testing.assert_array_equal(got, _direct(config))


@pytest.mark.parametrize(
    "body, detail",
    [
        ({"algorithm": "svm"}, "algorithm: Input should be 'bsgd' or 'bsca'"),
        ({"merge_solver": "fast"}, "merge_solver: Input should be"),
        ({"schedule": "adam"}, "schedule: Input should be"),
        ({"budget": 1}, "budget: Input should be greater than or equal to 2"),
        ({"eta": 0}, "eta: Input should be greater than 0"),
    ],
)
def test_invalid_options_are_422(tmp_path, body, detail):
    with TestClient(create_app(_settings(tmp_path))) as c:
        r = c.put("/models/bad", json=body)
        assert r.status_code == 422 and r.json()["detail"].startswith(detail), r.text
        assert c.get("/models/bad").status_code == 404


def test_bsca_model_learns_from_its_stream(redis_server, tmp_path):
    r = redis_server.client()
    name = unique("bsca")
    settings = stream_settings(tmp_path, redis_server.url)
    key = settings.stream_keys(name)[0]
    produce(r, key, good_entries(X, Y))
    with streaming(settings, name, config=BSCA) as (registry, _):
        wait_for(lambda: registry.get(name).view.stats["n_seen"] == 600, what="bsca stream applied")
        decision = registry.get(name).view.decision_function(PROBE)
    np.testing.assert_allclose(
        decision, _direct(BSCA, X.astype(np.float32).astype(np.float64)), rtol=0, atol=1e-12
    )


def test_a_model_that_refuses_to_learn_gets_no_consumer_restart_loop(redis_server, tmp_path, monkeypatch):
    """A consumer whose (current) model refuses its batches stops for good; a replaced
    model gets a fresh consumer."""
    from svmstream.app.errors import ModelClosed
    from svmstream.app.models.registry import ModelHandle

    r = redis_server.client()
    name = unique("refuse")
    settings = stream_settings(tmp_path, redis_server.url)
    produce(r, settings.stream_keys(name)[0], good_entries(X[:100], Y[:100]))

    def refuse(self, *args, **kwargs):
        raise ModelClosed(f"model {self.name!r} does not learn online")

    with monkeypatch.context() as m:
        m.setattr(ModelHandle, "submit", refuse)
        with streaming(settings, name) as (registry, manager):
            first = manager.consumers[name]
            wait_for(lambda: not first.alive, what="the consumer stopped")
            assert first.refused
            for _ in range(3):
                manager.reconcile()
            assert name not in manager.consumers  # not restarted for the same model
            m.undo()
            registry.create(name, registry.resolve_config(dict(BSCA)), snapshot=False)  # replaced
            manager.reconcile()
            wait_for(lambda: registry.get(name).view.stats["n_seen"] == 100, what="the new model learned")
