"""What a route scoped to one lambda (/v1/lambdas/{lambda_name}/...) may see: only that lambda's things.

IAM granted the caller the lambda of the path, not the task, schedule or chain an id names (a task's lambda
is checked by Scheduling in the read it makes anyway: `lambda_name=`). One that
belongs to another lambda is answered exactly as one that does not exist (404), so a scoped caller learns
nothing of other lambdas; a body naming another lambda is refused (400, naming the field).
"""

from __future__ import annotations

from atf_core.errors import InputError, NotFound
from atf_core.recurrence import Schedule
from functions.frontend.services import services


def same_lambda(lambda_name: str, given: str | None, field: str = "lambda") -> str:
    """The path's lambda, when the body names the same one or none."""
    if given is not None and given != lambda_name:
        raise InputError(f"{field}: {given!r}, but the path is lambda {lambda_name!r}", field)
    return lambda_name


def owned_schedule(lambda_name: str, name: str) -> Schedule:
    schedule = services().schedules.get(name)
    if schedule.spec.lambda_ != lambda_name:
        raise NotFound(f"no schedule {name!r}", "name")
    return schedule


def owned_chain(lambda_name: str, chain_id: str) -> None:
    """A chain is the lambda's when every link runs it (a chain spanning lambdas is an all-lambdas one)."""
    if services().chains.lambdas_of(chain_id) != {lambda_name}:
        raise NotFound(f"no chain {chain_id!r}", "id")
