"""A keyed request repeated after an upgrade: what an earlier version stored for it still matches.

Since a priority or max_attempts equal to the lambda's default is fingerprinted as left out, a request that
named the default has a new fingerprint; its task, stored with the old one (the request as given), must still
answer its repeat as the same request, not a 409."""

from __future__ import annotations

import uuid
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
