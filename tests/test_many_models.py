"""Many models in one service: what an idle model holds, lazy restore, dirty-only
snapshots.

The buffers of a model (shuffle buffer, run-guard reservoirs, calibration window, prequential
window) grow with the rows it has received instead of being allocated whole; the tests check
that the grown arrays give exactly the model that whole arrays gave, and that an idle model
holds only its rows.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from svmstream.app.models.meters import PrequentialWindow
from svmstream.solvers import BudgetedSGDClassifier, StreamingClassifier
from svmstream.solvers.budgeted._sparse_rows import grow_rows
from svmstream.solvers.calibration import MarginCalibrator
from svmstream.solvers.online.stages import OrderStage
from tests.conftest import wait_for


def _stream(n, d=6, seed=0, sorted_labels=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 3.0
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
    if sorted_labels:
        order = np.argsort(y, kind="stable")
        X, y = X[order], y[order]
    return X, y


def _whole(pp: OrderStage) -> None:
    """Give an order stage its arrays at full capacity (what it allocated before they grew)."""
    pp.buf_X = grow_rows(pp.buf_X, pp.capacity, pp.capacity)
    pp.buf_y = grow_rows(pp.buf_y, pp.capacity, pp.capacity)
    pp.buf_w = grow_rows(pp.buf_w, pp.capacity, pp.capacity)
    pp.res_X = grow_rows(pp.res_X, pp.res_capacity, pp.res_capacity, axis=1)


def test_grow_rows_doubles_up_to_the_limit_and_keeps_rows():
    a = np.arange(6.0).reshape(3, 2)
    assert grow_rows(a, 2, 100) is a
    b = grow_rows(a, 4, 100)
    assert b.shape == (6, 2) and np.array_equal(b[:3], a) and not b[3:].any()
    assert grow_rows(a, 50, 10).shape == (10, 2)
    c = grow_rows(np.ones((2, 3, 4)), 5, 7, axis=1)
    assert c.shape == (2, 6, 4) and c[:, :3].all() and not c[:, 3:].any()


def test_an_idle_model_holds_only_the_rows_it_received():
    X, y = _stream(20)
    est = StreamingClassifier(BudgetedSGDClassifier(random_state=0)).partial_fit(X, y, classes=[0, 1])
    pp = est._order
    assert pp.capacity == 20_000 and pp.res_capacity == 200  # the configured K and R
    assert pp.buf_X.shape[0] == 0 and pp.res_X.shape[1] == 0  # warm-up window open: nothing held
    assert est.calibrator_._margins.shape[0] == 0
    assert est.model_._sv_t.size == 0 and est.model_._coef.shape == (
        0,
        1,
    )  # no support vector before learning
    # past the window, the buffer holds what arrived, not K rows
    X2, y2 = _stream(1100, seed=1)
    est.partial_fit(X2, y2)
    m = int(pp.state[0])
    assert 0 < m <= pp.buf_X.shape[0] <= 2 * m and pp.buf_X.shape[0] < pp.capacity
    assert est.model_._sv_t.shape == (6, est.estimator.budget + 1)


@pytest.mark.parametrize("sorted_labels", [False, True])
# 200: the sorted runs outlast the buffer, so the run guard replays (300 did only while a drift
# detection dropped the buffer's rows)
@pytest.mark.parametrize("shuffle_buffer", [200, 20_000])
def test_grown_arrays_learn_exactly_what_whole_arrays_learn(sorted_labels, shuffle_buffer):
    """Same stream, same seed: one model's buffer and reservoirs grow, the other's are
    allocated whole before the first row; every decision value is equal to the last bit."""
    X, y = _stream(6000, seed=2, sorted_labels=sorted_labels)

    def make():
        plain = BudgetedSGDClassifier(random_state=3, budget=50)
        return StreamingClassifier(plain, warmup=200, shuffle_buffer=shuffle_buffer)

    grown, whole = make(), make()
    sizes = [1, 7, 150, 333, 1000]
    start, b = 0, 0
    while start < X.shape[0]:
        stop = min(X.shape[0], start + sizes[b % len(sizes)])
        for est in (grown, whole):
            est.partial_fit(X[start:stop], y[start:stop], classes=[0, 1])
            if est is whole and not est.warming_up_:
                _whole(est._order)
        start, b = stop, b + 1
    assert whole._order.buf_X.shape[0] == whole._order.capacity
    if sorted_labels and shuffle_buffer < 1000:
        assert grown.n_replayed_ > 0  # the run guard fired: reservoirs were used
    probe = _stream(500, seed=9)[0]
    np.testing.assert_array_equal(grown.decision_function(probe), whole.decision_function(probe))
    a_grown, _ = grown.get_state()
    a_whole, _ = whole.get_state()
    assert a_grown.keys() == a_whole.keys()
    for key in a_grown:
        np.testing.assert_array_equal(a_grown[key], a_whole[key], err_msg=key)
    grown.flush()
    whole.flush()
    np.testing.assert_array_equal(grown.decision_function(probe), whole.decision_function(probe))


def test_calibrator_window_grows_and_refits_as_a_whole_window():
    rng = np.random.default_rng(0)
    f = rng.normal(size=5000) * 2
    y = (f + rng.normal(size=5000) > 0).astype(np.int64)
    grown = MarginCalibrator(2)
    whole = MarginCalibrator(2)
    whole._margins, whole._y = np.zeros(whole.window), np.zeros(whole.window, dtype=np.int64)
    for lo in range(0, 5000, 37):
        grown.update(f[lo : lo + 37], y[lo : lo + 37])
        whole.update(f[lo : lo + 37], y[lo : lo + 37])
        assert grown.slope_ == whole.slope_
        assert grown._margins.shape[0] <= min(grown.window, 2 * grown.n_seen_)
    assert grown._margins.shape[0] == grown.window
    small = MarginCalibrator(3)
    small.update(rng.normal(size=(10, 3)), np.arange(10) % 3)
    assert small._margins.shape == (10, 3)
    small.add_class()
    assert small._margins.shape == (10, 4)
    again = MarginCalibrator.from_state(*small.get_state())
    assert again._margins.shape == (10, 4) and again.n_seen_ == 10


def test_prequential_window_grows_and_wraps_as_a_ring():
    grown, n, rng = PrequentialWindow(1000), 0, np.random.default_rng(1)
    outcomes = rng.random(5000) < 0.7
    for size in [3, 1, 250, 999, 1000, 1001, 17] * 2:
        part = outcomes[n : n + size]
        grown.add(part)
        n += size
        seen = outcomes[:n][-1000:]
        assert grown.count() == seen.shape[0]
        assert grown.accuracy() == pytest.approx(seen.mean(), abs=1e-12)
    assert PrequentialWindow(10_000)._buf.nbytes == 0


# ---------------------------------------------------------------------------- lazy restore
def _teach_models(registry, names, seed=0, rows=300, config=None):
    """Create each model with a small warm-up (so that it predicts; ``config``: these settings
    instead) and teach it one batch of raw rows with string labels, as ``POST /learn`` does."""
    rng = np.random.default_rng(seed)
    for name in names:
        registry.create(name, registry.resolve_config(config or {"warmup": 100, "budget": 30}))
        X = rng.normal(size=(rows, 6)) * 40.0 + 5.0
        labels = np.where(X[:, 0] + 0.3 * X[:, 1] > 5.0, "churn", "stay").tolist()
        handle = registry.get(name)
        y, new = handle.codec.encode_with_new(labels)
        registry.learn(name, X, y, new_labels=new).result()


def _registry(snap: Path, **settings):
    from svmstream.app.models.registry import Registry
    from svmstream.app.models.snapshots import SnapshotStore
    from svmstream.app.settings import Settings

    return Registry(Settings(snapshot_dir=snap, **settings), SnapshotStore(snap))


def test_restore_registers_from_headers_and_decodes_once_on_first_use(tmp_path):
    snap = tmp_path / "snap"
    names = [f"customer-{k:02d}" for k in range(12)]
    first = _registry(snap)
    _teach_models(first, names)
    assert len(first.snapshot_changed()) == len(names)
    probe = np.random.default_rng(5).normal(size=(50, 6)) * 40.0 + 5.0
    before = {name: first.predict(name, probe)[1] for name in names}
    infos = {name: first.get(name).info() for name in names}
    first.close()

    second = _registry(snap)
    reads = []
    read = second.store.read

    def counting_read(path):
        reads.append(path)
        return read(path)

    second.store.read = counting_read
    assert sorted(second.restore()) == names
    assert not any(second.get(name).loaded for name in names)
    # listing and details come from the headers: nothing decoded
    for name in names:
        info = second.get(name).info()
        assert {k: v for k, v in info.items() if k != "metrics"} == {
            k: v for k, v in infos[name].items() if k != "metrics"
        }
    assert reads == [] and second.snapshot_changed() == []  # untouched: nothing rewritten

    # eight threads predict on one model that is not decoded yet: one decode, same decisions
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: second.predict(names[3], probe)[1], range(8)))
    assert len(reads) == 1 and second.get(names[3]).loaded
    for answer in answers:
        np.testing.assert_array_equal(answer, before[names[3]])
    for name in names[4:]:
        assert not second.get(name).loaded

    # learning decodes first and goes on from the restored state
    version = second.get(names[5]).view.version
    rng = np.random.default_rng(9)
    X = rng.normal(size=(40, 6)) * 40.0 + 5.0
    y, new = second.get(names[5]).codec.encode_with_new(["stay"] * 40)
    view = second.learn(names[5], X, y, new_labels=new).result()
    assert view.version == version + 1 and view.stats["n_seen"] == infos[names[5]]["n_seen"] + 40
    written = second.snapshot_changed()
    assert [Path(p).parent.name for p in written] == [names[5]]  # only the model that learned
    for name in names[6:]:
        assert not second.get(name).loaded
        np.testing.assert_array_equal(second.predict(name, probe)[1], before[name])
    second.close()


def test_a_file_without_saved_figures_is_decoded_at_restore(tmp_path):
    from svmstream.solvers.persistence import decode_state, encode_state

    snap = tmp_path / "snap"
    first = _registry(snap)
    _teach_models(first, ["old"])
    first.snapshot_changed()
    probe = np.ones((3, 6))
    before = first.predict("old", probe)[1]
    first.close()
    # rewrite the newest file as a service that saved no figures wrote it
    path = first.store.files("old")[0][1]
    arrays, meta = decode_state(path.read_bytes())
    del meta["service"]["stats"]
    path.write_bytes(encode_state(arrays, meta))
    second = _registry(snap)
    second.restore()
    assert second.get("old").loaded
    np.testing.assert_array_equal(second.predict("old", probe)[1], before)
    second.close()


def test_a_snapshot_that_no_longer_decodes_falls_back_to_the_older_one(tmp_path):
    from svmstream.solvers.persistence import decode_state, encode_state

    snap = tmp_path / "snap"
    first = _registry(snap)
    _teach_models(first, ["m"])
    first.snapshot_changed()  # version 1 (the model was created at version 0)
    probe = np.ones((3, 6))
    before = first.predict("m", probe)[1]
    first.close()
    newest = first.store.files("m")[0][1]
    arrays, meta = decode_state(newest.read_bytes())
    older = {**meta, "service": {**meta["service"], "version": 1}}
    # the header and checksum are sound, but the arrays do not rebuild a model
    newest_seq = int(newest.name.split("-")[-1].split(".")[0])
    (snap / "m" / f"m-{newest_seq + 1:012d}.svmstate").write_bytes(
        encode_state({k: v for k, v in arrays.items() if k != "coef"}, older)
    )
    second = _registry(snap)
    second.restore()
    assert not second.get("m").loaded
    np.testing.assert_array_equal(second.predict("m", probe)[1], before)
    assert second.get("m").view.version == 1
    second.close()


def test_many_models_restart_lazily_through_a_real_server(start_server, tmp_path):
    """40 models through HTTP, SIGTERM, restart: every model is listed at once, one predicts
    exactly as before and keeps learning, and the second SIGTERM rewrites only that one."""
    snap = tmp_path / "snap"
    env = {"SVMSTREAM_SNAPSHOT_INTERVAL_S": "3600"}
    server = start_server(snap, env=env)
    rng = np.random.default_rng(0)
    names = [f"customer-{k:03d}" for k in range(40)]
    probe = (rng.normal(size=(30, 6)) * 40.0 + 5.0).tolist()
    before = {}
    with server.client() as c:
        for name in names:
            assert c.put(f"/models/{name}", json={"warmup": 100, "budget": 30}).status_code == 201
            X = rng.normal(size=(300, 6)) * 40.0 + 5.0
            y = np.where(X[:, 0] + 0.3 * X[:, 1] > 5.0, "churn", "stay").tolist()
            assert c.post("/learn", json={"model": name, "X": X.tolist(), "y": y}).status_code == 200
        for name in names[:3]:
            before[name] = c.post("/predict", json={"model": name, "X": probe}).json()
        info_before = c.get(f"/models/{names[1]}").json()
    server.terminate()
    assert "final snapshots: [" in server.log_text()

    server = start_server(snap, env=env)
    with server.client() as c:
        listed = {m["name"]: m for m in c.get("/models").json()["models"]}
        assert set(names) <= set(listed)
        assert listed[names[1]]["n_seen"] == info_before["n_seen"] == 300
        assert listed[names[1]]["version"] == info_before["version"]
        for name in names[:3]:
            after = c.post("/predict", json={"model": name, "X": probe}).json()
            assert after["decision"] == before[name]["decision"]  # bit-identical floats
            assert after["labels"] == before[name]["labels"]
        X = rng.normal(size=(50, 6)) * 40.0 + 5.0
        y = np.where(X[:, 0] + 0.3 * X[:, 1] > 5.0, "churn", "stay").tolist()
        r = c.post("/learn", json={"model": names[1], "X": X.tolist(), "y": y}).json()
        assert r["n_seen"] == 350 and r["version"] == info_before["version"] + 1
        assert c.get("/metrics").status_code == 200
    log = server.log_text()
    assert f"decoded from {snap / names[0]}" in log and f"decoded from {snap / names[3]}" not in log
    server.terminate()
    final = server.log_text().split("final snapshots: ")[-1].splitlines()[0]
    assert names[1] in final and names[0] not in final and names[2] not in final, final


# ---------------------------------------------------------------------------- parking
def _state(handle):
    arrays, meta = handle._est.get_state()
    return {k: np.array(v, copy=True) for k, v in arrays.items()}, meta


@pytest.mark.parametrize("config", [None, {"selection": True, "warmup": 100, "budget": 30}])
def test_parked_models_predict_and_learn_exactly_as_models_never_parked(tmp_path, config):
    """Two registries taught the same models; one keeps at most 2 decoded: the others are
    snapshotted and parked (estimator dropped), predict the same decisions, decode on use,
    learn on to the very same state as their never-parked twins, and are parked again (plain
    pipelines, and selectors racing candidates: ``docs/selection.md``)."""
    names = [f"m{k}" for k in range(6)]
    parking = _registry(tmp_path / "a", max_loaded_models=2, park_idle_s=0)
    twin = _registry(tmp_path / "b", max_loaded_models=0)
    for registry in (parking, twin):
        _teach_models(registry, names, config=config)
    probe = np.random.default_rng(5).normal(size=(50, 6)) * 40.0 + 5.0
    for k, name in enumerate(names):  # m5 is the most recently used
        parking.get(name).last_used = float(k)
    assert twin.park_idle() == 0 and all(twin.get(n).loaded for n in names)
    assert parking.park_idle(now=100.0) == 4
    assert [parking.get(n).loaded for n in names] == [False] * 4 + [True] * 2
    for name in names[:4]:  # the newest snapshot holds exactly the published version
        handle = parking.get(name)
        assert handle._est is None and handle.saved_version == handle.view.version
        assert handle.info() | {"metrics": None, "last_snapshot_time": None, "last_snapshot_path": None} == (
            twin.get(name).info() | {"metrics": None, "last_snapshot_time": None, "last_snapshot_path": None}
        )
    written = parking.snapshot_changed()  # parked models are saved already: only m4, m5
    assert sorted(Path(p).parent.name for p in written) == names[4:]
    for name in names:
        np.testing.assert_array_equal(parking.predict(name, probe)[1], twin.predict(name, probe)[1])
    assert parking.get(names[0]).loaded  # decoded by the prediction

    rng = np.random.default_rng(11)
    X = rng.normal(size=(400, 6)) * 40.0 + 5.0
    labels = np.where(X[:, 0] - 0.2 * X[:, 2] > 5.0, "churn", "stay").tolist()
    parking.park_idle(now=1e9)
    assert not parking.get(names[1]).loaded
    for registry in (parking, twin):  # a parked model learns: decoded first
        handle = registry.get(names[1])
        y, new = handle.codec.encode_with_new(labels)
        registry.learn(names[1], X, y, new_labels=new).result()
    a, b = parking.get(names[1]), twin.get(names[1])
    assert a.view.version == b.view.version and a.view.stats == b.view.stats
    (arrays_a, meta_a), (arrays_b, meta_b) = _state(a), _state(b)
    assert meta_a == meta_b and arrays_a.keys() == arrays_b.keys()
    for key in arrays_a:
        np.testing.assert_array_equal(arrays_a[key], arrays_b[key])
    np.testing.assert_array_equal(parking.predict(names[1], probe)[1], twin.predict(names[1], probe)[1])
    # what it learned is snapshotted before it is parked again
    a.last_used = 0.0
    assert parking.park_idle(now=1e9) >= 1 and not a.loaded and a.saved_version == a.view.version
    np.testing.assert_array_equal(parking.predict(names[1], probe)[1], twin.predict(names[1], probe)[1])
    parking.close()
    twin.snapshot_changed()
    twin.close()

    # a restart restores what parking saved
    again = _registry(tmp_path / "a")
    again.restore()
    twin = _registry(tmp_path / "b")
    twin.restore()
    for name in names:
        np.testing.assert_array_equal(again.predict(name, probe)[1], twin.predict(name, probe)[1])
    again.close()
    twin.close()


def test_parking_never_drops_what_no_snapshot_holds(tmp_path):
    """A model with a batch in progress, or whose snapshot failed, stays decoded with what it
    learned; recently used models and replicas' models are not parked."""
    import threading

    registry = _registry(tmp_path / "snap", max_loaded_models=1, park_idle_s=0)
    names = ["busy", "failing", "recent", "idle"]
    _teach_models(registry, names)
    for k, name in enumerate(names):
        registry.get(name).last_used = float(k)
    registry.get("recent").last_used = 1e9

    # a batch whose step waits: the model has work pending while park_idle runs
    busy = registry.get("busy")
    started, release = threading.Event(), threading.Event()

    def slow_step(est):
        started.set()
        release.wait(10)
        est.flush()

    with busy._lock:
        future = busy._queue(busy._learn_step, slow_step, None, 0)
    assert started.wait(10)
    # the snapshot of 'failing' cannot be written
    write = registry.store.write

    def failing_write(name, *args, **kwargs):
        if name == "failing":
            raise OSError("disk full")
        return write(name, *args, **kwargs)

    registry.store.write = failing_write
    failing = registry.get("failing")
    failing.submit_flush().result()  # a change since its last snapshot
    failing.last_used = 1.0
    assert failing.saved_version < failing.view.version

    assert registry.park_idle(now=100.0) == 1  # only 'idle'
    assert not registry.get("idle").loaded
    assert busy.loaded and busy._est is not None
    assert failing.loaded and failing._est is not None and failing.snapshot_failures == 1
    assert registry.get("recent").loaded
    # parking directly is refused too
    assert not busy.park(lambda path: None) and not failing.park(lambda path: None)
    release.set()
    future.result()
    assert busy.saved_version < busy.view.version  # learned since: a snapshot first
    busy.last_used = failing.last_used = 0.0
    registry.store.write = write
    # a failed snapshot is retried after snapshot_interval_s (30 s), not at every look
    assert registry.park_idle(now=120.0) == 1 and failing.loaded and not busy.loaded
    assert registry.park_idle(now=200.0) == 1
    assert not busy.loaded and not failing.loaded
    assert busy.saved_version == busy.view.version and failing.saved_version == failing.view.version
    registry.close()


