"""One lambda's periodic schedules under /v1/lambdas/{lambda_name}/schedules. Schedule names are the stack's:
a name another lambda's schedule holds is not this lambda's to read, replace or delete (404, 409 for a put)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from atf_core.access import scoped
from atf_core.api import MAX_SCHEDULE_PAGE, ScheduleList, ScheduleView
from atf_core.recurrence import Schedule, ScheduleSpec
from atf_core.vocabulary import MAX_UPCOMING
from functions.frontend.openapi_doc import error_responses, ok
from functions.frontend.ownership import same_lambda
from functions.frontend.params import LambdaName, PageAfter, PageLimit, ScheduleName
from functions.frontend.schedules import listed, viewed
from functions.frontend.services import services

router = APIGatewayRouter()  # type: ignore[no-untyped-call]


@router.put(
    scoped("PUT", "/schedules/{name}").resolver_path(),
    summary="Create or replace a schedule of this lambda",
    responses={**ok(200, "The schedule as stored", Schedule), **error_responses(400, 409, 415)},
)
def put_lambda_schedule(lambda_name: LambdaName, name: ScheduleName, spec: Annotated[ScheduleSpec, Body()]) -> Schedule:
    same_lambda(lambda_name, spec.lambda_)
    return services().schedules.put(name, spec, owner=lambda_name)  # another lambda's name: 409


@router.get(
    scoped("GET", "/schedules").resolver_path(),
    summary="This lambda's schedules, a page at a time",
    responses={**ok(200, "A page of schedules, by name", ScheduleList), **error_responses(400)},
)
def list_lambda_schedules(
    lambda_name: LambdaName, after: PageAfter = None, limit: PageLimit = MAX_SCHEDULE_PAGE
) -> ScheduleList:
    return listed(lambda_name, after, limit)


@router.get(
    scoped("GET", "/schedules/{name}").resolver_path(),
    summary="A schedule of this lambda, where it stands, and its next occurrences",
    responses={**ok(200, "The schedule", ScheduleView), **error_responses(400)},
)
def get_lambda_schedule(
    lambda_name: LambdaName, name: ScheduleName, upcoming: Annotated[int, Query(ge=0, le=MAX_UPCOMING)] = 5
) -> ScheduleView:
    return viewed(services().schedules.get(name, owner=lambda_name), upcoming)


@router.delete(
    scoped("DELETE", "/schedules/{name}").resolver_path(),
    summary="Delete a schedule of this lambda (tasks it already created stay)",
    responses={204: {"description": "Deleted"}, **error_responses(400)},
)
def delete_lambda_schedule(lambda_name: LambdaName, name: ScheduleName) -> Response[None]:
    services().schedules.delete(name, owner=lambda_name)
    return Response(status_code=204)


@router.post(
    scoped("POST", "/schedules/{name}/pause").resolver_path(),
    summary="Pause a schedule of this lambda",
    responses={**ok(200, "The schedule", Schedule), **error_responses(400, 409, 415)},
)
def pause_lambda_schedule(lambda_name: LambdaName, name: ScheduleName) -> Schedule:
    return services().schedules.set_paused(name, True, owner=lambda_name)


@router.post(
    scoped("POST", "/schedules/{name}/resume").resolver_path(),
    summary="Resume a paused schedule of this lambda from its next occurrence",
    responses={**ok(200, "The schedule", Schedule), **error_responses(400, 409, 415)},
)
def resume_lambda_schedule(lambda_name: LambdaName, name: ScheduleName) -> Schedule:
    return services().schedules.set_paused(name, False, owner=lambda_name)
