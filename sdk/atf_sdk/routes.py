"""Every path of the frontend API the SDK calls, in one place (the handler's routes: functions/frontend).

Where a call knows the lambda, it takes the lambda's route (/v1/lambdas/{lambda}/...), which IAM can grant
per lambda; without one, the all-lambdas route, which only a principal granted every lambda may call.

Every id and name is checked against the pattern the API's route holds it to before it goes into a path:
an empty one or one with a "/" would route elsewhere (a 403 for no route, or another route's refusal), so
it is refused here as the API refuses a bad path parameter, InputError naming it. Checked ones need no
escaping (":" is allowed in a segment); they are escaped all the same, one segment each.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from pydantic import StringConstraints, TypeAdapter, ValidationError

from atf_core.api import TASK_ID_PATTERN
from atf_core.chains import LINK_NAME_PATTERN
from atf_core.errors import InputError, input_error
from atf_core.recurrence import SCHEDULE_NAME_PATTERN
from atf_core.schema import COLLECTION_PATTERN, DOT_SEGMENTS, NAME_PATTERN

TASKS = "/v1/tasks"
BATCH = "/v1/tasks/batch"
GATES = "/v1/gates"
SCHEDULES = "/v1/schedules"
CHAINS = "/v1/chains"
OPENAPI = "/v1/openapi.json"


# Each path parameter: the field the API names when refusing it, and the pattern its route holds it to
# (functions/frontend/params.py).
TASK_ID = ("id", TASK_ID_PATTERN)
CHAIN_ID = ("id", TASK_ID_PATTERN)
LAMBDA = ("lambda", NAME_PATTERN)
COLLECTION = ("collection", COLLECTION_PATTERN)
SCHEDULE_NAME = ("name", SCHEDULE_NAME_PATTERN)
LINK_NAME = ("link", LINK_NAME_PATTERN)


def segment(value: str) -> str:
    return quote(str(value), safe=":")


@cache
def _matching(pattern: str) -> TypeAdapter[str]:
    return TypeAdapter(Annotated[str, StringConstraints(pattern=pattern)])


def checked(value: str, parameter: tuple[str, str]) -> str:
    """`value` as one path segment, once it matches its parameter's pattern and is no dot segment; else
    InputError naming it."""
    field, pattern = parameter
    try:
        _matching(pattern).validate_python(value, strict=True)
    except ValidationError as error:
        raise input_error(error, within=field) from None
    if value in DOT_SEGMENTS:
        raise InputError(f"{field} {value!r} is a step of a URL's path, not a name any route can reach", field)
    return segment(value)


def with_query(path: str, params: dict[str, Any]) -> str:
    given = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in params.items() if v is not None}
    return f"{path}?{urlencode(given)}" if given else path


def lambda_root(lambda_name: str) -> str:
    """Where one lambda's routes are: IAM can grant them for that lambda only (atf_core.access)."""
    return f"/v1/lambdas/{checked(lambda_name, LAMBDA)}"


def tasks(lambda_name: str | None) -> str:
    """Scheduling: the lambda's route, or without one the all-lambdas route."""
    return TASKS if lambda_name is None else f"{lambda_root(lambda_name)}/tasks"


def batch(lambda_name: str | None) -> str:
    return BATCH if lambda_name is None else f"{tasks(lambda_name)}/batch"


def task(task_id: str, lambda_name: str | None = None) -> str:
    """A task by id: the lambda's route when the caller names it (a task of another lambda is then not
    found), the all-lambdas route otherwise (a principal granted every lambda may call it)."""
    return f"{tasks(lambda_name)}/{checked(task_id, TASK_ID)}"


def task_change(task_id: str, lambda_name: str | None = None) -> str:
    return f"{task(task_id, lambda_name)}/change"


def bulk(action: str, lambda_name: str | None = None) -> str:
    """A bulk action (cancel, reschedule, reprioritise) on a selection of waiting tasks (of one lambda's)."""
    return f"{tasks(lambda_name)}/bulk/{action}"


def gate(lambda_name: str, collection: str | None) -> str:
    path = f"{lambda_root(lambda_name)}/gates"
    if collection is None:
        return path
    if collection == "":  # said apart from a bad name: leaving it out is what the caller may have meant
        raise InputError("collection: an empty name; leave it out to gate every collection of the lambda", "collection")
    return f"{path}/{checked(collection, COLLECTION)}"


def stats(lambda_name: str) -> str:
    return f"{lambda_root(lambda_name)}/stats"


def dead_letters(lambda_name: str, action: str | None = None) -> str:
    """The lambda's dead letters; with an action (redrive, discard), that action on a selection of them."""
    path = f"{lambda_root(lambda_name)}/dead-letters"
    return f"{path}/{action}" if action else path


def schedules(lambda_name: str | None) -> str:
    return SCHEDULES if lambda_name is None else f"{lambda_root(lambda_name)}/schedules"


def schedule(name: str, action: str | None = None, lambda_name: str | None = None) -> str:
    """A periodic schedule; with an action (pause, resume), that action on it."""
    path = f"{schedules(lambda_name)}/{checked(name, SCHEDULE_NAME)}"
    return f"{path}/{action}" if action else path


def chains(lambda_name: str | None) -> str:
    return CHAINS if lambda_name is None else f"{lambda_root(lambda_name)}/chains"


def chain(chain_id: str, lambda_name: str | None = None) -> str:
    return f"{chains(lambda_name)}/{checked(chain_id, CHAIN_ID)}"


def link_retry(chain_id: str, link: str, lambda_name: str | None = None) -> str:
    return f"{chain(chain_id, lambda_name)}/links/{checked(link, LINK_NAME)}/retry"
