"""Periodic schedules under /v1/schedules/{name}: put, list, get with next occurrences, delete, pause, resume.

The consumer fires them; these routes only manage them.
"""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from atf_core.api import MAX_EVENT_BODY_BYTES, MAX_SCHEDULE_PAGE, ScheduleList, ScheduleView, in_an_event
from atf_core.clock import process_clock
from atf_core.recurrence import Schedule, ScheduleSpec
from atf_core.schema import NAME_PATTERN
from atf_core.vocabulary import MAX_UPCOMING
from functions.frontend.bodies import write_body
from functions.frontend.openapi_doc import error_responses, ok
from functions.frontend.params import PageAfter, PageLimit, ScheduleName
from functions.frontend.services import services

router = APIGatewayRouter()  # type: ignore[no-untyped-call]


@router.put(
    "/v1/schedules/<name>",
    summary="Create or replace a schedule (a replaced one keeps its counts and restarts its cadence now)",
    responses={**ok(200, "The schedule as stored", Schedule), **error_responses(400, 409, 415)},
)
def put_schedule(name: ScheduleName, spec: Annotated[ScheduleSpec, Body()]) -> Schedule:
    return services().schedules.put(name, spec)


@router.get(
    "/v1/schedules",
    summary="Every schedule, or a lambda's, a page at a time",
    responses={**ok(200, "A page of schedules, by name", ScheduleList), **error_responses(400)},
)
def list_schedules(
    lambda_name: Annotated[str | None, Query(alias="lambda", pattern=NAME_PATTERN)] = None,
    after: PageAfter = None,
    limit: PageLimit = MAX_SCHEDULE_PAGE,
) -> ScheduleList:
    return listed(lambda_name, after, limit)


def listed(lambda_name: str | None, after: str | None, limit: int) -> ScheduleList:
    """A page of schedules by name, from the first after `after`: up to `limit` of them, and no more than
    the function's response holds (a schedule's payload alone may be 256 KiB, and a response 6 MiB)."""
    if lambda_name is not None:  # on both routes that list: a lambda the stack has not is unknown_lambda, as elsewhere
        services().config.lambda_named(lambda_name)
    page: list[Schedule] = []
    room = MAX_EVENT_BODY_BYTES
    for schedule in services().schedules.in_order(after, lambda_name):
        room -= _in_the_answer(schedule)
        if len(page) == limit or (page and room < 0):  # one more was there: the page says where to go on
            return ScheduleList(schedules=page, next=page[-1].name)
        page.append(schedule)
    return ScheduleList(schedules=page)


def _in_the_answer(schedule: Schedule) -> int:
    """The bytes a schedule takes in the function's response: written as the resolver writes a body, then
    escaped again as the response's body string."""
    return in_an_event(write_body(schedule.model_dump(mode="json", by_alias=True)))


@router.get(
    "/v1/schedules/<name>",
    summary="A schedule, where it stands, and its next occurrences",
    responses={**ok(200, "The schedule", ScheduleView), **error_responses(400)},
)
def get_schedule(name: ScheduleName, upcoming: Annotated[int, Query(ge=0, le=MAX_UPCOMING)] = 5) -> ScheduleView:
    return viewed(services().schedules.get(name), upcoming)


def viewed(schedule: Schedule, upcoming: int) -> ScheduleView:
    """The schedule with its next `upcoming` occurrences (none while paused)."""
    return ScheduleView(**dict(schedule), upcoming=schedule.next_occurrences(process_clock(), upcoming))


@router.delete(
    "/v1/schedules/<name>",
    summary="Delete a schedule (tasks it already created stay)",
    responses={204: {"description": "Deleted"}, **error_responses(400)},
)
def delete_schedule(name: ScheduleName) -> Response[None]:
    services().schedules.delete(name)
    return Response(status_code=204)


@router.post(
    "/v1/schedules/<name>/pause",
    summary="Pause a schedule: no occurrence fires until it resumes",
    responses={**ok(200, "The schedule", Schedule), **error_responses(400, 409, 415)},
)
def pause_schedule(name: ScheduleName) -> Schedule:
    return services().schedules.set_paused(name, True)


@router.post(
    "/v1/schedules/<name>/resume",
    summary="Resume a paused schedule from its next occurrence",
    responses={**ok(200, "The schedule", Schedule), **error_responses(400, 409, 415)},
)
def resume_schedule(name: ScheduleName) -> Schedule:
    return services().schedules.set_paused(name, False)
