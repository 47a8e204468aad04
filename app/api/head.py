"""``HEAD`` on every ``GET`` route (RFC 9110, 9.3.2): the ``GET`` answer without its body.

FastAPI's routes answer only the methods they declare, so ``HEAD /health`` was a 405 although
``Allow`` listed HEAD (probes that use HEAD failed).  :class:`HeadAsGet` runs a ``HEAD`` request
as ``GET`` and sends the status and headers (``Content-Length`` included) with an empty body;
an endless answer (the ``/events`` stream) ends after its first chunk: the route is told that
the client left.  Installed by :func:`svmstream.app.main.create_app`; the OpenAPI document lists
the ``GET`` operations (``HEAD`` is implied by HTTP).
"""

from __future__ import annotations

import asyncio


class HeadAsGet:
    """ASGI middleware: ``HEAD`` requests answered by the app's ``GET``, body dropped."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            return await self.app(scope, receive, send)
        done = asyncio.Event()

        async def head_send(message) -> None:
            if done.is_set():
                return
            if message["type"] == "http.response.body":
                done.set()
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        async def head_receive():
            if done.is_set():
                return {"type": "http.disconnect"}
            waiting = asyncio.ensure_future(receive())
            ended = asyncio.ensure_future(done.wait())
            finished, _ = await asyncio.wait({waiting, ended}, return_when=asyncio.FIRST_COMPLETED)
            if waiting in finished:
                ended.cancel()
                return waiting.result()
            waiting.cancel()
            return {"type": "http.disconnect"}

        await self.app({**scope, "method": "GET"}, head_receive, head_send)
