"""Scheduling as the routes that take new tasks do it, whether for all lambdas or one: write, count, answer."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response

from atf_core.api import BatchRequest, BatchResult, ScheduledTask
from atf_core.clock import process_clock
from atf_core.schema import ScheduleRequest
from functions.frontend.batch import schedule_batch, scheduled
from functions.frontend.metrics import count_scheduled
from functions.frontend.openapi_doc import JSON
from functions.frontend.services import services


def schedule_one(request: ScheduleRequest) -> Response[ScheduledTask]:
    """201 with the task made, or 200 with the one an earlier request with this key made."""
    result = services().scheduling.schedule(request)
    if result.created:
        count_scheduled([request.lambda_])
    return Response(status_code=201 if result.created else 200, content_type=JSON, body=scheduled(result))


def schedule_batch_of(batch: BatchRequest) -> BatchResult:
    found = services()
    result = schedule_batch(found.scheduling, found.config, batch, process_clock())
    count_scheduled([batch.tasks[r.index].lambda_ for r in result.results if r.status == 201])
    return result
