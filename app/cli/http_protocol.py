"""uvicorn's httptools protocol, writing each response's status line and headers together
with its first body chunk (one ``write`` a response instead of two).

uvicorn writes the headers as soon as the app sends ``http.response.start``, then the body
in a second ``write``: on loopback each one is a trip through the TCP stack and a wake-up
of the client, ~0.012 ms of the ~0.16 ms of server CPU a single-row ``/predict`` costs
(measured: 0.162 -> 0.150 ms a request, wrk -c8, medians of 4 interleaved rounds).  The ASGI
specification lets a server hold the headers until the first body message.

:class:`CoalescingHttpToolsProtocol` gives each request cycle a transport whose first write
(the status line and headers) is held and prepended to the next one, when the response
has a ``Content-Length`` (streams such as ``/events`` send their headers at once, as before).
Not for ``HEAD`` requests, whose body uvicorn never writes; interim ``1xx`` answers
(``100 Continue``) are never held.  ``svmstream serve`` uses it whenever uvicorn would use httptools.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class _HoldHeaders:
    """A transport proxy holding the first response head written through it until the next
    write; everything else goes to the real transport."""

    __slots__ = ("_transport", "_held", "_first")

    def __init__(self, transport: Any):
        self._transport = transport
        self._held: bytes | None = None
        self._first = True

    def write(self, data: bytes) -> None:
        if self._first and data[:9] == b"HTTP/1.1 " and data[9:10] != b"1":
            self._first = False
            if b"\r\ncontent-length: " in data:  # its body follows at once (not a stream)
                self._held = data
                return
        if self._held is not None:
            data, self._held = self._held + data, None
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:  # close, is_closing, ...: the real transport's
        return getattr(self._transport, name)


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's ``HttpToolsProtocol`` with one write per response (module docstring)."""

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        cycle = getattr(self, "cycle", None)
        if cycle is not None and cycle.scope.get("method") != "HEAD" and hasattr(cycle, "transport"):
            cycle.transport = _HoldHeaders(cycle.transport)
