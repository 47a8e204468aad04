"""Bearer-token auth: mutating routes need the token (401 otherwise, nothing changes),
read routes are open unless PROTECT_READS is set."""

from __future__ import annotations

import warnings

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from svmstream.app.api.auth import check_token
from svmstream.app.main import create_app
from svmstream.app.settings import Settings

TOKEN = "s3cret-token"
GOOD = {"authorization": f"Bearer {TOKEN}"}
BAD_HEADERS = [
    {},
    {"authorization": "Bearer wrong"},
    {"authorization": TOKEN},
    {"authorization": "Basic czNjcmV0"},
    {"authorization": "Bearer "},
    {"authorization": f"Bearer {TOKEN}x"},
]
LEARN = {"X": [[0.0, 1.0], [1.0, 0.0], [0.5, 0.5], [1.0, 1.0]], "y": [1, -1, 1, -1]}


def _app(tmp_path, **kw) -> TestClient:
    settings = Settings(
        snapshot_dir=tmp_path / "snap",
        snapshot_interval_s=3600,
        warm_up=False,
        api_token=TOKEN,
        default_n_samples=100,
        default_warmup=0,  # the first batch closes the warm-up window: predictions right away
        **kw,
    )
    return TestClient(create_app(settings))


def test_check_token_is_exact():
    assert check_token("abc", "abc")
    assert not check_token("abc", "abd") and not check_token("abc", "ab") and not check_token("abc", None)
    assert check_token("pässwörd", "pässwörd")


def test_mutating_routes_need_the_token_and_change_nothing_without_it(tmp_path):
    with _app(tmp_path) as c:
        assert c.post("/learn", json=LEARN, headers=GOOD).status_code == 200
        before = c.get("/models").json()
        pred_before = c.post("/predict", json={"X": LEARN["X"]}).json()
        for headers in BAD_HEADERS:
            for method, path, body in (
                ("POST", "/learn", LEARN),
                ("PUT", "/models/other", {"budget": 5}),
                ("PUT", "/models/default", {"budget": 5}),
                ("DELETE", "/models/default", None),
                ("POST", "/models/default/flush", None),
            ):
                r = c.request(method, path, json=body, headers=headers)
                assert r.status_code == 401, (method, path, headers, r.text)
                assert r.headers["www-authenticate"] == "Bearer"
                assert r.json()["detail"].startswith("authorization: ")
        assert c.get("/models").json() == before
        assert c.post("/predict", json={"X": LEARN["X"]}).json() == pred_before
        # reads stay open
        assert c.get("/health").status_code == 200 and c.get("/metrics").status_code == 200
        assert c.get("/models/default").status_code == 200
        # with the token everything works
        assert c.put("/models/other", json={"budget": 5}, headers=GOOD).status_code == 201
        assert c.delete("/models/other", headers=GOOD).status_code == 200


def test_protect_reads_closes_the_read_routes_too(tmp_path):
    with _app(tmp_path, protect_reads=True) as c:
        for path in ("/health", "/metrics", "/models", "/models/default"):
            assert c.get(path).status_code == 401, path
            assert c.get(path, headers=GOOD).status_code == 200, path
        assert c.post("/predict", json={"X": [[0.0, 1.0]]}).status_code == 401
        assert c.post("/learn", json=LEARN, headers=GOOD).status_code == 200
        assert c.post("/predict", json={"X": [[0.0, 1.0]]}, headers=GOOD).status_code == 200


@pytest.mark.parametrize("value", ["", None])
def test_an_empty_token_means_auth_off(tmp_path, value):
    settings = Settings(snapshot_dir=tmp_path / "snap", warm_up=False, api_token=value, default_n_samples=100)
    assert settings.token() is None
    with TestClient(create_app(settings)) as c:
        assert c.post("/learn", json=LEARN).status_code == 200


def test_openapi_declares_the_bearer_scheme_on_the_protected_routes(tmp_path):
    """Auth goes through FastAPI's HTTPBearer, so clients generated from /openapi.json know
    to send ``Authorization: Bearer <token>``."""
    with _app(tmp_path) as c:
        schema = c.get("/openapi.json").json()
    schemes = schema["components"]["securitySchemes"]
    assert [s for s in schemes.values() if s == {**s, "type": "http", "scheme": "bearer"}], schemes
    name = next(k for k, s in schemes.items() if s["type"] == "http" and s["scheme"] == "bearer")
    for path, method in (
        ("/learn", "post"),
        ("/predict", "post"),
        ("/models/{name}", "put"),
        ("/models/{name}", "delete"),
        ("/jobs", "post"),
        ("/uploads", "post"),
    ):
        assert {name: []} in schema["paths"][path][method].get("security", []), (path, method)
