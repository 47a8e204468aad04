"""``svmstream serve``: the service under uvicorn (one worker: the models live in memory).

The listening address is checked first (:func:`check_bindable`), then the Redis of
``--redis-url`` (:func:`check_redis`): a port in use or a Redis that does not answer ends the
command with a one-line error and exit status 1 before anything starts -- no snapshot
restored, no stream consumed, no "svmstream ready" logged.
"""

from __future__ import annotations

import argparse
import socket
import sys
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from svmstream.app.settings import Settings
from svmstream.solvers._hyperparameters import rows


def _label(text: str) -> Any:
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() else value


#: Seconds the start-up PING of the configured Redis may take to connect, and to be answered.
REDIS_CHECK_S = 3.0

#: ``serve`` option destination -> the setting it overrides (``default_<name>``): the table's rows
_HYPER_SETTINGS = tuple((row.name, row.setting) for row in rows(cli="serve"))


def settings_from_args(args: argparse.Namespace) -> Settings:
    """:class:`svmstream.app.settings.Settings` from the environment, overridden by ``serve``
    options."""
    overrides: dict[str, Any] = {}
    for key in (
        "host",
        "port",
        "snapshot_dir",
        "snapshot_interval_s",
        "keep_versions",
        "max_history_bytes",
        "max_body_bytes",
        "default_model",
        "log_level",
        "redis_url",
        "stream_models",
        "role",
        "advertise_url",
    ):
        value = getattr(args, key)
        if value is not None:
            overrides[key] = value
    for key, setting in _HYPER_SETTINGS:
        value = getattr(args, key)
        if value is not None:
            overrides[setting] = value
    if args.classes:
        overrides["default_classes"] = [_label(c.strip()) for c in args.classes.split(",")]
    return Settings(**overrides)


def check_bindable(host: str, port: int) -> None:
    """Bind (then release) every address uvicorn will listen on for ``host:port``, the way
    asyncio does (``SO_REUSEADDR``; IPv6 sockets IPv6-only).

    Raises
    ------
    OSError
        The address cannot be listened on (``[Errno 98] Address already in use``, an unknown
        host, a privileged port ...).
    """
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    held: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            held.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    finally:
        for sock in held:
            sock.close()


def redacted(url: str) -> str:
    """``url`` without its password (``redis://:***@host:6379/0``)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port is not None else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))


def check_redis(url: str, timeout_s: float = REDIS_CHECK_S) -> None:
    """PING the Redis at ``url`` once (connect and reply within ``timeout_s`` each).

    ``serve`` calls it before anything starts: a Redis configured but unreachable at start-up
    ends the command with one line and exit status 1 (``docs/service.md``, "Redis at
    start-up").  Once the service runs, a Redis that goes away is reconnected to with back-off
    (``docs/stream.md``, "Redis going away").

    Raises
    ------
    redis.exceptions.RedisError
        Connection refused, timed out, authentication failed, a malformed URL ...
    ValueError
        A URL redis-py cannot parse (no ``redis://``, ``rediss://`` or ``unix://`` scheme).
    """
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
    try:
        client.ping()
    finally:
        client.close()


def _http_protocol(settings: Settings) -> dict[str, Any]:
    """uvicorn's ``http`` option: httptools with one write per response
    (:mod:`~svmstream.app.cli.http_protocol`) and the header timeout and size limit of
    :mod:`~svmstream.app.cli.http_guard` when httptools is installed, else uvicorn's choice
    (h11, whose head size limit is ``h11_max_incomplete_event_size``; no header timeout)."""
    try:
        from svmstream.app.cli.http_guard import guarded_protocol
    except ImportError:  # no httptools: uvicorn falls back to h11 itself
        return {}
    return {"http": guarded_protocol(settings.header_timeout_s, settings.max_header_bytes)}


def connection_options(settings: Settings) -> dict[str, Any]:
    """uvicorn's connection bounds from the settings (``docs/service.md``, "Bounds")."""
    return {
        "limit_concurrency": settings.limit_concurrency,
        "timeout_keep_alive": settings.timeout_keep_alive_s,
        "h11_max_incomplete_event_size": settings.max_header_bytes,
        **_http_protocol(settings),
    }


def serve(args: argparse.Namespace) -> int:
    """Run the service until it is stopped; 1 when its address cannot be listened on or its
    Redis (``--redis-url``) cannot be reached."""
    settings = settings_from_args(args)
    try:
        check_bindable(settings.host, settings.port)
    except OSError as exc:
        print(f"error: cannot listen on {settings.host}:{settings.port}: {exc}", file=sys.stderr)
        return 1
    if settings.redis_url:
        try:
            check_redis(settings.redis_url)
        except Exception as exc:  # noqa: BLE001 -- any failure to reach it ends the command the same way
            print(f"error: cannot reach Redis at {redacted(settings.redis_url)}: {exc}", file=sys.stderr)
            return 1
    import uvicorn  # after the checks: they answer before the application's imports

    from svmstream.app.main import create_app

    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        workers=1,
        log_level=settings.log_level.lower(),
        timeout_graceful_shutdown=30,
        **connection_options(settings),
    )
    return 0
