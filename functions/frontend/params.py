"""Path and query parameters shared by the routes, each with the pattern the core enforces."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from atf_core.api import MAX_SCHEDULE_PAGE, TASK_ID_PATTERN
from atf_core.chains import LINK_NAME_PATTERN
from atf_core.deadletters import POSITION_PATTERN
from atf_core.recurrence import SCHEDULE_NAME_PATTERN
from atf_core.schema import COLLECTION_PATTERN, NAME_PATTERN

TaskId = Annotated[str, Path(pattern=TASK_ID_PATTERN, description="A task id, as scheduling returned it.")]
LambdaName = Annotated[str, Path(pattern=NAME_PATTERN, description="A lambda of the stack's configuration.")]
Collection = Annotated[str, Path(pattern=COLLECTION_PATTERN, description="A collection of that lambda.")]
ScheduleName = Annotated[str, Path(pattern=SCHEDULE_NAME_PATTERN, description="The schedule's name.")]
ChainId = Annotated[str, Path(pattern=TASK_ID_PATTERN, description="A chain id, as creating it returned it.")]
LinkName = Annotated[str, Path(pattern=LINK_NAME_PATTERN, description="A link of that chain.")]

# A page of schedules: keyset paging by name, so a schedule put or deleted between pages moves no other one.
PageAfter = Annotated[
    str | None, Query(pattern=SCHEDULE_NAME_PATTERN, description="Start after this name: a page's `next`.")
]
PageLimit = Annotated[
    int, Query(ge=1, le=MAX_SCHEDULE_PAGE, description="At most this many (fewer where a response holds fewer).")
]
# A page of dead letters: keyset paging by (time of death, id), the order they are listed in.
DeadLetterAfter = Annotated[
    str | None, Query(pattern=POSITION_PATTERN, description="Start after this: a page's `next` (the same filters).")
]
