"""The clustered consumers' shared idle wait (app/stream/waiter.py), against a real Redis."""

from __future__ import annotations

import threading
import time
import uuid

import redis

from svmstream.app.stream.waiter import BLOCK_MS, StreamWaiter


def _keys(n: int) -> list[str]:
    tag = uuid.uuid4().hex[:8]
    return [f"waiter-{tag}-{i}:examples" for i in range(n)]


def _one_stream(redis_server):
    """A client, a stream holding one entry, that entry's ID and a waiter."""
    client = redis.Redis.from_url(redis_server.url)
    (key,) = _keys(1)
    return client, key, client.xadd(key, {"y": "1"}).decode(), StreamWaiter(redis_server.url)


def test_a_waiting_consumer_wakes_on_an_entry_after_its_id(redis_server):
    client, key, newest, waiter = _one_stream(redis_server)
    try:
        started = time.monotonic()
        assert waiter.wait(key, newest, 0.3) is False  # nothing after ``newest``: times out
        assert time.monotonic() - started >= 0.29
        woke: list[bool] = []
        t = threading.Thread(target=lambda: woke.append(waiter.wait(key, newest, 10.0)))
        t.start()
        time.sleep(0.2)
        client.xadd(key, {"y": "-1"})
        t.join(10.0)
        assert woke == [True]
    finally:
        waiter.stop()


def test_many_idle_consumers_share_one_read(redis_server):
    """200 consumers idle for 1 s cost about 1 s / BLOCK_MS shared XREADs, not 200 reads each,
    and only the streams that got an entry wake."""
    client = redis.Redis.from_url(redis_server.url)
    keys = _keys(200)
    newest = {k: client.xadd(k, {"y": "1"}).decode() for k in keys}
    waiter = StreamWaiter(redis_server.url)
    results: dict[str, bool] = {}
    threads = [
        threading.Thread(target=lambda k=k: results.__setitem__(k, waiter.wait(k, newest[k], 1.0)))
        for k in keys
    ]
    try:
        for t in threads:
            t.start()
        time.sleep(0.3)
        for k in keys[:5]:
            client.xadd(k, {"y": "-1"})
        for t in threads:
            t.join(10.0)
        assert {k for k, v in results.items() if v} == set(keys[:5])
        assert waiter.calls <= 3 * (1000 / BLOCK_MS) + 10, waiter.calls
    finally:
        waiter.stop()


def test_wake_ends_a_wait_at_once_and_a_stopped_consumer_does_not_wait(redis_server):
    client, key, newest, waiter = _one_stream(redis_server)
    try:
        woke: list[float] = []
        started = time.monotonic()
        t = threading.Thread(target=lambda: (waiter.wait(key, newest, 30.0), woke.append(time.monotonic())))
        t.start()
        time.sleep(0.2)
        waiter.wake(key)
        t.join(10.0)
        assert woke and woke[0] - started < 5.0
        stopped = threading.Event()
        stopped.set()
        started = time.monotonic()
        assert waiter.wait(key, newest, 30.0, stopped) is False
        assert time.monotonic() - started < 1.0
    finally:
        waiter.stop()
