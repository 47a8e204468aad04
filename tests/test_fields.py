"""The fields stage (named-field rows -> columns) against brute-force encodings, and named fields
through the service: /learn, /predict, GET /models, bad input, restart and pinned versions."""

from __future__ import annotations

import warnings

import numpy as np
import orjson
import pytest
from sklearn.feature_extraction import DictVectorizer
from sklearn.utils import murmurhash3_32

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from svmstream.app.main import create_app
from svmstream.app.models.registry import Registry
from svmstream.app.models.serving import decode_serving, serving_blob
from svmstream.app.settings import Settings
from svmstream.solvers.online.stages.fields import FieldError, FieldSchema
from svmstream.solvers.persistence import decode_state


def events(n: int, seed: int = 0, missing: float = 0.1):
    """Fraud-like events: two numbers, a boolean, two categories, some nulls; the label depends
    on the country and the amount."""
    rng = np.random.default_rng(seed)
    countries = np.array(["DE", "FR", "US", "BR", "IN", "JP"])
    rows, y = [], []
    for _ in range(n):
        country = str(rng.choice(countries))
        amount = float(np.round(rng.gamma(2.0, 30.0), 2))
        row = {
            "amount": amount,
            "age": None if rng.random() < missing else int(rng.integers(18, 80)),
            "country": country,
            "device": str(rng.choice(["ios", "android", "web"])),
            "returning": bool(rng.random() < 0.5),
        }
        rows.append(row)
        y.append("fraud" if (country in ("BR", "IN")) != (amount > 80) else "ok")
    return rows, y


# ---------------------------------------------------------------------- the stage
def test_encoding_equals_dictvectorizer_with_indicators():
    rows, _ = events(300, seed=1)
    schema = FieldSchema()
    X, growth = schema.encode(rows)
    schema.commit(growth)
    names = schema.column_names()
    # brute force: DictVectorizer on the same rows, nulls as an indicator feature
    brute = [
        {(f"{k}?missing" if v is None else f"{k}={v}" if isinstance(v, str) else k): (1.0 if v is None or isinstance(v, str) else float(v)) for k, v in r.items()}
        for r in rows
    ]  # fmt: skip
    dv = DictVectorizer(sparse=False).fit(brute)
    expected = dv.transform(brute)
    order = [dv.vocabulary_[name] for name in names]
    np.testing.assert_array_equal(X.toarray(), expected[:, order])
    assert sorted(names) == sorted(dv.feature_names_)
    info = schema.info()
    kinds = {f["name"]: f["kind"] for f in info["fields"]}
    assert kinds == {
        "amount": "number",
        "age": "number",
        "country": "category",
        "device": "category",
        "returning": "boolean",
    }


def test_missing_and_new_categories_in_one_batch_keep_every_column():
    schema = FieldSchema()
    for batch in ([{"c": None}, {"c": "x"}], [{"c": "y"}, {"c": None}, {"t": None}, {"t": True}]):
        X, g = schema.encode(batch)
        schema.commit(g)
        assert X.shape[1] == schema.n_columns
    assert schema.column_names() == ["c?missing", "c=x", "c=y", "t", "t?missing"]
    X, _ = schema.encode([{"c": None, "t": False}, {"c": "y", "t": True}], grow=False)
    assert X.toarray().tolist() == [[1, 0, 0, 0, 0], [0, 0, 1, 1, 0]]


def test_ragged_rows_and_new_fields_widen_at_the_end():
    schema = FieldSchema()
    X1, g = schema.encode([{"a": 1.0}, {"b": "x", "a": 2.0}])
    schema.commit(g)
    X2, g = schema.encode([{"c": 3.0, "b": "y"}])
    schema.commit(g)
    assert schema.column_names() == ["a", "b=x", "c", "b=y"]
    assert X1.toarray().tolist() == [[1.0, 0.0], [2.0, 1.0]]
    assert X2.toarray().tolist() == [[0.0, 0.0, 3.0, 1.0]]


