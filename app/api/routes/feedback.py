"""``POST /feedback``: labels for remembered predictions, by id (``docs/feedback.md``);
and what ``/predict`` does with ``remember``."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from svmstream.app.api.auth import require_write
from svmstream.app.api.deps import LatencyDep, RegistryDep, SettingsDep
from svmstream.app.api.http import OrjsonResponse, body_budget, read_json_body, route_limit
from svmstream.app.api.routes.learn import applied, learn_figures
from svmstream.app.api.schemas import JSON_BODY_ERRORS, errors
from svmstream.app.errors import InvalidInput, ServiceError
from svmstream.app.ingest.decode import decode_body
from svmstream.app.models.feedback import MAX_FEEDBACK_IDS, MAX_ID_CHARS, check_feedback_body
from svmstream.app.models.registry import Registry

router = APIRouter(tags=["feedback"], dependencies=[Depends(require_write)])

FEEDBACK_LABEL_CHARS = 16
"""Label length (characters) the ``/feedback`` byte limit allows for every id."""
FEEDBACK_BODY_BYTES = 64 * 1024 + MAX_FEEDBACK_IDS * (MAX_ID_CHARS + 3 + FEEDBACK_LABEL_CHARS + 3)
"""Byte limit of a ``/feedback`` body: :data:`MAX_FEEDBACK_IDS` ids of :data:`MAX_ID_CHARS`
characters, each with a label of :data:`FEEDBACK_LABEL_CHARS` (quotes and commas included):
8.6 MB.  Longer labels: fewer ids per request."""


class FeedbackRequest(BaseModel):
    """Body of ``POST /feedback`` (documentation only)."""

    model: str | None = Field(None, description="model name; default: the server's default model")
    ids: list[Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]] = Field(
        description="prediction ids answered by /predict with remember",
        min_length=1,
        max_length=MAX_FEEDBACK_IDS,
    )
    y: list[int | float | str] = Field(description="the label that arrived for each id (as many as ids)")
    w: list[float] | None = Field(
        None, description="optional: each row's importance weight, finite and >= 0 (docs/weights.md)"
    )


class FeedbackResponse(BaseModel):
    model: str
    learned: int = Field(description="ids whose rows were learned by this call")
    duplicate: int = Field(description="ids already learned (nothing learned again)")
    expired: int = Field(description="ids unknown, expired, evicted or of another model (nothing learned)")
    learned_indices: list[int]
    duplicate_indices: list[int]
    expired_indices: list[int]
    version: int
    n_seen: int
    n_support_vectors: int
    t: int
    buffered: int


def wants_remember(obj: dict, view) -> bool:
    """Whether a ``/predict`` body asks to remember its rows (``remember``, else the model's
    ``remember`` setting).  Raises InvalidInput (422) when ``remember`` is not a boolean."""
    value = obj.get("remember")
    if value is None:
        return bool(getattr(view.config, "remember", False))
    if not isinstance(value, bool):
        raise InvalidInput(f"remember: expected true or false, got {value!r}", field="remember")
    return value


def remember_rows(
    registry: Registry, view, X, decision, labels: list[Any], proba=None, authenticated: bool = True
) -> list[str]:
    """The ids of the rows of a prediction kept in the feedback store (``proba``: the
    ``(classes, probabilities)`` the answer already holds, if any; ``authenticated``: the
    request's token class).  Raises ServiceError (503) when the process has no feedback store."""
    feedback = getattr(registry, "feedback", None)
    if feedback is None:
        raise ServiceError("remember: this process keeps no feedback store", status=503)
    return feedback.remember(view, X, decision, labels, proba, authenticated=authenticated)


def _submit(registry: Registry, body: bytes, default_model: str):
    model, ids, y, w = check_feedback_body(decode_body(body))
    handle = registry.get(model if model is not None else default_model)
    feedback = getattr(registry, "feedback", None)
    if feedback is None:
        raise ServiceError("feedback: this process keeps no feedback store", status=503)
    return feedback.learn(handle, ids, y, w)


@router.post(
    "/feedback",
    response_model=FeedbackResponse,
    responses=errors(401, 404, 409, 429, 500, 503, *JSON_BODY_ERRORS),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": FeedbackRequest.model_json_schema()}},
        }
    },
)
async def feedback(
    request: Request, registry: RegistryDep, settings: SettingsDep, observe: LatencyDep
) -> OrjsonResponse:
    """Learn the remembered rows of ``ids`` with labels ``y``, each id at most once.

    The rows go through the model's pipeline as one batch, exactly as the same rows sent to
    ``/learn``.  Per id: ``learned``, ``duplicate`` (already learned: nothing learned again)
    or ``expired`` (unknown, expired, evicted, or another model's: nothing learned); the answer
    gives the counts and the indices of each.  A malformed body (422) learns nothing.
    """
    started = time.perf_counter()
    limit, setting = route_limit(settings, FEEDBACK_BODY_BYTES, "POST /feedback")
    async with body_budget(request, limit, setting):
        body = await read_json_body(request, limit, setting)
        future, answer = await run_in_threadpool(_submit, registry, body, settings.default_model)
        del body
    if future is not None:
        view = await applied(future)
    else:
        view = registry.get(answer["model"]).view
    observe("feedback", answer["model"], time.perf_counter() - started)
    return OrjsonResponse({**answer, **learn_figures(view)})