def test_a_service_parks_idle_models_and_restarts_from_their_snapshots(start_server, tmp_path):
    """A real server keeping 2 models decoded: the others are parked (logged), predict the
    same, and SIGTERM has nothing left to write for them."""
    snap = tmp_path / "snap"
    env = {
        "SVMSTREAM_SNAPSHOT_INTERVAL_S": "3600",
        "SVMSTREAM_MAX_LOADED_MODELS": "2",
        "SVMSTREAM_PARK_IDLE_S": "0",
        "SVMSTREAM_CREATE_DEFAULT_MODEL": "false",
    }
    server = start_server(snap, env=env)
    rng = np.random.default_rng(0)
    names = [f"c{k}" for k in range(6)]
    probe = (rng.normal(size=(20, 6)) * 40.0 + 5.0).tolist()
    with server.client() as c:
        for name in names:
            assert c.put(f"/models/{name}", json={"warmup": 50, "budget": 20}).status_code == 201
            X = rng.normal(size=(120, 6)) * 40.0 + 5.0
            y = np.where(X[:, 0] > 5.0, "churn", "stay").tolist()
            assert c.post("/learn", json={"model": name, "X": X.tolist(), "y": y}).status_code == 200
        before = {name: c.post("/predict", json={"model": name, "X": probe}).json() for name in names}
        # every model beyond the 2 decoded ones parked (a model still learning is parked by a
        # later pass: under load the first pass may park fewer)
        wait_for(
            lambda: _parked_total(server.log_text()) >= len(names) - 2, timeout=120, what="4 models parked"
        )
        listed = {m["name"]: m for m in c.get("/models").json()["models"]}
        assert all(listed[name]["version"] == 1 for name in names)
        for name in names:
            assert c.post("/predict", json={"model": name, "X": probe}).json() == before[name]
    assert "parked" in server.log_text()
    server.terminate()
    final = server.log_text().split("final snapshots: ")[-1].splitlines()[0]
    assert sum(name in final for name in names) <= 2, final  # at most the decoded ones