def test_vocabulary_is_bounded_and_overflow_goes_to_buckets():
    schema = FieldSchema(max_categories=50, bucket_bits=4)
    for start in range(0, 100_000, 10_000):
        X, g = schema.encode([{"user": f"u{i}"} for i in range(start, start + 10_000)])
        schema.commit(g)
        assert X.nnz == 10_000 and np.all(X.data == 1.0)
    f = schema.fields["user"]
    assert len(f.categories) == 50 and len(f.buckets) == 16
    assert schema.n_columns == 66
    # a value over the vocabulary lands in its MurmurHash3 bucket
    X, _ = schema.encode([{"user": "u99999"}], grow=False)
    bucket = murmurhash3_32("u99999", seed=0, positive=True) & 15
    assert X.indices.tolist() == [f.buckets[bucket]]
    assert schema.nbytes() < 20_000


def test_text_is_a_hashed_bag_of_words():
    schema = FieldSchema({"note": {"kind": "text"}}, hash_bits=10)
    X, g = schema.encode([{"note": "refund asked twice refund"}])
    schema.commit(g)
    f = schema.fields["note"]
    counts = {}
    for token in ["refund", "asked", "twice", "refund"]:
        b = murmurhash3_32(f"note^{token}", seed=0, positive=True) & 1023
        counts[f.buckets[b]] = counts.get(f.buckets[b], 0) + 1
    assert dict(zip(X.indices.tolist(), X.data.tolist())) == counts


def test_declared_categories_take_the_first_columns():
    schema = FieldSchema({"c": {"kind": "category", "categories": ["b", "a"]}, "n": {"kind": "number"}})
    assert schema.column_names() == ["c=b", "c=a", "n"]
    X, _ = schema.encode([{"c": "a", "n": 2}], grow=False)
    assert X.toarray().tolist() == [[0.0, 1.0, 2.0]]


@pytest.mark.parametrize(
    ("rows", "field"),
    [
        ([{"a": 1.0}, {"a": "x"}], "X[1].a"),
        ([{"a": 1.0}, {"a": True}], "X[1].a"),
        ([{"c": "x"}, {"c": 3}], "X[1].c"),
        ([{"c": "x"}, {"c": ["x"]}], "X[1].c"),
        ([{"a": 1.0}, {"c": "y" * 300}], "X[1].c"),
        ([{"a": 1.0}, {"n" * 200: 1.0}], "X[1]." + "n" * 40 + "..."),
        ([{"a": 1.0}, 3], "X[1]"),
    ],
)
def test_bad_values_name_the_field_and_change_nothing(rows, field):
    schema = FieldSchema()
    _, g = schema.encode([{"a": 0.5, "c": "z"}])
    schema.commit(g)
    before = schema.get_state()
    with pytest.raises(FieldError) as err:
        schema.encode(rows)
    assert err.value.field == field and str(err.value).startswith(field)
    assert schema.get_state() == before


def test_more_fields_than_allowed_is_refused():
    schema = FieldSchema(max_fields=3)
    with pytest.raises(FieldError, match=r"X\[1\]\.d: a new field"):
        schema.encode([{"a": 1, "b": 2, "c": 3}, {"d": 4}])
    assert schema.n_columns == 0


def test_state_round_trip_encodes_alike():
    rows, _ = events(200, seed=2)
    schema = FieldSchema(max_categories=3)
    X, g = schema.encode(rows)
    schema.commit(g)
    copy = FieldSchema.from_state(*schema.get_state())
    later, _ = events(50, seed=3)
    a, _ = schema.encode(later, grow=False)
    b, _ = copy.encode(later, grow=False)
    assert (a != b).nnz == 0 and a.shape == b.shape


# ---------------------------------------------------------------------- the service
def _settings(snap):
    return Settings(snapshot_dir=snap, snapshot_interval_s=3600, default_budget=40)


