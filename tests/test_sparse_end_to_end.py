"""Wide sparse data end to end: ``svmstream replay`` picks the row format by density and width,
keeps every request (and XADD round trip) under the body limit, and a wide sparse stream stays
CSR from the stream entries to the solver."""

from __future__ import annotations

import json
import subprocess
import uuid
from itertools import islice

import numpy as np
import orjson
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

from svmstream.app.cli.producer import (
    SPARSE_BELOW_DENSITY,
    WIDE_FEATURES,
    ByteLimit,
    RowSlicer,
    RowTooLarge,
    auto_format,
)
from svmstream.app.cli.replay import ReplayError, run_replay, run_stream_replay
from svmstream.app.cli.replay_bodies import request_bodies
from svmstream.app.ingest.features import conform, should_densify
from svmstream.app.ingest.labels import LabelCodec
from svmstream.app.ingest.stream_entries import parse_stream_entries
from svmstream.app.jobs.datasets import load_dataset
from tests.conftest import CLI, REPO, subprocess_env, two_moons_like, write_libsvm

D_WIDE = 50_000
NNZ = 20
HYPER = ["--budget", "50", "--gamma", "0.1", "--C", "10"]
SMALL_LIMIT = 200_000  # bytes: a 1,000-row sparse batch of the wide file is ~500 kB


