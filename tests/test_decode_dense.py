"""The dense ``X`` fast path of ``/learn`` bodies (:mod:`svmstream.app.ingest.decode_dense`):
the same float64 bits and the same rest of the body as orjson + ``np.asarray``, or None (the
full decoder's path) for anything it does not read."""

from __future__ import annotations

import json
import time

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient

from svmstream.app.ingest.decode import decode_body
from svmstream.app.ingest.decode_dense import decode_dense_body, kernel_ready
from svmstream.app.main import create_app
from svmstream.app.settings import Settings


@pytest.fixture(scope="module", autouse=True)
def _kernel():
    deadline = time.monotonic() + 300
    while not kernel_ready():
        assert time.monotonic() < deadline, "the decoder kernel did not load"
        time.sleep(0.05)


def reference(body: bytes):
    """What the full decoder makes of the body: (obj, X as float64)."""
    obj = decode_body(body)
    key = "X" if "X" in obj else "x"
    return obj, key, np.ascontiguousarray(np.asarray(obj[key]), dtype=np.float64)


def same_as_reference(body: bytes) -> bool:
    """True when the fast path read the body (and then equals the reference bit for bit),
    False when it declined."""
    fast = decode_dense_body(body)
    if fast is None:
        return False
    obj, X = fast
    ref, key, ref_X = reference(body)
    assert obj[key] is X and X.dtype == np.float64 and X.flags.c_contiguous
    assert X.shape == ref_X.shape
    assert np.array_equal(X.view(np.int64), ref_X.view(np.int64))  # bits: -0.0 and 0.0 differ
    assert {k: v for k, v in obj.items() if k != key} == {k: v for k, v in ref.items() if k != key}
    return True


def value_kinds(rng, n, d):
    return [
        np.round(rng.normal(size=(n, d)), int(rng.integers(0, 8))),  # short decimals
        rng.integers(-(10**6), 10**6, size=(n, d)) / 10.0 ** rng.integers(0, 7, size=(n, d)),
        rng.integers(-1000, 1000, size=(n, d)),  # integers
        np.round(rng.normal(size=(n, d)) * 10.0 ** rng.integers(-30, 30, size=(n, d)), 3),
    ]


def test_random_matrices_read_bit_for_bit():
    rng = np.random.default_rng(0)
    read = 0
    for trial in range(60):
        n, d = int(rng.integers(1, 30)), int(rng.integers(1, 25))
        for A in value_kinds(rng, n, d):
            body = orjson.dumps({"model": "m", "X": A.tolist(), "y": [1] * n})
            read += same_as_reference(body)
            spaced = json.dumps({"x": A.tolist(), "y": ["a"] * n, "n_features": d}, indent=trial % 3 or None)
            read += same_as_reference(spaced.encode())
    assert read >= 400  # nearly all of them take the fast path (a few have >1/4 long numbers)


def test_full_precision_values_go_to_python_or_decline():
    """17-digit values (random doubles) are exact too: a few through Python's float, many of
    them -> the whole body declined."""
    rng = np.random.default_rng(1)
    A = np.round(rng.normal(size=(50, 10)), 4)
    A[::7, 3] = rng.normal(size=A[::7, 3].shape)  # ~1/70 of the values need 17 digits
    A[1, 1] = 1.7976931348623157e308
    A[2, 2] = 5e-324
    A[3, 3] = 2.2250738585072014e-308
    assert same_as_reference(orjson.dumps({"X": A.tolist(), "y": [0] * 50}))
    B = rng.normal(size=(50, 10))
    assert decode_dense_body(orjson.dumps({"X": B.tolist(), "y": [0] * 50})) is None