def test_named_fields_through_the_service(tmp_path):
    rows, y = events(1500, seed=4)
    test_rows, test_y = events(300, seed=5)
    with TestClient(create_app(_settings(tmp_path))) as c:
        r = c.put("/models/fraud", json={"budget": 100, "warmup": 200})
        assert r.status_code in (200, 201), r.text
        for lo in range(0, 1500, 250):
            r = c.post("/learn", json={"model": "fraud", "X": rows[lo : lo + 250], "y": y[lo : lo + 250]})
            assert r.status_code == 200, r.text
        c.post("/models/fraud/flush")
        info = c.get("/models/fraud").json()
        fields = {f["name"]: f for f in info["fields"]["fields"]}
        assert fields["country"]["kind"] == "category" and fields["country"]["categories"] == 6
        assert fields["age"]["missing_indicator"] and info["n_features"] == info["fields"]["n_columns"]
        pred = c.post("/predict", json={"model": "fraud", "X": test_rows}).json()
        accuracy = float(np.mean(np.asarray(pred["labels"]) == np.asarray(test_y)))
        assert accuracy > 0.8, accuracy  # SVC() on the one-hot encoding: see bench_fields
        # unknown fields and categories are ignored at prediction
        odd = c.post("/predict", json={"model": "fraud", "X": [{"amount": 10.0, "country": "XX", "new": 1}]})
        assert odd.status_code == 200, odd.text
        # bad input: a 4xx naming the field, nothing changes
        before = c.get("/models/fraud").json()
        bad = [dict(rows[0]), dict(rows[1], amount="12")]
        r = c.post("/learn", json={"model": "fraud", "X": bad, "y": y[:2]})
        assert r.status_code == 422 and r.json()["field"] == "X[1].amount", r.text
        r = c.post("/learn", json={"model": "fraud", "X": [[1.0, 2.0]], "y": ["ok"]})
        assert r.status_code == 422 and r.json()["field"] == "X[0]", r.text
        after = c.get("/models/fraud").json()
        assert after["version"] == before["version"] and after["fields"] == before["fields"]
        assert after["examples"] == before["examples"]
        ex = after["examples"]
        assert ex["received"] == ex["learned"] + ex["pending"] + ex["refused"] == 1500
        version = after["version"]
        c.post("/models/fraud/snapshot")
        live = np.asarray(pred["decision"])
        # MLflow scoring: dataframe_records are named fields for a model that has a schema
        params = {"model": "fraud", "output": "decision"}
        inv = c.post("/invocations", json={"dataframe_records": test_rows[:20], "params": params})
        assert inv.status_code == 200, inv.text
        same = c.post("/predict", json={"model": "fraud", "X": test_rows[:20]}).json()["decision"]
        assert np.max(np.abs(np.asarray(inv.json()["predictions"]) - np.asarray(same))) == 0.0
        inv = c.post("/invocations", json={"dataframe_records": [{"amount": "x"}], "params": params})
        assert inv.status_code == 400 and "X[0].amount" in inv.json()["message"], inv.text
        pinned = c.post("/predict", json={"model": "fraud", "X": test_rows, "version": version})
        assert pinned.status_code == 200, pinned.text
        assert np.max(np.abs(np.asarray(pinned.json()["decision"]) - live)) == 0.0
        # one more batch with a new category widens the model; the pinned version stays as it was
        more = [dict(r, country="CN") for r in rows[:100]]
        assert c.post("/learn", json={"model": "fraud", "X": more, "y": y[:100]}).status_code == 200
        pinned = c.post("/predict", json={"model": "fraud", "X": test_rows, "version": version}).json()
        assert np.max(np.abs(np.asarray(pinned["decision"]) - live)) == 0.0
        c.post("/models/fraud/snapshot")
        live2 = np.asarray(c.post("/predict", json={"model": "fraud", "X": test_rows}).json()["decision"])
    # a prediction replica installs the serving encoding of the newest snapshot
    newest = sorted((tmp_path / "fraud").glob("*.svmstate"))[-1]
    found = decode_serving(serving_blob(*decode_state(newest.read_bytes())))
    replica = Registry(_settings(tmp_path / "replica"))
    try:
        replica.install(found, follower_of="http://127.0.0.1:1")
        _, decision = replica.predict("fraud", test_rows)
        assert np.max(np.abs(decision - live2)) == 0.0
    finally:
        replica.close()
    with TestClient(create_app(_settings(tmp_path))) as c:  # a restart
        restarted = c.post("/predict", json={"model": "fraud", "X": test_rows}).json()
        assert np.max(np.abs(np.asarray(restarted["decision"]) - live2)) == 0.0
        assert c.get("/models/fraud").json()["fields"]["n_fields"] == 5


