"""A batch job's record (:class:`Job`), its states (:class:`JobState`) and its public JSON;
the :class:`~svmstream.app.jobs.runner.JobRunner` keeps them."""

from __future__ import annotations

import enum
import threading
import time
from dataclasses import dataclass, field
from typing import Any

MAX_TIMELINE = 400
"""Entries kept in a job's timeline."""


class JobState(enum.StrEnum):
    """A job's ``state`` (a ``str``: the JSON records carry the plain value)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINISHED = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})


@dataclass
class Job:
    """One batch job (its public record is :meth:`to_json`)."""

    id: str
    algorithm: str
    model: str
    data: str
    test: str | None
    params: dict[str, Any]
    early_level: int | None
    replace: bool
    task: dict[str, Any]
    state: JobState = JobState.QUEUED
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    pid: int | None = None
    exitcode: int | None = None
    stage: str = "queued"
    progress: dict[str, Any] = field(default_factory=dict)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] | None = None
    error: str | None = None
    error_traceback: str | None = None
    cancel: dict[str, Any] | None = None
    search: dict[str, Any] | None = None  # search jobs: estimator, grid, cv, random_state
    # private
    _cancel_requested: float | None = None  # monotonic time of the request
    _done: threading.Event = field(default_factory=threading.Event)
    _stop_event: Any = None
    _process: Any = None

    def to_json(self) -> dict[str, Any]:
        now = time.time()
        end = self.finished_at or now
        return {
            "id": self.id,
            "state": self.state.value,
            "algorithm": self.algorithm,
            "model": self.model,
            "data": self.data,
            "test": self.test,
            "params": self.params,
            "early_level": self.early_level,
            "replace": self.replace,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "elapsed_s": None if self.started_at is None else round(end - self.started_at, 3),
            "pid": self.pid,
            "exitcode": self.exitcode,
            "progress": {
                **self.progress,
                "phase": self.stage,
                "stage": self.progress.get("stage", self.stage) if self.stage == "training" else self.stage,
            },
            "timeline": list(self.timeline),
            "result": self.result,
            "error": self.error,
            "cancel": self.cancel,
            **({} if self.search is None else {"search": self.search}),
        }
