"""Sparse support vectors: the sparse pool gives the same model as the
dense one, its arena is append-only, ``sv_storage="auto"`` picks it for wide sparse input,
snapshots hold only the nonzeros, a 10^6-feature stream stays within the budget's nonzeros, and
the service picks sparse storage for a raw wide sparse stream with no settings."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from svmstream.app.models.config import ModelConfig
from svmstream.app.models.limits import size_message
from svmstream.app.settings import Settings
from svmstream.solvers import (
    BudgetedSCAClassifier,
    BudgetedSGDClassifier,
    StreamingClassifier,
    resolve_sv_storage,
)
from svmstream.solvers.persistence import decode_state, encode_state, estimator_from_state
from tests.conftest import engine_state_with_stages


def raw_sparse(n: int, d: int = 400, classes: int = 2, seed: int = 0):
    """Raw, unscaled CSR rows (5% nonzeros, values up to 20) with string labels from a linear rule."""
    rng = np.random.default_rng(seed)
    X = sp.random(
        n, d, density=0.05, random_state=seed, format="csr", data_rvs=lambda k: rng.uniform(0, 20, k)
    )
    scores = X @ rng.normal(size=(d, classes))
    if classes == 2:
        index = (scores[:, 0] > np.median(scores[:, 0])).astype(int)
    else:
        index = np.argmax(scores, axis=1)
    names = np.array(["alpha", "beta", "gamma", "delta"])[:classes]
    return X, names[index]


def streaming(cls, stages=None, **params):
    """``StreamingClassifier(cls(**params), **stages)``: the plain estimator in the stages."""
    return StreamingClassifier(cls(**params), **(stages or {}))


def stream(model, X, y, batch=100):
    for a in range(0, X.shape[0], batch):
        model.partial_fit(X[a : a + batch], y[a : a + batch], classes=np.unique(y))
    return model.flush()


def sv_dense(model):
    svs = model.support_vectors_
    return svs.toarray() if sp.issparse(svs) else svs


CASES = [
    ("bsgd-gss", BudgetedSGDClassifier, {}, 2),
    ("bsgd-lookup-wd", BudgetedSGDClassifier, {"merge_solver": "lookup-wd"}, 2),
    ("bsgd-lookup-h", BudgetedSGDClassifier, {"merge_solver": "lookup-h"}, 2),
    ("bsgd-remove", BudgetedSGDClassifier, {"maintenance": "remove"}, 2),
    ("bsgd-project", BudgetedSGDClassifier, {"maintenance": "project"}, 2),
    ("bsgd-perceptron", BudgetedSGDClassifier, {"schedule": "perceptron", "fit_intercept": True}, 2),
    ("bsgd-multiclass", BudgetedSGDClassifier, {}, 3),
    ("bsgd-multiclass-project", BudgetedSGDClassifier, {"maintenance": "project"}, 3),
    ("bsca", BudgetedSCAClassifier, {}, 2),
    ("bsca-ovr", BudgetedSCAClassifier, {}, 3),
]


@pytest.mark.parametrize(("name", "cls", "params", "classes"), CASES, ids=[c[0] for c in CASES])
def test_dense_and_sparse_storage_give_the_same_model(name, cls, params, classes):
    X, y = raw_sparse(700, classes=classes, seed=1)
    models = {}
    for storage in ("dense", "sparse"):
        model = streaming(
            cls, dict(warmup=100, shuffle_buffer=200), budget=30, random_state=0, sv_storage=storage, **params
        )
        models[storage] = stream(model, X[:600], y[:600])
        assert model.sv_storage_ == storage
    dense, sparse = models["dense"], models["sparse"]
    stats = sparse.statistics()  # one-vs-rest: summed over the binary models
    assert stats["maintenance_events"] > 50  # the budget was enforced many times
    if params.get("maintenance", "merge") == "merge":
        assert stats["merges"] > 50
    same = {
        k: v for k, v in dense.statistics().items() if k not in ("sv_storage", "sv_nonzeros", "per_class")
    }
    assert {k: stats[k] for k in same} == same
    np.testing.assert_allclose(sparse.decision_function(X[600:]), dense.decision_function(X[600:]), atol=1e-9)
    parts = [(dense, sparse)]
    if hasattr(sparse, "estimators_"):  # one-vs-rest: every binary model
        parts = list(zip(dense.estimators_, sparse.estimators_))
    for d_model, s_model in parts:
        assert s_model.sv_storage_ == "sparse" and sp.issparse(s_model.support_vectors_)
        np.testing.assert_allclose(s_model.dual_coef_, d_model.dual_coef_, atol=1e-9)
        np.testing.assert_allclose(sv_dense(s_model), sv_dense(d_model), atol=1e-9)
        assert s_model.sv_nonzeros_ < 0.5 * d_model.sv_nonzeros_


def test_bsca_dataset_mode_and_objectives_agree_between_storages():
    X, y = raw_sparse(400, seed=2)
    dense = BudgetedSCAClassifier(budget=25, epochs=2, random_state=0, sv_storage="dense").fit(X, y)
    sparse = BudgetedSCAClassifier(budget=25, epochs=2, random_state=0, sv_storage="sparse").fit(X, y)
    np.testing.assert_allclose(sparse.decision_function(X), dense.decision_function(X), atol=1e-9)
    assert sparse.objectives(X, y)["norm2"] == pytest.approx(dense.objectives(X, y)["norm2"], rel=1e-9)


def test_the_arena_is_append_only_and_grows_into_new_arrays():
    """Entries below ``used`` are never rewritten (published views share the arena): learning
    more leaves every earlier entry as it was, in the same array or in the old one when the
    arena was replaced by a larger one."""
    X, y = raw_sparse(1500, seed=3)
    model = streaming(
        BudgetedSGDClassifier,
        dict(warmup=100, shuffle_buffer=0),
        budget=30,
        random_state=0,
        sv_storage="sparse",
    )
    stream(model, X[:300], y[:300])
    engine = model.model_
    replaced = 0
    for start in range(300, 1500, 100):
        data, idx, used = engine._sv_data, engine._sv_idx, int(engine._sv_used[0])
        before = (data[:used].copy(), idx[:used].copy())
        model.partial_fit(X[start : start + 100], y[start : start + 100])
        replaced += engine._sv_data is not data
        np.testing.assert_array_equal(data[:used], before[0])
        np.testing.assert_array_equal(idx[:used], before[1])
    assert replaced >= 1  # the arena filled up and moved at least once
    lens = engine._sv_len[: model.n_support_vectors_]
    assert engine._sv_used[0] <= engine._sv_data.shape[0] and lens.sum() == model.sv_nonzeros_


def test_auto_storage_rule_and_parameter_errors():
    wide = sp.random(50, 8315, density=0.005, format="csr", random_state=0)
    assert resolve_sv_storage("auto", wide, "auto") == "sparse"
    assert resolve_sv_storage("auto", wide, "standard") == "dense"  # an offset would fill every zero
    assert resolve_sv_storage("auto", wide.toarray(), "auto") == "dense"
    assert resolve_sv_storage("auto", sp.random(50, 256, density=0.01, format="csr"), "auto") == "dense"
    assert resolve_sv_storage("auto", sp.random(50, 1000, density=0.2, format="csr"), "auto") == "dense"
    assert resolve_sv_storage("dense", wide, "auto") == "dense"
    assert resolve_sv_storage("sparse", np.zeros((2, 3)), "none") == "sparse"
    X, y = raw_sparse(200, seed=4)
    with pytest.raises(ValueError, match="sv_storage"):
        streaming(BudgetedSGDClassifier, dict(scaling="standard"), sv_storage="sparse").partial_fit(
            X, y, classes=np.unique(y)
        )
    with pytest.raises(ValueError, match="sv_storage"):
        BudgetedSCAClassifier(sv_storage="compressed").fit(X, y)
    model = streaming(BudgetedSGDClassifier, dict(warmup=50), budget=10).partial_fit(
        X, y, classes=np.unique(y)
    )
    assert model.sv_storage_ == "sparse" and model.statistics()["sv_storage"] == "sparse"
    assert BudgetedSGDClassifier(budget=10).fit(X.toarray(), y).sv_storage_ == "dense"
    assert BudgetedSGDClassifier(budget=10).fit(X, y).sv_storage_ == "sparse"  # the plain estimator too
    # dense rows sent to a sparse-storage model are learned and predicted alike
    model.partial_fit(X[:20].toarray(), y[:20])
    np.testing.assert_allclose(model.decision_function(X[:20].toarray()), model.decision_function(X[:20]))


def snapshot_roundtrip(model):
    arrays, meta = model.get_state()
    blob = encode_state(arrays, meta)
    return blob, estimator_from_state(*decode_state(blob))


@pytest.mark.parametrize("cls", [BudgetedSGDClassifier, BudgetedSCAClassifier])
def test_sparse_state_round_trip_continues_identically_and_is_proportional_to_nonzeros(cls):
    X, y = raw_sparse(1200, d=3000, classes=3, seed=5)
    model = streaming(cls, dict(warmup=200, shuffle_buffer=300), budget=40, random_state=0)
    stream(model, X[:500], y[:500])
    model.partial_fit(X[500:800], y[500:800])  # the buffer holds rows now
    assert model.sv_storage_ == "sparse"
    blob, restored = snapshot_roundtrip(model)
    for m in (model, restored):
        m.partial_fit(X[800:1100], y[800:1100])
    np.testing.assert_array_equal(restored.decision_function(X[1100:]), model.decision_function(X[1100:]))
    arrays, meta = model.get_state()
    meta = meta["model"]  # the engine's state inside the pipeline's
    assert meta["state_version"] == 8 and meta["sv_storage"] == "sparse"
    assert (
        "sv_t" not in arrays and arrays["pp_factor"].size == arrays["pp_offset"].size == 0
    )  # nothing d-sized
    sv_nnz = model.sv_nonzeros_
    held = sum(v.size for k, v in arrays.items() if k.startswith(("pp_sbuf_data", "pp_sres_data")))
    bound = 3 * sv_nnz * 12 + held * 12 + 64_000
    assert len(encode_state(arrays, meta)) <= bound, (len(encode_state(arrays, meta)), sv_nnz, held)


def test_a_state_saved_before_sparse_storage_still_loads():
    """A version-5 state (dense ``sv_t``, no ``sv_storage`` anywhere; saved when the engine was
    the public ``BudgetedSGDClassifier``) loads as a dense model in a StreamingClassifier."""
    X, y = raw_sparse(500, seed=6)
    model = stream(
        streaming(BudgetedSGDClassifier, dict(warmup=100), budget=20, random_state=0, sv_storage="dense"),
        X,
        y,
    )
    arrays, meta = engine_state_with_stages(*model.get_state(), version=5)
    meta["estimator"] = "BudgetedSGDClassifier"
    meta["params"] = {k: v for k, v in meta["params"].items() if k != "sv_storage"}
    meta.pop("sv_storage")
    old = estimator_from_state(*decode_state(encode_state(arrays, meta)))
    assert isinstance(old, StreamingClassifier)
    assert old.sv_storage_ == "dense" and old.estimator.sv_storage == old.model_.sv_storage == "auto"
    np.testing.assert_array_equal(old.decision_function(X[:50]), model.decision_function(X[:50]))


def hashed_stream(n: int, d: int = 10**6, nnz: int = 20, seed: int = 0):
    """Hashed-feature rows: 8 of 50 class signature features and 12 random ones of 10^6."""
    rng = np.random.default_rng(seed)
    signatures = rng.choice(d, size=(2, 50), replace=False)
    y = rng.integers(0, 2, n)
    cols = [
        np.unique(
            np.concatenate(
                [rng.choice(signatures[c], 8, replace=False), rng.choice(d, nnz - 8, replace=False)]
            )
        )
        for c in y
    ]
    indptr = np.concatenate([[0], np.cumsum([c.size for c in cols])])
    X = sp.csr_matrix((rng.uniform(0.5, 3.0, indptr[-1]), np.concatenate(cols), indptr), shape=(n, d))
    return X, np.where(y == 1, "spam", "ham")


def _arrays(obj):
    for value in vars(obj).values():
        if isinstance(value, np.ndarray):
            yield value
    for name in ("_scaler", "_order"):
        stage = getattr(obj, name, None)
        if stage is not None:
            yield from _arrays(stage)
            if getattr(stage, "store", None) is not None:
                yield from _arrays(stage.store)


def test_a_million_feature_hashed_stream_keeps_the_model_within_the_budgets_nonzeros():
    d = 10**6
    X, y = hashed_stream(5500, d)
    model = streaming(
        BudgetedSGDClassifier, budget=200, random_state=0
    )  # no settings: sparse storage by "auto"
    stream(model, X[:5000], y[:5000], batch=500)
    engine = model.model_
    assert model.sv_storage_ == "sparse" and model.n_support_vectors_ == 200 and model.n_merges_ > 1000
    assert model.score(X[5000:], y[5000:]) > 0.9
    arrays = list(_arrays(engine)) + list(_arrays(model))
    wide = [a for a in arrays if a.size >= d]
    assert len(wide) <= 4 and all(a.ndim == 1 and a.size == d for a in wide)  # scratch, scaling: (d,) each
    rest = sum(a.nbytes for a in arrays if a.size < d)
    held = model._order.store.data.size  # the shuffle buffer and reservoirs (sparse rows)
    budget_nnz = 200 * 2 * 20  # B SVs of up to twice a row's nonzeros (merged pairs)
    assert model.sv_nonzeros_ <= 5 * budget_nnz
    assert (
        engine._sv_data.nbytes + engine._sv_idx.nbytes
        <= 12 * (3 * model.sv_nonzeros_ + 4 * 20 + 1024) + 16 * 201 * 12
    )
    assert rest <= 12 * (4 * model.sv_nonzeros_ + 2 * held) + 2_000_000, rest


def test_the_size_guard_counts_sparse_svs_by_nonzeros():
    settings = Settings()
    assert size_message(ModelConfig(), 55_197, settings) is None  # "auto": sparse SVs at d > 256
    assert size_message(ModelConfig(sv_storage="sparse"), 55_197, settings) is None
    assert "support vectors" in size_message(ModelConfig(sv_storage="dense"), 55_197, settings)


# ----------------------------------------------------------------------------- the service


def wide_sparse_json(n: int, d: int = 50_000, seed: int = 0):
    """Raw sparse rows as JSON objects {"index": value} (values up to 40) and string labels."""
    rng = np.random.default_rng(seed)
    signatures = rng.choice(d, size=(2, 10), replace=False)
    y = np.where(rng.random(n) < 0.6, "spam", "ham")
    rows = []
    for label in y:
        own = rng.choice(signatures[int(label == "spam")], 5, replace=False)
        cols = np.unique(np.concatenate([own, rng.choice(d, 15, replace=False)]))
        rows.append({str(c): round(float(v), 3) for c, v in zip(cols, rng.uniform(1, 40, cols.size))})
    return rows, y


def test_the_service_picks_sparse_storage_for_a_raw_wide_sparse_stream_with_no_settings(start_server):
    rows, y = wide_sparse_json(2000)
    server = start_server()
    with server.client() as c:
        assert c.put("/models/words", json={}).status_code == 201
        for a in range(0, 1800, 300):
            r = c.post(
                "/learn", json={"model": "words", "X": rows[a : a + 300], "y": y[a : a + 300].tolist()}
            )
            assert r.status_code == 200, r.text
        assert c.post("/models/words/flush").status_code == 200
        info = c.get("/models/words").json()
        stats = info["statistics"]
        assert stats["sv_storage"] == "sparse", stats
        assert (
            0 < stats["n_support_vectors"] <= 500 and stats["sv_nonzeros"] <= 40 * stats["n_support_vectors"]
        )
        pred = c.post("/predict", json={"model": "words", "X": rows[1800:]})
        assert pred.status_code == 200, pred.text
        accuracy = float(np.mean(np.asarray(pred.json()["labels"]) == y[1800:]))
        assert accuracy >= 0.9, accuracy
        bad = c.put("/models/bad", json={"sv_storage": "sparse", "scaling": "standard"})
        assert bad.status_code == 422 and "sv_storage" in bad.text
        assert c.get("/models/bad").status_code == 404


@pytest.mark.parametrize("kernel", ["rbf", "linear"])
def test_a_label_sorted_raw_wide_stream_with_no_settings_learns_through_the_service(start_server, kernel):
    """The way LIBSVM files often come: every 'ham' row, then every 'spam' row; raw values up
    to 40, string labels, no setting but the model kind.  The shuffle buffer and the run guard
    hold the sorted runs (sparse rows, sparse SVs for rbf)."""
    rows, y = wide_sparse_json(2000, seed=3)
    order = np.argsort(y[:1800], kind="stable")  # label-sorted training rows
    train_rows, train_y = [rows[i] for i in order], y[:1800][order]
    server = start_server()
    with server.client() as c:
        assert (
            c.put("/models/sorted", json={} if kernel == "rbf" else {"kernel": "linear"}).status_code == 201
        )
        for a in range(0, 1800, 300):
            body = {"model": "sorted", "X": train_rows[a : a + 300], "y": train_y[a : a + 300].tolist()}
            r = c.post("/learn", json=body)
            assert r.status_code == 200, r.text
        assert c.post("/models/sorted/flush").status_code == 200
        stats = c.get("/models/sorted").json()["statistics"]
        pred = c.post("/predict", json={"model": "sorted", "X": rows[1800:]})
    assert pred.status_code == 200, pred.text
    if kernel == "rbf":
        assert stats["sv_storage"] == "sparse", stats
    accuracy = float(np.mean(np.asarray(pred.json()["labels"]) == y[1800:]))
    assert accuracy >= 0.9, accuracy
