"""Dead letters under /v1/lambdas/{lambda}/dead-letters: list, redrive, discard.

One task's full record, with every attempt's error, is GET /v1/tasks/{id}.
"""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from atf_core.api import (
    ERROR_TYPE_PATTERN,
    MAX_DEAD_LETTER_LIST,
    DeadLetterList,
    DeadLetterSelection,
    RedriveRequest,
    dead_letter_filter,
)
from atf_core.deadletters import BulkResult, position_of
from atf_core.schema import COLLECTION_PATTERN, Moment
from functions.frontend.openapi_doc import error_responses, ok
from functions.frontend.params import DeadLetterAfter, LambdaName
from functions.frontend.services import services

router = APIGatewayRouter()  # type: ignore[no-untyped-call]

SELECTION_DOC = "What matched (oldest first), how many changed, and when the first and last redriven task run"


@router.get(
    "/v1/lambdas/<lambda_name>/dead-letters",
    summary="A lambda's dead letters, oldest first, filtered by collection, error class and time of death",
    responses={**ok(200, "The dead letters", DeadLetterList), **error_responses(400)},
)
def list_dead_letters(
    lambda_name: LambdaName,
    collection: Annotated[str | None, Query(pattern=COLLECTION_PATTERN)] = None,
    error_type: Annotated[str | None, Query(pattern=ERROR_TYPE_PATTERN, description="Exception class name.")] = None,
    since: Annotated[Moment | None, Query(description="Died at or after (RFC 3339).")] = None,
    until: Annotated[Moment | None, Query(description="Died at or before (RFC 3339).")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_DEAD_LETTER_LIST)] = 100,
    after: DeadLetterAfter = None,
) -> DeadLetterList:
    selection = dead_letter_filter(lambda_name, collection, error_type, since, until, limit)
    page = services().dead_letters.page(selection, position_of(after) if after is not None else None)
    return DeadLetterList.of(page)


@router.post(
    "/v1/lambdas/<lambda_name>/dead-letters/redrive",
    summary="Send a selection of dead letters back to new with a fresh attempt budget, at a drip rate",
    responses={**ok(200, SELECTION_DOC, BulkResult), **error_responses(400, 415)},
)
def redrive_dead_letters(lambda_name: LambdaName, request: Annotated[RedriveRequest, Body()]) -> BulkResult:
    selection, after = request.filter(lambda_name), request.position()
    return services().dead_letters.redrive(
        selection, request.dry_run, per_second=request.per_second, budget=request.budget, after=after
    )


@router.post(
    "/v1/lambdas/<lambda_name>/dead-letters/discard",
    summary="End a selection of dead letters as fatal_failure",
    responses={**ok(200, "What matched and how many ended", BulkResult), **error_responses(400, 415)},
)
def discard_dead_letters(lambda_name: LambdaName, request: Annotated[DeadLetterSelection, Body()]) -> BulkResult:
    return services().dead_letters.discard(request.filter(lambda_name), request.dry_run, request.position())
