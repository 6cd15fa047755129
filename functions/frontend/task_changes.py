"""Changing waiting tasks: one by id (POST /v1/tasks/{id}/change), or a selection at once
(POST /v1/tasks/bulk/cancel | reschedule | reprioritise), each bulk action with a dry run."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from atf_core.api import BulkReprioritiseRequest, BulkRescheduleRequest, TaskAmendmentRequest, TaskSelection
from atf_core.bulk import BulkChange
from atf_core.clock import process_clock
from atf_core.schema import Task
from functions.frontend.openapi_doc import error_responses, ok
from functions.frontend.params import TaskId
from functions.frontend.services import services

router = APIGatewayRouter()  # type: ignore[no-untyped-call]

BULK_DOC = "What matched (soonest first), how many changed, which were claimed meanwhile, and when they run"


@router.post(
    "/v1/tasks/<task_id>/change",
    summary="Change the run time, priority or payload of a task no executor has claimed",
    responses={**ok(200, "The task as changed", Task), **error_responses(400, 404, 409, 415)},
)
def change_task(task_id: TaskId, request: Annotated[TaskAmendmentRequest, Body()]) -> Task:
    return services().scheduling.amend(task_id, request.amendment(process_clock()))


@router.post(
    "/v1/tasks/bulk/cancel",
    summary="Cancel the waiting tasks of a selection; with per_second, at most that many a second",
    responses={**ok(200, BULK_DOC, BulkChange), **error_responses(400, 415)},
)
def cancel_tasks(request: Annotated[TaskSelection, Body()]) -> BulkChange:
    return services().bulk.cancel(request.filter(), request.dry_run, request.per_second, request.cursor)


@router.post(
    "/v1/tasks/bulk/reschedule",
    summary="Run the waiting tasks of a selection at a new time, spread out at per_second",
    responses={**ok(200, BULK_DOC, BulkChange), **error_responses(400, 415)},
)
def reschedule_tasks(request: Annotated[BulkRescheduleRequest, Body()]) -> BulkChange:
    run_at = request.when(process_clock())
    return services().bulk.reschedule(request.filter(), run_at, request.dry_run, request.per_second, request.cursor)


@router.post(
    "/v1/tasks/bulk/reprioritise",
    summary="Move the waiting tasks of a selection to another priority's queue, at most per_second a second",
    responses={**ok(200, BULK_DOC, BulkChange), **error_responses(400, 415)},
)
def reprioritise_tasks(request: Annotated[BulkReprioritiseRequest, Body()]) -> BulkChange:
    bulk = services().bulk
    return bulk.reprioritise(request.filter(), request.priority, request.dry_run, request.per_second, request.cursor)
