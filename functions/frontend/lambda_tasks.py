"""One lambda's tasks under /v1/lambdas/{lambda_name}/tasks: schedule (one or a batch), read, cancel, change,
and bulk changes of a selection. Each route is its all-lambdas twin (handler.py, task_changes.py) held to the
path's lambda (functions/frontend/ownership.py), so an IAM statement on the path grants one lambda's tasks."""

from __future__ import annotations

from typing import Annotated, TypeVar

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from atf_core.access import scoped
from atf_core.api import (
    BatchRequest,
    BatchResult,
    BulkReprioritiseRequest,
    BulkRescheduleRequest,
    ScheduledTask,
    TaskAmendmentRequest,
    TaskSelection,
)
from atf_core.bulk import BulkChange
from atf_core.clock import process_clock
from atf_core.schema import ScheduleRequest, Task
from functions.frontend.openapi_doc import error_responses, ok
from functions.frontend.ownership import same_lambda
from functions.frontend.params import LambdaName, TaskId
from functions.frontend.services import services
from functions.frontend.submit import schedule_batch_of, schedule_one
from functions.frontend.task_changes import BULK_DOC

Selection = TypeVar("Selection", bound=TaskSelection)
router = APIGatewayRouter()  # type: ignore[no-untyped-call]


@router.post(
    scoped("POST", "/tasks").resolver_path(),
    summary="Schedule a task of this lambda",
    responses={
        **ok(201, "Scheduled", ScheduledTask),
        **ok(200, "An earlier request with this key made it", ScheduledTask),
        **error_responses(400, 409, 415),
    },
)
def schedule_lambda_task(
    lambda_name: LambdaName, request: Annotated[ScheduleRequest, Body()]
) -> Response[ScheduledTask]:
    same_lambda(lambda_name, request.lambda_)
    return schedule_one(request)


@router.post(
    scoped("POST", "/tasks/batch").resolver_path(),
    summary="Schedule up to 100 tasks of this lambda, with a result for each",
    responses={**ok(200, "One result per task, in order", BatchResult), **error_responses(400, 409, 415)},
)
def schedule_lambda_tasks(lambda_name: LambdaName, batch: Annotated[BatchRequest, Body()]) -> BatchResult:
    for index, task in enumerate(batch.tasks):
        same_lambda(lambda_name, task.lambda_, f"tasks[{index}].lambda")
    return schedule_batch_of(batch)


@router.get(
    scoped("GET", "/tasks/{task_id}").resolver_path(),
    summary="A task of this lambda: status, attempts, timestamps, last error",
    responses={**ok(200, "The task", Task), **error_responses(400, 404)},
)
def get_lambda_task(lambda_name: LambdaName, task_id: TaskId) -> Task:
    return services().scheduling.get(task_id, lambda_name)


@router.delete(
    scoped("DELETE", "/tasks/{task_id}").resolver_path(),
    summary="Cancel a task of this lambda that has not started",
    responses={**ok(200, "Cancelled (or already was)", Task), **error_responses(400, 404, 409)},
)
def cancel_lambda_task(lambda_name: LambdaName, task_id: TaskId) -> Task:
    return services().scheduling.cancel(task_id, lambda_name=lambda_name)  # one read: the lambda checked in it


@router.post(
    scoped("POST", "/tasks/{task_id}/change").resolver_path(),
    summary="Change the run time, priority or payload of a task of this lambda no executor has claimed",
    responses={**ok(200, "The task as changed", Task), **error_responses(400, 404, 409, 415)},
)
def change_lambda_task(
    lambda_name: LambdaName, task_id: TaskId, request: Annotated[TaskAmendmentRequest, Body()]
) -> Task:
    return services().scheduling.amend(task_id, request.amendment(process_clock()), lambda_name)


@router.post(
    scoped("POST", "/tasks/bulk/cancel").resolver_path(),
    summary="Cancel the waiting tasks of a selection of this lambda's",
    responses={**ok(200, BULK_DOC, BulkChange), **error_responses(400, 415)},
)
def cancel_lambda_tasks(lambda_name: LambdaName, request: Annotated[TaskSelection, Body()]) -> BulkChange:
    selection = _of(lambda_name, request)
    return services().bulk.cancel(selection.filter(), selection.dry_run, selection.per_second, selection.cursor)


@router.post(
    scoped("POST", "/tasks/bulk/reschedule").resolver_path(),
    summary="Run the waiting tasks of a selection of this lambda's at a new time, spread out at per_second",
    responses={**ok(200, BULK_DOC, BulkChange), **error_responses(400, 415)},
)
def reschedule_lambda_tasks(lambda_name: LambdaName, request: Annotated[BulkRescheduleRequest, Body()]) -> BulkChange:
    selection = _of(lambda_name, request)
    run_at = selection.when(process_clock())
    bulk = services().bulk
    return bulk.reschedule(selection.filter(), run_at, selection.dry_run, selection.per_second, selection.cursor)


@router.post(
    scoped("POST", "/tasks/bulk/reprioritise").resolver_path(),
    summary="Move the waiting tasks of a selection of this lambda's to another priority's queue",
    responses={**ok(200, BULK_DOC, BulkChange), **error_responses(400, 415)},
)
def reprioritise_lambda_tasks(
    lambda_name: LambdaName, request: Annotated[BulkReprioritiseRequest, Body()]
) -> BulkChange:
    selection = _of(lambda_name, request)
    priority, rate = selection.priority, selection.per_second
    return services().bulk.reprioritise(selection.filter(), priority, selection.dry_run, rate, selection.cursor)


def _of(lambda_name: str, request: Selection) -> Selection:
    """The selection held to the path's lambda."""
    return request.model_copy(update={"lambda_": same_lambda(lambda_name, request.lambda_)})
