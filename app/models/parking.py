"""Parking idle models: the registry gives back the memory of decoded models nobody used lately
(``SVMSTREAM_MAX_LOADED_MODELS``, ``SVMSTREAM_PARK_IDLE_S``; ``docs/deployment.md``)."""

from __future__ import annotations

import functools
import logging
import time

from svmstream.app.models.memory import release_free_memory
from svmstream.app.models.restoring import decode_restored

log = logging.getLogger("svmstream.registry")


def park_idle(registry, now: float | None = None) -> int:
    """Park the least recently used decoded models beyond ``settings.max_loaded_models``
    (those used within the last ``settings.park_idle_s`` seconds excepted): each is
    snapshotted if its view changed since its last snapshot, then parked
    (:meth:`ModelHandle.park`: its estimator and published copy dropped; decoded again from
    that file on its next use, as a lazily restored model is).  Returns how many were
    parked.  Nothing happens without a snapshot store or with ``max_loaded_models`` 0.

    Why: a decoded one-batch model costs ~24 KB in the service, a parked one the handle,
    its meters and its view's figures (10,000 models: ``docs/deployment.md``)."""
    limit = registry.settings.max_loaded_models
    if registry.store is None or limit <= 0:
        return 0
    loaded = [
        h for h in registry.handles() if h.loaded and h.follower_of is None and h.view.estimator is not None
    ]
    if len(loaded) <= limit:
        return 0
    now = time.monotonic() if now is None else now
    loaded.sort(key=lambda h: h.last_used)
    cutoff = now - registry.settings.park_idle_s
    retry = registry._park_retry_at
    chosen = [
        h
        for h in loaded[: len(loaded) - limit]
        if h.last_used <= cutoff and not h.pending and retry.get(h.name, 0.0) <= now
    ]
    dirty = [h for h in chosen if h.view.version != h.saved_version]
    failures = [h.snapshot_failures for h in dirty]
    registry._snapshot_all(dirty)
    for handle, before in zip(dirty, failures):
        if handle.snapshot_failures > before:  # disk full...: not again every second
            retry[handle.name] = now + registry.settings.snapshot_interval_s
    parked = 0
    for handle in chosen:
        with registry._snap_lock(handle.name):  # its newest file stays the newest meanwhile
            if registry._models.get(handle.name) is not handle:
                continue
            if handle.park(functools.partial(decode_restored, registry.store, handle.name)):
                retry.pop(handle.name, None)
                parked += 1
    if parked:
        release_free_memory()  # what the parked estimators held, back to the system
        log.info("parked %d idle models (%d stay decoded)", parked, len(loaded) - parked)
    return parked
