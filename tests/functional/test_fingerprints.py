"""A keyed request repeated after an upgrade: what an earlier version stored for it still matches.

Since a priority or max_attempts equal to the lambda's default is fingerprinted as left out, a request that
named the default has a new fingerprint; its task, stored with the old one (the request as given), must still
answer its repeat as the same request, not a 409."""

from __future__ import annotations

import uuid
from datetime import timedelta, timezone
from typing import Any

import pytest

from atf_core.config import StackConfig
from atf_core.errors import Conflict
from atf_core.schema import ScheduleRequest
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling, build_task
from tests.functional.helpers import T0


def test_a_task_stored_with_the_fingerprint_of_the_request_as_given_answers_its_repeat(
    aws: Any, config: StackConfig
) -> None:
    store = DynamoTaskStore(aws.dynamodb, config)
    default = config.lambdas["work"].default_priority
    body = {"lambda": "work", "priority": default, "key": f"old-{uuid.uuid4().hex}", "delay_seconds": 60}
    request = ScheduleRequest.model_validate(body)
    # Given the task an earlier version stored, with the fingerprint of the request as given
    stored = store.create(build_task(config, request, T0), request.fingerprint())
    assert stored.created
    # When the same request comes again
    again = Scheduling(store, config).schedule(request, T0)
    # Then it is the same request: that task, no conflict
    assert (again.task.id, again.created, again.conflict) == (stored.task.id, False, False)
    # And another request with that key still conflicts
    with pytest.raises(Conflict):
        Scheduling(store, config).schedule(ScheduleRequest.model_validate({**body, "payload": {"n": 2}}), T0)


def written(offset_hours: float, hours_after_t0: float = 1) -> str:
    """A moment some hours after T0, written with a UTC offset of `offset_hours`."""
    zone = timezone(timedelta(hours=offset_hours))
    return (T0 + timedelta(hours=hours_after_t0)).astimezone(zone).isoformat()


@pytest.mark.parametrize("offset_hours", [1, -9.5])
def test_a_repeat_writing_its_times_with_another_offset_is_the_same_request(
    aws: Any, config: StackConfig, offset_hours: float
) -> None:
    """A retry from a host in another time zone: the instants are what the request asks for."""
    store, key = DynamoTaskStore(aws.dynamodb, config), f"tz-{uuid.uuid4().hex}"
    body = {"lambda": "work", "key": key, "run_at": written(0), "expire_at": written(0, 20)}
    first = Scheduling(store, config).schedule(ScheduleRequest.model_validate(body), T0)
    shifted = {**body, "run_at": written(offset_hours), "expire_at": written(offset_hours, 20)}
    again = Scheduling(store, config).schedule(ScheduleRequest.model_validate(shifted), T0)
    assert (again.task.id, again.created) == (first.task.id, False)
    with pytest.raises(Conflict):  # another instant is another request
        later = {**body, "run_at": written(0, 2)}
        Scheduling(store, config).schedule(ScheduleRequest.model_validate(later), T0)


def test_a_task_stored_with_the_defaults_left_out_and_its_times_as_given_answers_its_repeat(
    aws: Any, config: StackConfig
) -> None:
    # Given the task the version before stored: the default priority left out, the run time as given
    store = DynamoTaskStore(aws.dynamodb, config)
    default = config.lambdas["work"].default_priority
    body = {"lambda": "work", "priority": default, "key": f"v2-{uuid.uuid4().hex}", "run_at": written(1)}
    request = ScheduleRequest.model_validate(body)
    stored = store.create(build_task(config, request, T0), request.model_copy(update={"priority": None}).fingerprint())
    # When the same request comes again, then it is that task
    again = Scheduling(store, config).schedule(request, T0)
    assert (again.task.id, again.created, again.conflict) == (stored.task.id, False, False)