# ---------------------------------------------------------------------- Redis stream entries
def test_stream_entries_of_named_fields(redis_server, tmp_path):
    from tests.test_stream import n_seen, produce, stream_settings, streaming, unique, wait_for

    r = redis_server.client()
    name = unique("named")
    settings = stream_settings(tmp_path, redis_server.url)
    key, dead_key, _ = settings.stream_keys(name)
    rows, y = events(1200, seed=6)
    bad = [
        ({b"y": b'"ok"', b"x": b'{"amount": "12", "country": "DE"}'}, "x.amount: expected a number"),
        ({b"y": b'"ok"', b"x": b"[1.0, 2.0]"}, "x: this model learns named fields"),
        ({b"y": b'"ok"', b"x": orjson.dumps({"country": "D" * 300})}, "x.country: a category has at most"),
    ]
    entries, kinds = [], []
    for i, (row, label) in enumerate(zip(rows, y)):
        if i % 100 == 50:
            k = (i // 100) % len(bad)
            entries.append(bad[k][0])
            kinds.append(k)
        entries.append({b"y": orjson.dumps(label), b"x": orjson.dumps(row)})
        kinds.append(-1)
    config = {"budget": 60, "warmup": 200, "random_state": 0}
    with streaming(settings, name, config) as (registry, manager):
        produce(r, key, entries)
        wait_for(lambda: n_seen(registry, name) == len(rows), what="all good entries applied")
        info = registry.get(name).info()
        assert manager.consumers[name].dead_letters == sum(k >= 0 for k in kinds)
    reasons = sorted(d[b"reason"].decode() for _, d in r.xrange(dead_key))
    assert len(reasons) == sum(k >= 0 for k in kinds)
    for reason in reasons:
        assert any(reason.startswith(b[1]) for b in bad), reason
    assert info["fields"]["n_fields"] == 5
    ex = info["examples"]
    assert ex["received"] == len(entries) and ex["learned"] + ex["pending"] == len(rows)


# ---------------------------------------------------------------------- a schema declared in PUT
def test_a_schema_declared_in_put(tmp_path):
    """``PUT {"fields": ...}``: declared kinds and categories take the first columns, a declared
    text field is a hashed bag of words, undeclared fields are learned; a bad declaration is a
    422 naming ``fields.<name>`` and creates nothing; the declared schema survives a restart."""
    declared = {
        "country": {"kind": "category", "categories": ["US", "DE", "FR"]},
        "amount": {"kind": "number"},
        "note": {"kind": "text"},
    }
    rows = [
        {"amount": 10.0, "country": "FR", "note": "refund asked twice", "device": "ios"},
        {"amount": 99.5, "country": "JP", "note": "first order"},
    ] * 40
    y = ["ok", "fraud"] * 40
    with TestClient(create_app(_settings(tmp_path))) as c:
        r = c.put("/models/declared", json={"warmup": 10, "fields": declared})
        assert r.status_code == 201, r.text
        info = r.json()["fields"]
        by_name = {f["name"]: f for f in info["fields"]}
        assert by_name["country"]["declared"] and by_name["country"]["categories"] == 3
        assert by_name["note"]["kind"] == "text" and info["n_columns"] == 4
        r = c.post("/learn", json={"model": "declared", "X": [{"amount": "12"}], "y": ["ok"]})
        assert r.status_code == 422 and r.json()["field"] == "X[0].amount", r.text
        r = c.post("/learn", json={"model": "declared", "X": [[1.0, 2.0]], "y": ["ok"]})
        assert r.status_code == 422 and r.json()["field"] == "X[0]", r.text
        assert c.post("/learn", json={"model": "declared", "X": rows, "y": y}).status_code == 200
        info = c.get("/models/declared").json()
        names = [f["name"] for f in info["fields"]["fields"]]
        assert names[:3] == ["country", "amount", "note"] and "device" in names
        by_name = {f["name"]: f for f in info["fields"]["fields"]}
        assert by_name["note"]["hashed_buckets"] == 5 and by_name["country"]["categories"] == 4
        live = c.post("/predict", json={"model": "declared", "X": rows[:4]}).json()["decision"]
        c.post("/models/declared/snapshot")
        for bad, field in (
            ({"x": {"kind": "float"}}, "fields.x"),
            ({"x": {"kind": "number", "min": 0}}, "fields.x"),
            ({"x": {"kind": "category", "categories": [1]}}, "fields.x.categories"),
            ({"x": {"kind": "number", "categories": ["a"]}}, "fields.x.categories"),
            ({"x" * 200: {"kind": "number"}}, "fields." + "x" * 200),
            ({f"f{i}": {"kind": "number"} for i in range(300)}, "fields"),
        ):
            r = c.put("/models/baddecl", json={"fields": bad})
            assert r.status_code == 422 and r.json()["field"] == field, (bad, r.text)
            assert c.get("/models/baddecl").status_code == 404
    with TestClient(create_app(_settings(tmp_path))) as c:  # a restart keeps the declared schema
        info = c.get("/models/declared").json()["fields"]
        assert {f["name"]: f["declared"] for f in info["fields"]}["country"] is True
        again = c.post("/predict", json={"model": "declared", "X": rows[:4]}).json()["decision"]
        assert np.max(np.abs(np.asarray(again) - np.asarray(live))) == 0.0


def test_the_schema_bytes_count_in_max_model_bytes(tmp_path):
    """A batch of named fields is refused (413 naming X, nothing changes) when the model at the
    batch's width plus the schema's bytes would exceed ``max_model_bytes``, although the model
    alone would fit; with room for the schema too it is accepted."""
    from svmstream.app.models.limits import set_bytes

    config = {"budget": 20, "warmup": 10, "shuffle_buffer": 0, "rehearsal": 0, "run_guard": False}
    rows = [{"c": f"value-{i}"} for i in range(120)]  # 120 one-hot columns
    y = ["a", "b"] * 60
    schema = FieldSchema()
    _, growth = schema.encode(rows)
    schema_bytes = schema.nbytes(growth)
    with TestClient(create_app(_settings(tmp_path / "probe"))) as c:
        assert c.put("/models/m", json=config).status_code == 201
        model_bytes = set_bytes([c.app.state.registry.get("m").config], 120)
    for room, accepted in ((schema_bytes // 2, False), (schema_bytes + 64, True)):
        settings = Settings(
            snapshot_dir=tmp_path / f"s{room}", snapshot_interval_s=3600, max_model_bytes=model_bytes + room
        )
        with TestClient(create_app(settings)) as c:
            assert c.put("/models/m", json=config).status_code == 201, room
            r = c.post("/learn", json={"model": "m", "X": rows, "y": y})
            if accepted:
                assert r.status_code == 200, r.text
                assert c.get("/models/m").json()["fields"]["n_columns"] == 120
            else:
                assert r.status_code == 413 and r.json()["field"] == "X", r.text
                assert "schema" in r.json()["detail"]
                info = c.get("/models/m").json()
                assert info["fields"] is None and info["examples"]["received"] == 0


def test_a_field_of_many_distinct_values_stays_bounded_and_restores_exactly(tmp_path):
    """20,000 events whose ``user`` never repeats (the benchmark runs 10**6, bench_fields): the
    vocabulary stops at max_categories, the rest share the hashed buckets, and the decisions
    after a restart, on a replica and of a pinned version equal the live model's."""
    from benchmarks.bench_fields import user_events

    n, rng = 20_000, np.random.default_rng(1)
    probe = [{"user": f"new-{i}", "amount": float(i % 97), "shop": f"s{i % 40}"} for i in range(100)]
    settings = _settings(tmp_path)
    with TestClient(create_app(settings)) as c:
        assert c.put("/models/users", json={"budget": 50, "warmup": 500}).status_code == 201
        for lo in range(0, n, 5000):
            rows, y = user_events(lo, 5000, rng)
            body = orjson.dumps({"model": "users", "X": rows, "y": y})
            r = c.post("/learn", content=body, headers={"content-type": "application/json"})
            assert r.status_code == 200, r.text
        info = c.get("/models/users").json()
        user = next(f for f in info["fields"]["fields"] if f["name"] == "user")
        assert user["categories"] == 256 and 0 < user["hashed_buckets"] <= 64
        assert info["fields"]["n_columns"] <= 256 + 64 + 40 + 3
        assert info["examples"]["received"] == n
        live = np.asarray(c.post("/predict", json={"model": "users", "X": probe}).json()["decision"])
        version = info["version"]
        c.post("/models/users/snapshot")
        pinned = c.post("/predict", json={"model": "users", "X": probe, "version": version}).json()
        assert np.max(np.abs(np.asarray(pinned["decision"]) - live)) == 0.0
    newest = sorted((tmp_path / "users").glob("*.svmstate"))[-1]
    replica = Registry(_settings(tmp_path / "replica"))
    try:
        replica.install(
            decode_serving(serving_blob(*decode_state(newest.read_bytes()))), follower_of="http://127.0.0.1:1"
        )
        _, decision = replica.predict("users", probe)
        assert np.max(np.abs(decision - live)) == 0.0
    finally:
        replica.close()
    with TestClient(create_app(settings)) as c:
        restarted = c.post("/predict", json={"model": "users", "X": probe}).json()["decision"]
        assert np.max(np.abs(np.asarray(restarted) - live)) == 0.0


def test_feedback_learns_the_stored_rows_of_named_fields(tmp_path):
    """``/predict`` with ``remember`` on a model of named fields stores the rows in the schema's
    columns; ``/feedback`` learns them exactly as ``/learn`` learns the same named rows."""
    rows, y = events(700, seed=9)
    with TestClient(create_app(_settings(tmp_path))) as c:
        for name in ("fbn", "refn"):
            assert c.put(f"/models/{name}", json={"budget": 40, "warmup": 100}).status_code == 201
            assert c.post("/learn", json={"model": name, "X": rows[:300], "y": y[:300]}).status_code == 200
        ids = c.post("/predict", json={"model": "fbn", "X": rows[300:600], "remember": True}).json()["ids"]
        for lo in range(300, 600, 100):
            r = c.post(
                "/feedback", json={"model": "fbn", "ids": ids[lo - 300 : lo - 200], "y": y[lo : lo + 100]}
            )
            assert r.status_code == 200 and r.json()["learned"] == 100, r.text
            assert (
                c.post(
                    "/learn", json={"model": "refn", "X": rows[lo : lo + 100], "y": y[lo : lo + 100]}
                ).status_code
                == 200
            )
        a = c.post("/predict", json={"model": "fbn", "X": rows[600:]}).json()["decision"]
        b = c.post("/predict", json={"model": "refn", "X": rows[600:]}).json()["decision"]
        assert np.max(np.abs(np.asarray(a) - np.asarray(b))) == 0.0
        ex = c.get("/models/fbn").json()["examples"]
        assert ex["received"] == 600 == ex["learned"] + ex["pending"] + ex["refused"]


def test_oip_v2_bytes_input_of_named_fields(tmp_path):
    """OIP v2 ``/v2/models/{name}/infer``: a BYTES input of JSON objects, as JSON data or in
    Triton's binary layout, answers the decisions ``/predict`` gives for the same named rows;
    a bad element is a 400 naming it."""
    rows, y = events(600, seed=11)
    probe = rows[500:520]
    with TestClient(create_app(_settings(tmp_path))) as c:
        assert c.put("/models/oip", json={"budget": 40, "warmup": 100}).status_code == 201
        assert c.post("/learn", json={"model": "oip", "X": rows[:500], "y": y[:500]}).status_code == 200
        same = np.asarray(c.post("/predict", json={"model": "oip", "X": probe}).json()["decision"])
        texts = [orjson.dumps(r).decode() for r in probe]
        body = {
            "inputs": [{"name": "events", "shape": [len(probe)], "datatype": "BYTES", "data": texts}],
            "outputs": [{"name": "decision"}],
        }
        r = c.post("/v2/models/oip/infer", json=body)
        assert r.status_code == 200, r.text
        decision = np.asarray(r.json()["outputs"][0]["data"])
        assert np.max(np.abs(decision - same)) == 0.0
        raw = b"".join(len(t.encode()).to_bytes(4, "little") + t.encode() for t in texts)
        head = orjson.dumps({
            "inputs": [{"name": "events", "shape": [len(probe), 1], "datatype": "BYTES",
                        "parameters": {"binary_data_size": len(raw)}}],
            "outputs": [{"name": "decision"}],
        })  # fmt: skip
        r = c.post(
            "/v2/models/oip/infer",
            content=head + raw,
            headers={
                "content-type": "application/octet-stream",
                "Inference-Header-Content-Length": str(len(head)),
            },
        )
        assert r.status_code == 200, r.text
        assert np.max(np.abs(np.asarray(r.json()["outputs"][0]["data"]) - same)) == 0.0
        body["inputs"][0]["data"] = [texts[0], "[1, 2]"]
        body["inputs"][0]["shape"] = [2]
        r = c.post("/v2/models/oip/infer", json=body)
        assert r.status_code == 400 and "inputs[0].data[1]" in r.text, r.text


# ---------------------------------------------------------------------- svmstream replay of named events
@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_replay_of_a_csv_with_a_header_or_json_lines(start_server, tmp_path, kind):
    """``svmstream replay events.csv|events.jsonl --label status --weight w`` sends named-field
    JSON to /learn: the same model as /learn of the same rows in the same order (CSV cells:
    numbers, empty = missing, strings = categories)."""
    import csv

    from tests.conftest import run_cli

    rows, y = events(400, seed=12)
    w = [1.0 + (i % 3) for i in range(400)]
    path = tmp_path / f"events.{kind}"
    names = sorted({k for r in rows for k in r})
    if kind == "csv":
        with path.open("w", newline="") as f:
            out = csv.writer(f)
            out.writerow([*names, "status", "w"])
            for r, label, wi in zip(rows, y, w):
                out.writerow(
                    [
                        *(
                            "" if r.get(k) is None else str(r[k]).lower() if isinstance(r[k], bool) else r[k]
                            for k in names
                        ),
                        label,
                        wi,
                    ]
                )
        sent = [{k: r.get(k) for k in names} for r in rows]  # a CSV row has every column
    else:
        path.write_bytes(
            b"".join(
                orjson.dumps({**r, "status": label, "w": wi}) + b"\n" for r, label, wi in zip(rows, y, w)
            )
        )
        sent = rows
    server = start_server()
    out = run_cli(
        ["replay", str(path), "--url", server.url, "--model", "rp", "--label", "status", "--weight", "w",
         "--file-order", "--budget", "40", "--warmup", "100", "--no-progress", "--json"],
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    with server.client() as c:
        assert c.put("/models/ref", json={"budget": 40, "warmup": 100}).status_code == 201
        for lo in range(0, 400, 1000):
            r = c.post(
                "/learn",
                json={
                    "model": "ref",
                    "X": sent[lo : lo + 1000],
                    "y": y[lo : lo + 1000],
                    "w": w[lo : lo + 1000],
                },
            )
            assert r.status_code == 200, r.text
        c.post("/models/ref/flush")
        a = c.post("/predict", json={"model": "rp", "X": rows[:50]}).json()["decision"]
        b = c.post("/predict", json={"model": "ref", "X": rows[:50]}).json()["decision"]
        assert np.max(np.abs(np.asarray(a) - np.asarray(b))) == 0.0
        assert c.get("/models/rp").json()["examples"]["received"] == 400