def _parked_total(log_text: str) -> int:
    """How many models the server's log says it parked, over all its parking passes."""
    return sum(int(n) for n in re.findall(r"parked (\d+) idle models", log_text))


def test_recent_values_keep_the_last_ones():
    from svmstream.app.models.meters import RecentValues

    ring = RecentValues(4)
    assert len(ring) == 0 and list(ring) == []
    for v in range(1, 4):
        ring.append(float(v))
    assert sorted(ring) == [1.0, 2.0, 3.0]
    for v in range(4, 11):
        ring.append(float(v))
    assert len(ring) == 4 and sorted(ring) == [7.0, 8.0, 9.0, 10.0]


def test_models_with_the_same_labels_share_one_codec_and_grow_their_own(tmp_path):
    """Codecs are never changed once made, so equal label lists share one object; a model
    that learns a new label gets a new codec, the others keep theirs."""
    registry = _registry(tmp_path / "snap")
    for name in ("a", "b"):  # the same rows: the labels come in the same order
        _teach_models(registry, [name], seed=0)
    a, b = registry.get("a"), registry.get("b")
    assert a.codec is b.codec and a.codec.public_classes == ["churn", "stay"]
    X = np.ones((3, 6))
    y, new = a.codec.encode_with_new(["gone", "stay", "gone"])
    registry.learn("a", X, y, new_labels=new).result()
    assert a.codec.public_classes == ["churn", "gone", "stay"] and a.codec is not b.codec
    assert b.codec.public_classes == ["churn", "stay"] and b.view.codec is b.codec
    registry.close()