@pytest.mark.parametrize(
    "body",
    [
        b'{"X":[[1,2],[3,4]],"y":[0,1]}',
        b'{"X":[[-0,-0.0,0e0,-0e-5,1E2,1e+2,0.5e-3,9007199254740993.0]],"y":[1]}',
        b'{"model":"a\\"X","X":[[1, 2 ] , [ 3 ,4]] , "y" : [0,1] }',
        b'{"y":[0],"n_features":2,"X":[[1,2]]}',
        b'{"X":[[1,2]],"y":[0],"n_features":2}',
        b'{"X":[[1,2]],"y":[0],"z":{"a":[[[[1]]]]}}',
        b'{"\\u0058":[[2]],"X":[[1]],"y":[0]}',  # orjson: the last X wins
        b'\n{ "x" :\t[[123456789012345678, 0.000000000000000000000001, 1, 2, 3, 4, 5, 6]], "y": [true] }',
    ],
)
def test_bodies_read(body):
    assert same_as_reference(body)


@pytest.mark.parametrize(
    "body",
    [
        b'{"X":[[1,2],[3]],"y":[0,1]}',  # ragged
        b'{"X":[[true,2]],"y":[0]}',  # a boolean: refused by the full path's message
        b'{"X":[[null]],"y":[0]}',
        b'{"X":[["1"]],"y":[0]}',
        b'{"X":[[NaN]],"y":[0]}',
        b'{"X":[[1e400]],"y":[0]}',
        b'{"X":[[01]],"y":[0]}',
        b'{"X":[[1.]],"y":[0]}',
        b'{"X":[[.5]],"y":[0]}',
        b'{"X":[[1234567890123456789]],"y":[0]}',  # an integer beyond 18 digits
        b'{"X":[[1,2]],"X":[[3,4]],"y":[0]}',  # a second X
        b'{"X":[[1]],"\\u0058":[[2]],"y":[0]}',  # ... under another spelling
        b'{"X":[[1,2]],"y":[0]} x',  # trailing text
        b'{"X":[[1,2]],"y":[0]',
        b'{"X":[[1,2]]  ,  }',
        b'{"X":[[]],"y":[0]}',
        b'{"X":[],"y":[0]}',
        b'{"X":[{"0":1}],"y":[0]}',
        b"[[1]]",
        b'{"X":[[1]],"y":' + b"[" * 70 + b"]" * 70 + b"}",  # deeper than 64 levels
    ],
)
def test_bodies_declined(body):
    assert decode_dense_body(body) is None


def test_learn_answers_and_errors_unchanged(tmp_path):
    """Through /learn: the fast path's model equals the full decoder's (a body with a boolean
    takes the full path), and a non-finite value is refused with the same message."""
    rng = np.random.default_rng(2)
    X = np.round(rng.normal(size=(300, 5)) * 50, 3)
    y = (X[:, 0] > 0).astype(int)
    fast = orjson.dumps({"model": "a", "X": X.tolist(), "y": y.tolist()})
    full = orjson.dumps({"model": "b", "X": X.tolist(), "y": y.tolist(), "note": True})
    assert decode_dense_body(fast) is not None
    with TestClient(create_app(Settings(snapshot_dir=str(tmp_path), warm_up=False))) as c:
        for name, body in (("a", fast), ("b", full)):
            assert (
                c.put(
                    f"/models/{name}",
                    json={"budget": 50, "random_state": 0, "warmup": 0, "shuffle_buffer": 0},
                ).status_code
                == 201
            )
            r = c.post("/learn", content=body, headers={"content-type": "application/json"})
            if name == "b":  # an unknown field: the envelope check of the full path
                assert r.status_code == 422 and r.json()["field"] == "note"
                r = c.post("/learn", json={"model": "b", "X": X.tolist(), "y": y.tolist()})
            assert r.status_code == 200, r.text
        probe = {"X": X[:50].tolist()}
        a = c.post("/predict", json={"model": "a", **probe}).json()
        assert "decision" in a, a
        b = c.post("/predict", json={"model": "b", **probe}).json()
        assert a["decision"] == b["decision"] and a["labels"] == b["labels"]
        json_type = {"content-type": "application/json"}
        r = c.post("/learn", content=b'{"model":"a","X":[[1,2,3,4,1e999]],"y":[1]}', headers=json_type)
        assert r.status_code == 422 and r.json()["detail"].startswith("X[0][4]: inf is not a finite number")
        r = c.post("/learn", content=b'{"model":"a","X":[[1,2,3,4]],"y":[1]}', headers=json_type)
        assert r.status_code == 422 and "has 4 features" in r.json()["detail"]
