"""A prediction replica refuses every request that would change a model (``docs/deployment.md``).

Pure ASGI middleware, installed by :func:`svmstream.app.main.create_app` when
``SVMSTREAM_ROLE=replica``: requests other than GET/HEAD/OPTIONS get 409 naming the learner,
except the prediction routes (``POST /predict``, ``/v2/models/{name}[/versions/{v}]/infer``,
``/invocations``), which only read.  The models themselves also refuse learning
(``ModelHandle.follower_of``), so nothing else can reach them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import orjson

#: POST routes a replica serves: they read the model only.
READ_ONLY_POSTS = re.compile(r"^/(predict|invocations|v2/models/[^/]+(/versions/[^/]+)?/infer)/?$")


class ReplicaReadOnly:
    """ASGI middleware: 409 ``{"detail", "field": null, "index": null}`` for writes.

    Parameters
    ----------
    app : the ASGI application
    learner_url : callable returning the learner's URL (or None while unknown)
    """

    def __init__(self, app, learner_url: Callable[[], str | None]):
        self.app = app
        self.learner_url = learner_url

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        if scope["method"] == "POST" and READ_ONLY_POSTS.match(scope["path"]):
            return await self.app(scope, receive, send)
        url = self.learner_url() or "the learner (its URL is not published yet)"
        body = orjson.dumps(
            {
                "detail": f"this process is a prediction replica: {scope['method']} {scope['path']} "
                f"changes a model; send it to the learner at {url}",
                "field": None,
                "index": None,
            }
        )
        await send(
            {
                "type": "http.response.start",
                "status": 409,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