def test_release_free_memory_gives_freed_heap_pages_back():
    """malloc_trim(0) after bulk work: on glibc the freed memory of many small blocks that
    malloc kept goes back to the system (RSS drops); elsewhere it is a no-op."""
    import platform

    import psutil

    from svmstream.app.models import memory

    if memory._TRIM is None:
        assert platform.libc_ver()[0] != "glibc"
        assert memory.release_free_memory() is False
        return
    proc = psutil.Process()
    memory.release_free_memory()
    blocks = [bytearray(4000) for _ in range(50_000)]  # ~200 MB of malloc'd blocks below mmap size
    keep = blocks[::500]  # a few stay alive, pinning the heap's top
    del blocks
    before = proc.memory_info().rss
    assert memory.release_free_memory() is True
    assert proc.memory_info().rss < before - 100 * 2**20
    del keep


def test_parking_with_no_settings_and_label_sorted_raw_data_learns_as_without_parking(start_server, tmp_path):
    """Users' data through two real servers, one parking every idle model (at most 1 decoded),
    one never parking: models created with no settings, raw unscaled rows sorted by their
    string label, taught in two batches with the models parked in between.  Every answer of
    the parking server equals the other's exactly, and its models beat the majority rate."""
    rng = np.random.default_rng(7)
    n, d = 1500, 5

    def sorted_batch():
        X = rng.normal(size=(n, d)) * np.array([300.0, 0.02, 5.0, 1e4, 1.0]) + 50.0
        y = np.where(X[:, 0] / 300.0 + X[:, 2] / 5.0 > 50.0 / 300.0 + 10.0, "fraud", "ok")
        order = np.argsort(y, kind="stable")  # label-sorted, as LIBSVM files often are
        return X[order].tolist(), y[order].tolist()

    batches = [sorted_batch(), sorted_batch()]
    probe_X = rng.normal(size=(400, d)) * np.array([300.0, 0.02, 5.0, 1e4, 1.0]) + 50.0
    probe_y = np.where(probe_X[:, 0] / 300.0 + probe_X[:, 2] / 5.0 > 50.0 / 300.0 + 10.0, "fraud", "ok")
    names = ["a", "b", "c"]
    common = {"SVMSTREAM_SNAPSHOT_INTERVAL_S": "3600", "SVMSTREAM_CREATE_DEFAULT_MODEL": "false"}
    parking = start_server(
        tmp_path / "parking", env={**common, "SVMSTREAM_MAX_LOADED_MODELS": "1", "SVMSTREAM_PARK_IDLE_S": "0"}
    )
    plain = start_server(tmp_path / "plain", env={**common, "SVMSTREAM_MAX_LOADED_MODELS": "0"})
    answers = {}
    for server in (parking, plain):
        with server.client() as c:
            for name in names:
                assert c.put(f"/models/{name}", json={}).status_code == 201
                X, y = batches[0]
                assert c.post("/learn", json={"model": name, "X": X, "y": y}).status_code == 200
            if server is parking:
                deadline = time.monotonic() + 30
                while "parked" not in server.log_text() and time.monotonic() < deadline:
                    time.sleep(0.2)
                assert "parked" in server.log_text()
            for name in names:
                X, y = batches[1]
                assert c.post("/learn", json={"model": name, "X": X, "y": y}).status_code == 200
                assert c.post(f"/models/{name}/flush").status_code == 200
            answers[server is parking] = {
                name: c.post("/predict", json={"model": name, "X": probe_X.tolist()}).json() for name in names
            }
    for name in names:
        parked, never = answers[True][name], answers[False][name]
        assert parked["decision"] == never["decision"]
        assert parked["labels"] == never["labels"]
        accuracy = np.mean(np.asarray(parked["labels"]) == probe_y)
        assert accuracy > max(np.mean(probe_y == "ok"), np.mean(probe_y == "fraud")) + 0.05, accuracy
