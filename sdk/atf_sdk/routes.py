"""Every path of the frontend API the SDK calls, in one place (the handler's routes: functions/frontend).

Where a call knows the lambda, it takes the lambda's route (/v1/lambdas/{lambda}/...), which IAM can grant
per lambda; without one, the all-lambdas route, which only a principal granted every lambda may call.

Names are escaped into one path segment each: valid ids, lambdas and collections need no escaping
(":" is allowed in a segment), and anything else stays one segment so the server refuses it, naming it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

from atf_core.errors import InputError

TASKS = "/v1/tasks"
BATCH = "/v1/tasks/batch"
GATES = "/v1/gates"
SCHEDULES = "/v1/schedules"
CHAINS = "/v1/chains"
OPENAPI = "/v1/openapi.json"


def segment(value: str) -> str:
    return quote(str(value), safe=":")


def with_query(path: str, params: dict[str, Any]) -> str:
    given = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in params.items() if v is not None}
    return f"{path}?{urlencode(given)}" if given else path


def lambda_root(lambda_name: str) -> str:
    """Where one lambda's routes are: IAM can grant them for that lambda only (atf_core.access)."""
    return f"/v1/lambdas/{segment(lambda_name)}"


def tasks(lambda_name: str | None) -> str:
    """Scheduling: the lambda's route, or without one the all-lambdas route."""
    return TASKS if lambda_name is None else f"{lambda_root(lambda_name)}/tasks"


def batch(lambda_name: str | None) -> str:
    return BATCH if lambda_name is None else f"{tasks(lambda_name)}/batch"


def task(task_id: str, lambda_name: str | None = None) -> str:
    """A task by id: the lambda's route when the caller names it (a task of another lambda is then not
    found), the all-lambdas route otherwise (a principal granted every lambda may call it)."""
    return f"{tasks(lambda_name)}/{segment(task_id)}"


def task_change(task_id: str, lambda_name: str | None = None) -> str:
    return f"{task(task_id, lambda_name)}/change"


def bulk(action: str, lambda_name: str | None = None) -> str:
    """A bulk action (cancel, reschedule, reprioritise) on a selection of waiting tasks (of one lambda's)."""
    return f"{tasks(lambda_name)}/bulk/{action}"


def gate(lambda_name: str, collection: str | None) -> str:
    path = f"{lambda_root(lambda_name)}/gates"
    if collection is None:
        return path
    if collection == "":  # the path would end in "/", which routes to the whole lambda's gate
        raise InputError("collection: an empty name; leave it out to gate every collection of the lambda", "collection")
    return f"{path}/{segment(collection)}"


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
    path = f"{schedules(lambda_name)}/{segment(name)}"
    return f"{path}/{action}" if action else path


def chains(lambda_name: str | None) -> str:
    return CHAINS if lambda_name is None else f"{lambda_root(lambda_name)}/chains"


def chain(chain_id: str, lambda_name: str | None = None) -> str:
    return f"{chains(lambda_name)}/{segment(chain_id)}"


def link_retry(chain_id: str, link: str, lambda_name: str | None = None) -> str:
    return f"{chain(chain_id, lambda_name)}/links/{segment(link)}/retry"
