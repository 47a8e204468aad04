"""Dependencies giving the routes the service objects created by the lifespan
(:mod:`svmstream.app.main`), as ``Annotated`` types::

    async def route(registry: RegistryDep, settings: SettingsDep): ...

They are ``async`` so that FastAPI calls them on the event loop: a plain ``def`` dependency
runs in the thread pool, a thread hop per dependency and request (three per ``/learn``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Request
from prometheus_client import CollectorRegistry

from svmstream.app.models.registry import Registry
from svmstream.app.settings import Settings


async def registry_of(request: Request) -> Registry:
    return request.app.state.registry


async def settings_of(request: Request) -> Settings:
    return request.app.state.settings


async def latency_observer(request: Request) -> Callable[[str, str, float], None]:
    """``observe(route, model, seconds)`` of the app's request latency histograms."""
    return request.app.state.request_metrics.observe


async def prometheus_of(request: Request) -> CollectorRegistry:
    """The app's own Prometheus registry (built by :func:`svmstream.app.main.create_app`)."""
    return request.app.state.prometheus


RegistryDep = Annotated[Registry, Depends(registry_of)]
SettingsDep = Annotated[Settings, Depends(settings_of)]
LatencyDep = Annotated[Callable[[str, str, float], None], Depends(latency_observer)]
PrometheusDep = Annotated[CollectorRegistry, Depends(prometheus_of)]
