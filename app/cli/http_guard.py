"""Connection guards uvicorn does not have: a header-read timeout and a header size limit.

uvicorn's ``timeout_keep_alive`` closes a connection idle *after* a response; a connection
that never sends a request, or sends half a request line and stops, is never timed out
(1,000 silent or half-header sockets held for 90 s and more).  And its httptools
parser buffers a request head of any size (``h11_max_incomplete_event_size`` applies to h11
only).  :func:`guarded_protocol` subclasses the service's protocol
(:class:`~svmstream.app.cli.http_protocol.CoalescingHttpToolsProtocol`) with

* a timer of ``header_timeout_s`` armed when the connection opens and when the first byte of
  each request arrives, cancelled once the request head is complete: a head not complete in
  time gets ``408 Request Timeout`` and the connection is closed;
* a count of the bytes received while a head is incomplete: beyond ``max_header_bytes``,
  ``431 Request Header Fields Too Large`` and the connection is closed.

A request whose head is complete is never timed out by this guard (a long ``/learn`` or a
slow body is the application's business; ``/events`` streams stay open).

``svmstream serve`` installs it (:func:`guarded_protocol`).  Under uvicorn's own command line,
name the class; its bounds are then read from the environment (``docs/deployment.md``)::

    uvicorn --factory svmstream.app.main:create_app \
        --http svmstream.app.cli.http_guard:HeaderGuardProtocol
"""

from __future__ import annotations

from typing import Any

from svmstream.app.cli.http_protocol import CoalescingHttpToolsProtocol

_REFUSALS = {
    408: b"HTTP/1.1 408 Request Timeout\r\n",
    431: b"HTTP/1.1 431 Request Header Fields Too Large\r\n",
}


class HeaderGuardProtocol(CoalescingHttpToolsProtocol):
    """:class:`CoalescingHttpToolsProtocol` with a header timeout and size limit (module
    docstring).  Use :func:`guarded_protocol` to set the two bounds."""

    #: None: read from the environment's settings on the first connection (uvicorn's
    #: ``--http svmstream.app.cli.http_guard:HeaderGuardProtocol`` names this class itself)
    header_timeout_s: float | None = None
    max_header_bytes: int | None = None

    def connection_made(self, transport: Any) -> None:
        if self.header_timeout_s is None or self.max_header_bytes is None:
            _bounds_from_environment(type(self))
        super().connection_made(transport)
        self._head_bytes = 0
        self._heads = 0
        self._awaiting_head = True
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_too_slow)

    def data_received(self, data: bytes) -> None:
        counting, heads = self._awaiting_head, self._heads
        super().data_received(data)
        # still no complete head after this chunk (one that completed a head, and perhaps a
        # whole request with its body, is not counted)
        if counting and heads == self._heads and not self.transport.is_closing():
            self._head_bytes += len(data)
            if self._head_bytes > self.max_header_bytes:
                self._refuse(431)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_too_slow)

    def on_headers_complete(self) -> None:
        self._heads += 1
        self._awaiting_head = False
        self._head_bytes = 0
        self._cancel_head_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._awaiting_head = True  # what arrives next is the next request's head

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self._refuse(408)

    def _refuse(self, status: int) -> None:
        self._cancel_head_timer()
        self.transport.write(_REFUSALS[status] + b"content-length: 0\r\nconnection: close\r\n\r\n")
        self.transport.close()


def _bounds_from_environment(cls: type[HeaderGuardProtocol]) -> None:
    """Set the class's unset bounds from ``SVMSTREAM_HEADER_TIMEOUT_S`` and
    ``SVMSTREAM_MAX_HEADER_BYTES`` (:class:`~svmstream.app.settings.Settings`)."""
    from svmstream.app.settings import Settings

    settings = Settings()
    if cls.header_timeout_s is None:
        cls.header_timeout_s = float(settings.header_timeout_s)
    if cls.max_header_bytes is None:
        cls.max_header_bytes = int(settings.max_header_bytes)


def guarded_protocol(header_timeout_s: float, max_header_bytes: int) -> type[HeaderGuardProtocol]:
    """A :class:`HeaderGuardProtocol` class with these bounds (uvicorn's ``http`` option)."""
    return type(
        "HeaderGuardProtocol",
        (HeaderGuardProtocol,),
        {"header_timeout_s": float(header_timeout_s), "max_header_bytes": int(max_header_bytes)},
    )
