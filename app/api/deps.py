"""Access to the service objects created by the lifespan (see :mod:`app.main`)."""

from __future__ import annotations

from fastapi import Request

from svmstream.app.models.registry import Registry
from svmstream.app.settings import Settings


def registry_of(request: Request) -> Registry:
    return request.app.state.registry


def settings_of(request: Request) -> Settings:
    return request.app.state.settings
