"""``/jobs``: batch training jobs (DC-SVM, AVSF, LIBLINEAR dual CD) in worker processes.

See :mod:`svmstream.app.jobs.runner` and ``docs/jobs.md``.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from svmstream.app.api.auth import require_read, require_write
from svmstream.app.api.deps import SettingsDep
from svmstream.app.api.disclosure import public_job, sees_everything
from svmstream.app.api.http import OrjsonResponse, body_budget, decode_off_loop, read_json_body
from svmstream.app.api.routes.models import validation_error
from svmstream.app.api.schemas import JSON_BODY_ERRORS, JobInfo, JobList, JsonBody, errors
from svmstream.app.ingest.decode import decode_body
from svmstream.app.jobs.bounds import check_job_bounds
from svmstream.app.jobs.runner import JobRunner
from svmstream.app.models.config import MODEL_NAME_PATTERN, BatchAlgorithm

router = APIRouter(prefix="/jobs", tags=["jobs"])


class JobCreate(JsonBody):
    """Body of ``POST /jobs``."""

    model_config = ConfigDict(extra="forbid")

    algorithm: BatchAlgorithm | Literal["search"] = Field(
        description="dcsvm: DCSVMClassifier (kernel SVM); avsf / liblinear-cd: LinearDualCDClassifier with "
        "adaptive / uniform coordinate selection; search: GridSearchCV over `estimator` (docs/jobs.md)"
    )
    estimator: str | None = Field(
        None, description="search: bsgd, bsca, dcsvm, avsf or liblinear-cd (the best model is served)"
    )
    grid: dict[str, Any] | None = Field(
        None,
        description='search: values per parameter, e.g. {"C": [1, 10], "gamma": [0.1, 1]} (<= 256 combinations)',
    )
    cv: int = Field(3, ge=2, le=10, description="search: stratified folds (shuffled, seeded by random_state)")
    random_state: int = Field(
        0, ge=0, description="search: seed of the folds (and of candidates without one)"
    )
    data: str = Field(
        min_length=1,
        pattern=r"^[^\x00]+$",
        description="training data: an upload id (POST /uploads) or a path in the server's data "
        "directory (SVMSTREAM_DATA_DIR); LIBSVM or CSV, .bz2/.gz allowed",
    )
    test: str | None = Field(
        None,
        min_length=1,
        pattern=r"^[^\x00]+$",
        description="optional test data (same forms): the result reports its accuracy",
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description='solver hyperparameters, e.g. {"C": 32, "gamma": 2} (dcsvm) or '
        '{"C": 1, "tol": 0.001} (avsf)',
    )
    model: str = Field(
        pattern=MODEL_NAME_PATTERN, description="name of the model the result is registered as"
    )
    early_level: int | None = Field(
        None, ge=1, description="dcsvm: serve the early-prediction model of this level"
    )
    replace: bool = Field(False, description="replace an existing model of that name")


def runner_of(request: Request) -> JobRunner:
    return request.app.state.jobs


@router.post(
    "",
    status_code=201,
    response_model=JobInfo,
    dependencies=[Depends(require_write)],
    responses=errors(401, 403, 404, 409, 503, *JSON_BODY_ERRORS),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": JobCreate.model_json_schema()}},
        }
    },
)
async def create_job(request: Request, settings: SettingsDep) -> OrjsonResponse:
    """Queue a training job; answers 201 with the job record (state ``queued`` or ``running``)."""
    async with body_budget(request, settings.max_body_bytes, "SVMSTREAM_MAX_BODY_BYTES"):
        obj = await decode_off_loop(await read_json_body(request, settings.max_body_bytes), decode_body)
    try:
        spec = JobCreate.model_validate(obj)
    except ValidationError as exc:
        raise validation_error(exc) from None
    check_job_bounds(spec.params or {}, settings, grid=spec.grid if spec.algorithm == "search" else None)
    runner = runner_of(request)
    job = await run_in_threadpool(
        runner.submit,
        spec.algorithm,
        spec.data,
        spec.model,
        test=spec.test,
        params=spec.params,
        early_level=spec.early_level,
        replace=spec.replace,
        estimator=spec.estimator,
        grid=spec.grid,
        cv=spec.cv,
        random_state=spec.random_state,
    )
    return OrjsonResponse(runner.to_json(job), status_code=201)


@router.get("", response_model=JobList, responses=errors(401), dependencies=[Depends(require_read)])
async def list_jobs(request: Request) -> OrjsonResponse:
    """``{"jobs": [job, ...]}``, newest first."""
    runner = runner_of(request)
    jobs = [runner.to_json(job) for job in runner.list()]
    if not sees_everything(request):
        jobs = [public_job(job) for job in jobs]
    return OrjsonResponse({"jobs": jobs})


@router.get(
    "/{job_id}", response_model=JobInfo, dependencies=[Depends(require_read)], responses=errors(401, 404)
)
async def get_job(job_id: str, request: Request) -> OrjsonResponse:
    """State (queued/running/succeeded/failed/cancelled), progress (stage, level, objective,
    max_violation, elapsed), timeline, result or error."""
    runner = runner_of(request)
    job = runner.to_json(runner.get(job_id))
    return OrjsonResponse(job if sees_everything(request) else public_job(job))


@router.delete(
    "/{job_id}",
    response_model=JobInfo,
    dependencies=[Depends(require_write)],
    responses=errors(401, 404, 409),
)
async def cancel_job(job_id: str, request: Request) -> OrjsonResponse:
    """Cancel a queued or running job; answers once the worker has stopped (it is killed
    ``SVMSTREAM_JOB_CANCEL_GRACE_S`` after the request at the latest).  409 if it had
    already finished."""
    runner = runner_of(request)
    job = await run_in_threadpool(runner.cancel, job_id)
    return OrjsonResponse(runner.to_json(job))