def wide_sparse(n: int, d: int = D_WIDE, nnz: int = NNZ, seed: int = 0) -> tuple[sp.csr_matrix, np.ndarray]:
    """A separable wide sparse problem: each row has 5 of its class's 10 signature features
    and ``nnz - 5`` random ones, values in [0.5, 1.5]; 60% of the labels are +1."""
    rng = np.random.default_rng(seed)
    signatures = rng.choice(d, size=(2, 10), replace=False)
    y = np.where(rng.random(n) < 0.6, 1, -1)
    rows, cols = [], []
    for i in range(n):
        own = rng.choice(signatures[(y[i] + 1) // 2], 5, replace=False)
        c = np.unique(np.concatenate([own, rng.choice(d, nnz - 5, replace=False)]))
        rows.append(np.full(c.size, i))
        cols.append(c)
    r, c = np.concatenate(rows), np.concatenate(cols)
    vals = np.round(rng.uniform(0.5, 1.5, r.size), 3)
    return sp.csr_matrix((vals, (r, c)), shape=(n, d)), y


@pytest.fixture(scope="module")
def wide_files(tmp_path_factory):
    """(train, test) LIBSVM files of :func:`wide_sparse`: 3,000 + 1,000 rows, 50,000 features
    (the last feature of the train file is set in one row so that its d is 50,000)."""
    X, y = wide_sparse(4000)
    X = X.tolil()
    X[0, D_WIDE - 1] = 1.0
    X = X.tocsr()
    tmp = tmp_path_factory.mktemp("wide")
    train, test = tmp / "wide.train", tmp / "wide.test"
    dump_svmlight_file(X[:3000], y[:3000], str(train), zero_based=False)
    dump_svmlight_file(X[3000:], y[3000:], str(test), zero_based=False)
    majority = max(np.mean(y[3000:] == 1), np.mean(y[3000:] == -1))
    return train, test, majority


def replay_cli(argv: list[str], timeout: float = 300, **env: str) -> dict:
    """``svmstream replay <argv> --json --no-progress`` in its own process; the JSON result."""
    proc = subprocess.run(
        [*CLI, "replay", *argv, "--json", "--no-progress"],
        cwd=REPO,
        env=subprocess_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["stderr"] = proc.stderr
    return result


# ----------------------------------------------------------------------------- the format rule


def test_auto_format_is_sparse_for_sparse_or_wide_files_and_dense_otherwise():
    wide, _ = wide_sparse(50, seed=1)
    assert auto_format(wide) == auto_format(wide, redis=True) == "sparse"
    X, _ = two_moons_like(50, d=8)
    dense = sp.csr_matrix(X)
    assert auto_format(dense) == "dense" and auto_format(dense, redis=True) == "xd"
    # a9a-like: d = 123, 11% non-zeros -> sparse; 20% -> dense
    assert auto_format(sp.random(200, 123, density=0.11, format="csr", random_state=0)) == "sparse"
    thick = sp.random(200, 123, density=SPARSE_BELOW_DENSITY + 0.05, format="csr", random_state=0)
    assert auto_format(thick) == "dense" and auto_format(thick, redis=True) == "xd"
    # wide: sparse up to 40% non-zeros, dense rows above (sparse maps would be larger)
    broad = sp.random(5, WIDE_FEATURES + 1, density=0.3, format="csr", random_state=0)
    assert auto_format(broad) == "sparse" and auto_format(broad, redis=True) == "sparse"
    assert auto_format(sp.random(5, WIDE_FEATURES, density=0.3, format="csr", random_state=0)) == "dense"
    wide_dense = sp.random(5, WIDE_FEATURES + 1, density=0.5, format="csr", random_state=0)
    assert auto_format(wide_dense, redis=True) == "xd"


# ----------------------------------------------------------------------------- byte limits


@pytest.mark.parametrize("dense", [False, True])
def test_bodies_never_exceed_the_byte_limit_and_cover_every_row_in_order(dense):
    X, y = wide_sparse(600, seed=2)
    limit = 150_000 if not dense else 2_000_000  # a dense row is ~200 kB of JSON here
    bodies = list(islice(request_bodies("m", X, y, 1000, dense, max_bytes=limit), 100 if not dense else 3))
    assert all(len(b) <= limit for _, b in bodies)
    if dense:  # a few rows per body (checked on the first bodies only: they are large)
        assert all(1 <= rows <= 10 for rows, _ in bodies)
        got = np.asarray([row for _, b in bodies for row in orjson.loads(b)["X"]])
        np.testing.assert_array_equal(got, X[: got.shape[0]].toarray())
        return
    assert len(bodies) > 1 and sum(rows for rows, _ in bodies) == 600
    got_rows = [row for _, b in bodies for row in orjson.loads(b)["X"]]
    got_y = [v for _, b in bodies for v in orjson.loads(b)["y"]]
    for i, row in enumerate(got_rows):
        lo, hi = X.indptr[i], X.indptr[i + 1]
        assert row == dict(zip(map(str, X.indices[lo:hi].tolist()), X.data[lo:hi].tolist()))
    assert got_y == y.tolist()


def test_far_below_the_limit_batches_are_whole_and_a_row_over_the_limit_is_an_error():
    X, y = wide_sparse(2500, seed=3)
    assert [rows for rows, _ in request_bodies("m", X, y, 1000, False)] == [1000, 1000, 500]
    with pytest.raises(ReplayError, match="row 0 alone takes"):
        list(request_bodies("m", X, y, 1000, False, max_bytes=100))

    def encode(a, b):
        return None, 1000 * (b - a)

    sizes = [b - a for a, b, _ in RowSlicer(X, "sparse", 1000, ByteLimit(5_000), encode).slices()]
    assert max(sizes) <= 5 and sum(sizes) == 2500 and len(sizes) < 2500 / 3
    with pytest.raises(RowTooLarge):
        list(RowSlicer(X, "sparse", 1000, ByteLimit(999), encode).slices())


# ----------------------------------------------------------------------------- stream entries stay sparse


def test_a_wide_sparse_stream_batch_is_csr_and_a_narrow_one_dense():
    d = 55_197
    rng = np.random.default_rng(0)
    entries = []
    for i in range(300):
        idx = np.sort(rng.choice(d - 1, 160, replace=False))
        idx[-1] = d - 1 if i == 7 else idx[-1]  # without n_features, the largest index fixes the width
        row = dict(zip(map(str, idx.tolist()), np.round(rng.uniform(0, 1, idx.size), 4).tolist()))
        entries.append([b"y", b"1" if i % 2 else b"-1", b"x", orjson.dumps(row)])
    codec = LabelCodec([-1, 1])
    for n_features, grow_to in ((d, None), (None, None), (None, 2**20)):
        batch = parse_stream_entries(entries, codec, n_features, "m", grow_to=grow_to)
        assert not batch.rejected and sp.issparse(batch.X) and batch.X.shape == (300, d)
        assert batch.X.nnz == 300 * 160 and batch.X.has_sorted_indices
        assert sp.issparse(conform(batch.X, d))  # the registry's check keeps it sparse
    # a narrow model: the batch is densified (measured faster, see should_densify)
    narrow = [[b"y", b"1", b"x", b'{"3": 1.5, "0": -1}'], [b"y", b"-1", b"x", b'{"122": 2}']]
    batch = parse_stream_entries(narrow, codec, 123)
    assert isinstance(batch.X, np.ndarray) and batch.X.shape == (2, 123) and batch.X[0, 3] == 1.5
    assert should_densify(1000, 256) and not should_densify(1000, 257) and not should_densify(20_000, 250)


def test_a_55197_feature_sparse_stream_reaches_registry_learn_and_the_solver_as_csr(
    redis_server, tmp_path, monkeypatch
):
    from svmstream.app.models.handle import ModelHandle
    from tests.test_stream import stream_settings, streaming, unique, wait_for

    d = 55_197
    rng = np.random.default_rng(1)
    entries = []
    for i in range(400):
        idx = rng.choice(d, 160, replace=False)
        row = dict(zip(map(str, idx.tolist()), np.round(rng.uniform(0, 1, idx.size), 4).tolist()))
        entries.append({"y": "1" if i % 2 else "-1", "x": orjson.dumps(row)})
    seen: dict[str, list] = {"learn": [], "apply": []}
    apply = ModelHandle._apply

    def spy_apply(self, X, *args, **kwargs):
        seen["apply"].append((sp.issparse(X), X.shape))
        return apply(self, X, *args, **kwargs)

    monkeypatch.setattr(ModelHandle, "_apply", spy_apply)
    name = unique("wide")
    config = {"budget": 20, "gamma": 0.1, "C": 1.0, "classes": [-1, 1], "n_features": d, "random_state": 0}
    r = redis_server.client()
    with streaming(stream_settings(tmp_path, redis_server.url), name, config) as (registry, _):
        learn = registry.learn

        def spy_learn(model, X, y, **kwargs):
            seen["learn"].append((sp.issparse(X), X.shape))
            return learn(model, X, y, **kwargs)

        monkeypatch.setattr(registry, "learn", spy_learn)
        pipe = r.pipeline(transaction=False)
        for fields in entries:
            pipe.xadd(f"svmstream:{name}:examples", fields)
        pipe.execute()
        wait_for(lambda: sum(shape[0] for _, shape in seen["apply"]) == 400, 60, "the batches applied")
    assert seen["learn"] and all(is_sparse and shape[1] == d for is_sparse, shape in seen["learn"])
    assert all(is_sparse and shape[1] == d for is_sparse, shape in seen["apply"])
    assert r.xlen(f"svmstream:{name}:dead") == 0


# ----------------------------------------------------------------------------- real server, real replay


def test_replay_of_a_wide_sparse_file_over_http_stays_under_the_body_limit_and_learns(
    wide_files, start_server, tmp_path
):
    train, test, majority = wide_files
    server = start_server(args=("--max-body-bytes", str(SMALL_LIMIT)))
    # replay told the limit: every body is under it at the first try
    told = run_replay(
        str(train),
        server.url,
        model="wide",
        hyper={"budget": 50, "gamma": 0.1, "C": 10.0},
        test=str(test),
        progress=False,
        max_bytes=SMALL_LIMIT,
    )
    assert told["format"] == "sparse" and told["refused_bodies"] == 0
    assert 0 < told["max_body_bytes"] <= SMALL_LIMIT and told["requests"] > 3
    assert told["model"]["n_seen"] == 3000 and told["model"]["n_features"] == D_WIDE
    assert told["test_accuracy"] > majority + 0.1, (told["test_accuracy"], majority)
    # the CLI, not told (64 MiB by default): the first body gets a 413, the limit is learned from it
    result = replay_cli([str(train), "--url", server.url, "--model", "wide2", *HYPER, "--test", str(test)])
    assert result["format"] == "sparse" and result["refused_bodies"] == 1
    assert "refused a" in result["stderr"] and f"sending at most {SMALL_LIMIT:,} bytes" in result["stderr"]
    assert result["max_body_bytes"] <= SMALL_LIMIT and result["examples"] == 3000
    assert result["model"]["n_seen"] == 3000 and result["test_accuracy"] > majority + 0.1
    # a dense file: auto sends dense rows
    X, y = two_moons_like(600, d=6, seed=4)
    dense = replay_cli(
        [str(write_libsvm(tmp_path / "dense.bz2", X, y)), "--url", server.url, "--model", "dense"]
    )
    assert dense["format"] == "dense" and dense["model"]["n_seen"] == 600


def test_replay_of_a_wide_sparse_file_into_redis_stays_under_the_limit_and_learns(
    wide_files, start_server, redis_server, tmp_path
):
    train, test, majority = wide_files
    server = start_server(args=("--redis-url", redis_server.url))
    model = "wide-" + uuid.uuid4().hex[:6]
    result = replay_cli(
        [str(train), "--redis", redis_server.url, "--url", server.url, "--model", model, "--wait"]
        + [*HYPER, "--test", str(test)],
        SVMSTREAM_MAX_BODY_BYTES=str(SMALL_LIMIT),
    )
    assert result["format"] == "sparse" and result["examples"] == 3000
    assert result["max_round_trip_bytes"] <= SMALL_LIMIT and result["round_trips"] > 3  # not 3 x 1,000
    assert result["max_entry_bytes"] < 1_000 and result["bytes_per_entry"] < 600  # ~20 non-zeros
    assert result["model"]["n_seen"] == 3000 and result["model"]["n_features"] == D_WIDE
    assert result["test_accuracy"] > majority + 0.1, (result["test_accuracy"], majority)
    r = redis_server.client()
    assert r.xlen(f"svmstream:{model}:dead") == 0
    entries = r.xrange(f"svmstream:{model}:examples", count=5)
    assert entries and all(b"x" in f and f[b"x"].startswith(b"{") for _, f in entries)
    # a dense file goes as float64 xd entries (docs/stream.md: the precision contract)
    X, y = two_moons_like(500, d=6, seed=5)
    dense_model = "dense-" + uuid.uuid4().hex[:6]
    dense = run_stream_replay(
        str(write_libsvm(tmp_path / "dense.bz2", X, y)), redis_server.url, model=dense_model, progress=False
    )
    assert dense["format"] == "xd" and dense["bytes_per_entry"] == pytest.approx(1 + 1.5 + 2 + 6 * 8, abs=0.5)
    assert b"xd" in r.xrange(f"svmstream:{dense_model}:examples", count=1)[0][1]


def test_a_loaded_wide_file_keeps_its_width(wide_files):
    X, _ = load_dataset(str(wide_files[0]), fmt="libsvm")
    assert X.shape == (3000, D_WIDE) and 19 <= X.nnz / 3000 <= 21
