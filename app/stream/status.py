"""A stream consumer's figures for ``GET /models/{name}`` and ``/metrics`` (``docs/stream.md``).

The counters are the consumer's own; the Redis figures (length, pending, lag, dead letters)
come from one pipelined XINFO round trip, refreshed every ``stream_info_interval_s`` by the
consumer's thread and, with many models, no more often than :data:`STATUS_REFRESHES_PER_S`
times a second over all the consumers of a server.
"""

from __future__ import annotations

from typing import Any

from svmstream.app.stream import redis_ops
from svmstream.app.stream.redis_ops import format_id

STATUS_REFRESHES_PER_S = 100.0
"""The most stream-figure refreshes (one pipelined XINFO each) a server makes a second over all
its consumers: a thousand models refresh every 10 s, not every second."""


def consumer_status(consumer) -> dict[str, Any]:
    """The figures of a :class:`~svmstream.app.stream.consumer.StreamConsumer`: its counters
    now, and the Redis figures of its last refresh."""
    applier = consumer.applier
    durable = applier.durable()
    out = {
        "key": consumer.key,
        "dead_key": consumer.dead_key,
        "group": consumer.group,
        "consumer": consumer.consumer,
        "connected": consumer.connected,
        "applied": applier.applied,
        "dead_letters": applier.dead_letters,
        "skipped_duplicates": applier.skipped,
        "acknowledged": applier.acked,
        "last_applied_id": format_id(applier.last_id) if applier.last_id else None,
        "last_acked_id": format_id(durable) if durable else None,
        "reconnects": consumer.reconnects,
        "last_error": consumer.last_error,
    }
    out.update(consumer._status)
    return out


def refreshed_figures(consumer, client) -> dict[str, Any]:
    """The Redis figures of ``consumer``'s stream and group (:func:`redis_ops.stream_figures`)."""
    applier = consumer.applier
    return redis_ops.stream_figures(
        client, consumer.key, consumer.group, consumer.dead_key, applier.durable(), applier.last_id
    )
