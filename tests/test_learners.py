"""Learner threads shared by all models: order per model, one writer per
model, models take turns, bounded threads however many models learn."""

from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np
import pytest

from svmstream.app.models.config import ModelConfig
from svmstream.app.models.learners import LearnerPool
from svmstream.app.models.registry import Registry
from svmstream.app.settings import Settings
from tests.conftest import two_moons_like


def test_tasks_of_a_model_run_in_order_one_at_a_time_and_models_run_in_parallel():
    pool = LearnerPool(4)
    queues = [pool.queue(f"m{k}") for k in range(20)]
    seen = {k: [] for k in range(20)}
    running = dict.fromkeys(range(20), 0)
    overlap = []
    concurrent_models = set()
    active = [0]
    lock = threading.Lock()

    def task(k, i):
        with lock:
            running[k] += 1
            active[0] += 1
            concurrent_models.add(active[0])
            if running[k] > 1:
                overlap.append(k)
        time.sleep(0.001)
        with lock:
            seen[k].append(i)
            running[k] -= 1
            active[0] -= 1
        return i

    futures = []
    for i in range(30):  # interleaved submissions from one thread...
        for k, q in enumerate(queues):
            futures.append(q.submit(task, k, i))
    assert [f.result(timeout=30) for f in futures] == [i for i in range(30) for _ in range(20)]
    assert all(seen[k] == list(range(30)) for k in range(20))
    assert overlap == [], "two tasks of one model ran at the same time"
    assert max(concurrent_models) > 1, "models never learned in parallel"
    assert max(concurrent_models) <= 4
    pool.shutdown()


def test_a_busy_model_does_not_starve_the_others():
    pool = LearnerPool(1)
    busy, other = pool.queue("busy"), pool.queue("other")
    order = []
    gate = threading.Event()
    busy.submit(gate.wait, 10)  # holds the only thread until the other submissions are queued
    for i in range(50):
        busy.submit(order.append, f"busy{i}")
    done = other.submit(order.append, "other")
    gate.set()
    done.result(timeout=10)
    busy.shutdown(wait=True)
    assert order.index("other") < 3, order[:5]
    pool.shutdown()


def test_errors_reach_the_future_and_the_queue_goes_on():
    pool = LearnerPool(2)
    q = pool.queue("m")

    def boom():
        raise ValueError("bad batch")

    failed = q.submit(boom)
    ok = q.submit(lambda: 42)
    with pytest.raises(ValueError, match="bad batch"):
        failed.result(timeout=10)
    assert ok.result(timeout=10) == 42
    q.shutdown(wait=True)
    with pytest.raises(RuntimeError, match="shut down"):
        q.submit(lambda: 1)
    pool.shutdown()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
def test_learner_threads_run_at_a_lower_priority_and_the_caller_keeps_its_own():
    def nice():
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    mine = nice()
    pool = LearnerPool(2, nice=5)
    q = pool.queue("m")
    assert q.submit(nice).result(timeout=10) == min(19, mine + 5)
    assert nice() == mine and os.getpriority(os.PRIO_PROCESS, 0) == mine  # not the whole process
    q.shutdown(wait=True)
    pool.shutdown()
    plain = LearnerPool(1)
    assert plain.queue("n").submit(nice).result(timeout=10) == mine
    plain.shutdown()


def test_pool_size_is_validated():
    with pytest.raises(ValueError, match="n_threads"):
        LearnerPool(0)


def test_many_models_learning_at_once_use_a_bounded_number_of_threads(tmp_path):
    """400 models, each fed raw batches from 8 client threads: the thread count stays at the
    pool's size, and every model equals the same estimator fed alone."""
    settings = Settings(snapshot_dir=tmp_path, learner_threads=3)
    reg = Registry(settings, None)
    X, y = two_moons_like(300, d=4, seed=1)
    X = X * 50.0 + 3.0  # raw, unscaled
    y = (y > 0).astype(np.int64)  # class indices, as the routes hand them to the registry
    config = ModelConfig(budget=20, warmup=50, shuffle_buffer=0, random_state=0)
    names = [f"customer-{k:04d}" for k in range(400)]
    for name in names:
        reg.create(name, config)
    before = threading.active_count()
    peak = [before]
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            peak[0] = max(peak[0], threading.active_count())
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()

    def client(part):
        futures = [reg.learn(name, X[:150], y[:150]) for name in names[part::8]]
        futures += [reg.learn(name, X[150:], y[150:]) for name in names[part::8]]
        for f in futures:
            f.result(timeout=120)

    clients = [threading.Thread(target=client, args=(p,)) for p in range(8)]
    for c in clients:
        c.start()
    for c in clients:
        c.join()
    stop.set()
    watcher.join()
    # the 8 clients and the watcher are ours; the pool adds at most 3 threads
    assert peak[0] <= before + 8 + 1 + 3, (before, peak[0])
    from svmstream.app.models.factory import make_estimator

    direct = make_estimator(config)
    direct.partial_fit(X[:150], y[:150], classes=np.arange(2))
    direct.partial_fit(X[150:], y[150:])
    for name in names[::57]:
        np.testing.assert_array_equal(reg.get(name).view.decision_function(X), direct.decision_function(X))
    reg.close()
