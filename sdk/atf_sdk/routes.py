"""Every path of the frontend API the SDK calls, in one place (the handler's routes: functions/frontend).

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


def task(task_id: str) -> str:
    return f"{TASKS}/{segment(task_id)}"


def task_change(task_id: str) -> str:
    return f"{task(task_id)}/change"


def bulk(action: str) -> str:
    """A bulk action (cancel, reschedule, reprioritise) on a selection of waiting tasks."""
    return f"{TASKS}/bulk/{action}"


def gate(lambda_name: str, collection: str | None) -> str:
    path = f"{GATES}/{segment(lambda_name)}"
    if collection is None:
        return path
    if collection == "":  # the path would end in "/", which routes to the whole lambda's gate
        raise InputError("collection: an empty name; leave it out to gate every collection of the lambda", "collection")
    return f"{path}/{segment(collection)}"


def stats(lambda_name: str) -> str:
    return f"/v1/lambdas/{segment(lambda_name)}/stats"


def dead_letters(lambda_name: str, action: str | None = None) -> str:
    """The lambda's dead letters; with an action (redrive, discard), that action on a selection of them."""
    path = f"/v1/lambdas/{segment(lambda_name)}/dead-letters"
    return f"{path}/{action}" if action else path


def schedule(name: str, action: str | None = None) -> str:
    """A periodic schedule; with an action (pause, resume), that action on it."""
    path = f"{SCHEDULES}/{segment(name)}"
    return f"{path}/{action}" if action else path


def chain(chain_id: str) -> str:
    return f"{CHAINS}/{segment(chain_id)}"


def link_retry(chain_id: str, link: str) -> str:
    return f"{chain(chain_id)}/links/{segment(link)}/retry"
