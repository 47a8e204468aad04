"""Pinned versions held decoded: a server-wide byte bound, one decode per version however many
requests ask at once, a 503 beyond the bound (``docs/versions.md``, "Pinned versions").

``POST /predict {"version": v}`` and the Open Inference Protocol's versions routes answer from
an older snapshot of a model.  Such a version is decoded as a *serving state*
(:func:`~.serving.read_serving`: coefficients, support vectors, scaler, calibrator; never the
shuffle buffer, reservoirs or rehearsal memory, zero-filled without memory), and held in
:class:`PinnedCache`:

* **bounded in bytes** (``max_pinned_bytes``, server-wide, all models together; and at most
  ``max_pinned_versions`` versions): the least recently used versions go first to make room;
  a version that alone exceeds the bound is refused (503 naming the setting);
* **single-flight**: concurrent requests for a version being decoded wait for that decode
  (never a second one); at most :data:`DECODERS` versions are decoded at once, and a request
  for another version meanwhile is refused at once with 503 and ``Retry-After`` (what a
  tokenless client can make the server decode is one file at a time, never a queue of them);
* a version's bytes are those its decoded arrays hold (``read_serving``'s count; the figures
  the history lists come from the headers, never from a decode).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any

from svmstream.app.errors import ServiceError

#: Versions decoded at once, server-wide.
DECODERS = 1
#: Seconds a request waits for the decode of the version it asks for (another request's).
WAIT_S = 60.0


class PinnedBusy(ServiceError):
    """The pinned-version decoder is busy, or the version does not fit ``max_pinned_bytes``
    (HTTP 503 with ``Retry-After``)."""

    default_status = 503
    headers = {"Retry-After": "1"}


class PinnedCache:
    """Decoded pinned versions within ``max_bytes`` and ``max_count`` (thread-safe).

    Parameters
    ----------
    max_bytes : int
        Bytes of decoded versions held at once (all models).
    max_count : int
        Versions held at once.
    """

    def __init__(self, max_bytes: int, max_count: int):
        self.max_bytes = int(max_bytes)
        self.max_count = int(max_count)
        self._held: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._decoding: dict[Hashable, Future] = {}
        self._lock = threading.Lock()
        self.bytes = 0
        self.decodes = 0
        self.refused = 0

    def get(self, key: Hashable, decode: Callable[[], tuple[Any, int]]) -> Any:
        """The value held for ``key``, else ``decode()``'s ``(value, bytes)`` made once (other
        callers of the same key wait for it).  Raises PinnedBusy, or what ``decode`` raises."""
        with self._lock:
            held = self._held.get(key)
            if held is not None:
                self._held.move_to_end(key)
                return held[0]
            future = self._decoding.get(key)
            mine = future is None
            if mine:
                if len(self._decoding) >= DECODERS:
                    self.refused += 1
                    raise PinnedBusy(
                        f"version: {len(self._decoding)} pinned version(s) being decoded; retry in a second"
                    )
                future = self._decoding[key] = Future()
        if not mine:
            try:
                return future.result(timeout=WAIT_S)
            except TimeoutError as exc:  # concurrent.futures' is the builtin since Python 3.11
                raise PinnedBusy(f"version: still being decoded after {WAIT_S:.0f} s; retry") from exc
        try:
            value, size = decode()
            self._admit(key, value, size)
        except BaseException as exc:
            future.set_exception(exc)
            raise
        finally:
            with self._lock:
                self._decoding.pop(key, None)
        future.set_result(value)
        return value

    def _admit(self, key: Hashable, value: Any, size: int) -> None:
        """Hold ``value`` (``size`` bytes), dropping the least recently used to make room.
        Raises PinnedBusy when it alone exceeds the bound (nothing is dropped then)."""
        self._check_fits(size)
        with self._lock:
            self.decodes += 1
            while self._held and (self.bytes + size > self.max_bytes or len(self._held) >= self.max_count):
                _, (_, old) = self._held.popitem(last=False)
                self.bytes -= old
            if self.max_count > 0:
                self._held[key] = (value, size)
                self.bytes += size

    def reserve(self, size: int) -> None:
        """Make room for ``size`` bytes about to be decoded (least recently used dropped first),
        so that the decode itself stays within the bound.  Raises PinnedBusy when it cannot fit."""
        self._check_fits(size)
        with self._lock:
            while self._held and self.bytes + size > self.max_bytes:
                _, (_, old) = self._held.popitem(last=False)
                self.bytes -= old

    def _check_fits(self, size: int) -> None:
        if size > self.max_bytes:
            with self._lock:
                self.refused += 1
            raise PinnedBusy(
                f"version: this version takes {size} bytes decoded, over max_pinned_bytes ({self.max_bytes})",
                field="version",
            )

    def drop(self, keep: Callable[[Hashable], bool]) -> None:
        """Drop every held version whose key ``keep`` rejects (a model replaced or deleted)."""
        with self._lock:
            for key in [k for k in self._held if not keep(k)]:
                _, size = self._held.pop(key)
                self.bytes -= size

    def stats(self) -> dict[str, int]:
        """``{"versions", "bytes", "max_bytes", "decodes", "refused"}``."""
        with self._lock:
            return {
                "versions": len(self._held),
                "bytes": self.bytes,
                "max_bytes": self.max_bytes,
                "decodes": self.decodes,
                "refused": self.refused,
            }
