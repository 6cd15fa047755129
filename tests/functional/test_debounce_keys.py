"""Debounce per flow key (issue 16 §1): a burst of tasks with one key runs once, with the last payload, after a
quiet period, never later than a maximum delay (moto in-process, one scheduler at a time; schedulers racing on
one key are tests/api/test_debounce_keys_api.py)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from atf_core import lifecycle
from atf_core.config import LambdaSpec, StackConfig
from atf_core.debounce import START_MARGIN
from atf_core.errors import Conflict, InputError
from atf_core.schema import ScheduleRequest, Task, TaskStatus, to_ms
from atf_core.store.base import Change, CreateResult, TaskRef
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling, task_id_for
from atf_sdk.transaction import task_entries
from tests.functional.helpers import T0
from tests.functional.test_flow_keys import keyed_config

QUIET, MAX_DELAY = 10.0, 25.0


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def debounce_config(config: StackConfig) -> StackConfig:
    return keyed_config(config, debounce={"quiet_seconds": QUIET, "max_delay_seconds": MAX_DELAY})


class Keys:
    def __init__(self, aws: Any, config: StackConfig) -> None:
        self.store = DynamoTaskStore(aws.dynamodb, config)
        self.scheduling = Scheduling(self.store, config, clock=lambda: T0)

    def schedule(self, when: float, flow_key: str = "customer-1", **body: Any) -> CreateResult:
        request = ScheduleRequest.model_validate({"lambda": "work", "flow_key": flow_key, **body})
        return self.scheduling.schedule(request, at(when))

    def stored(self, task: Task) -> Task:
        found = self.store.get(task.id)
        assert found is not None
        return found

    def claim(self, task: Task, entry: datetime | None = None) -> bool:
        change = Change(now=T0, attempt=0, entry_ms=None if entry is None else to_ms(entry))
        return self.store.transition(TaskRef.of(task), lifecycle.CLAIM, change).applied


@pytest.fixture
def keys(aws: Any, debounce_config: StackConfig) -> Keys:
    return Keys(aws, debounce_config)


@pytest.mark.parametrize(
    ("debounce", "loc"),
    [
        ({"quiet_seconds": 0, "max_delay_seconds": 5}, ("quiet_seconds",)),
        ({"quiet_seconds": 5, "max_delay_seconds": 2}, ("max_delay_seconds",)),
        ({"quiet_seconds": 5, "max_delay_seconds": 86_401}, ("max_delay_seconds",)),
        ({"quiet_seconds": 5}, ("max_delay_seconds",)),
        ({"quiet_seconds": 5, "max_delay_seconds": 9, "mode": "x"}, ("mode",)),
    ],
)
def test_bad_debounce_is_refused_naming_the_field(debounce: dict[str, Any], loc: tuple[str, ...]) -> None:
    with pytest.raises(ValidationError) as caught:
        LambdaSpec.model_validate({"key_limits": {"debounce": debounce}})
    assert [e["loc"] for e in caught.value.errors()] == [("key_limits", "debounce", *loc)]


def test_debounce_with_singleton_is_refused_naming_debounce() -> None:
    with pytest.raises(ValidationError, match="choose one") as caught:
        LambdaSpec.model_validate(
            {"key_limits": {"singleton": True, "debounce": {"quiet_seconds": 1, "max_delay_seconds": 2}}}
        )
    assert [e["loc"] for e in caught.value.errors()] == [("key_limits", "debounce")]


def test_a_burst_is_one_task_run_after_the_quiet_period_with_the_last_payload(keys: Keys) -> None:
    first = keys.schedule(0, payload={"n": 1})
    assert first.created and not first.debounced and first.task.scheduled_at == at(QUIET)
    second = keys.schedule(3, payload={"n": 2})
    third = keys.schedule(6, payload={"n": 3})
    for merged in (second, third):
        assert merged.debounced and not merged.created and merged.task.id == first.task.id
    assert third.task.scheduled_at == at(6 + QUIET) and third.task.payload == {"n": 3}
    stored = keys.stored(first.task)
    assert stored.payload == {"n": 3} and stored.scheduled_at == at(6 + QUIET) and stored.next_at == at(6 + QUIET)
    assert stored.status is TaskStatus.NEW and stored.attempt == 0
    assert keys.store.key_holder("work", "customer-1") == first.task.id


def test_a_long_burst_runs_no_later_than_the_max_delay(keys: Keys) -> None:
    first = keys.schedule(0).task
    times = [keys.schedule(when).task.scheduled_at for when in (8, 16, 24)]
    assert times == [at(18), at(MAX_DELAY), at(MAX_DELAY)]
    assert keys.stored(first).scheduled_at == at(MAX_DELAY)


def test_other_keys_and_keyless_tasks_are_not_merged(keys: Keys) -> None:
    a = keys.schedule(0).task
    b = keys.schedule(1, flow_key="customer-2")
    assert b.created and b.task.id != a.id
    keyless = keys.scheduling.schedule(ScheduleRequest.model_validate({"lambda": "work"}), at(1))
    assert keyless.created and keyless.task.scheduled_at == at(1)  # no quiet period without a key


def test_a_later_requested_time_is_kept_for_the_bursts_first_task(keys: Keys) -> None:
    assert keys.schedule(0, delay_seconds=100).task.scheduled_at == at(100)


def test_a_claimed_task_is_not_changed_the_request_starts_a_new_burst(keys: Keys) -> None:
    first = keys.schedule(0, payload={"n": 1}).task
    assert keys.claim(first)
    second = keys.schedule(12, payload={"n": 2})
    assert second.created and not second.debounced and second.task.id != first.id
    assert keys.stored(first).payload == {"n": 1} and keys.stored(first).status is TaskStatus.CLAIMED
    assert keys.store.key_holder("work", "customer-1") == second.task.id
    assert keys.schedule(13, payload={"n": 3}).task.id == second.task.id


def test_a_message_sent_before_a_merge_is_stale_and_the_task_runs_once_from_its_new_entry(keys: Keys) -> None:
    first = keys.schedule(0, payload={"n": 1}).task
    sent_for = keys.stored(first).next_at  # the consumer sends the due task without writing
    keys.schedule(11, payload={"n": 2})  # merged after the send: the entry moves later
    assert not keys.claim(first, sent_for)  # the old message is refused at the claim
    new_entry = keys.stored(first).next_at
    assert new_entry == at(11 + QUIET) and keys.claim(first, new_entry)
    assert keys.stored(first).payload == {"n": 2}


def test_a_merged_requests_key_answers_its_repeat_the_same(keys: Keys) -> None:
    first = keys.schedule(0, payload={"n": 1}, key="one").task
    merged = keys.schedule(2, payload={"n": 2}, key="two")
    assert merged.debounced and merged.task.id == first.id
    assert keys.store.get(task_id_for("work", "two")) is None  # no task of its own: a record of the merge
    again = keys.schedule(4, payload={"n": 2}, key="two")
    assert again.debounced and not again.created and again.task.id == first.id
    assert keys.stored(first).scheduled_at == at(2 + QUIET)  # a repeat merges nothing again
    repeat_of_first = keys.schedule(5, payload={"n": 1}, key="one")
    assert repeat_of_first.task.id == first.id and not repeat_of_first.created and not repeat_of_first.debounced
    with pytest.raises(Conflict):
        keys.schedule(6, payload={"n": 9}, key="two")


def test_a_debounced_key_is_not_scheduled_inside_a_callers_transaction(debounce_config: StackConfig) -> None:
    with pytest.raises(InputError) as caught:
        task_entries(debounce_config, {"lambda": "work", "flow_key": "a"})
    assert caught.value.field == "flow_key"


def test_on_conflict_has_no_use_on_a_debounced_lambda(keys: Keys) -> None:
    with pytest.raises(InputError) as caught:
        keys.schedule(0, on_conflict="replace")
    assert caught.value.field == "on_conflict"


def test_a_merge_leaves_the_task_time_to_start_before_its_expire_at(keys: Keys) -> None:
    # Given a burst due at 10 s that expires at 20 s, merged at 8 s (its quiet period would end at 18 s)
    first = keys.schedule(0, expire_at=at(20).isoformat()).task
    # Then its run time moves only to START_MARGIN before the expiry (a millisecond before, it mostly expired)
    assert keys.schedule(8).task.scheduled_at == at(20) - START_MARGIN == at(15)
    assert keys.stored(first).scheduled_at == at(15)
    # And a merge that cannot leave that margin leaves the run time where it was
    assert keys.schedule(9).task.scheduled_at == at(15)
    other = keys.schedule(0, flow_key="other", expire_at=at(13).isoformat()).task
    assert keys.schedule(5, flow_key="other").task.scheduled_at == other.scheduled_at == at(10)


def test_an_expire_at_before_the_quiet_period_ends_is_refused_naming_it(keys: Keys) -> None:
    with pytest.raises(InputError) as caught:
        keys.schedule(0, expire_at=at(QUIET - 1).isoformat())
    assert caught.value.field == "expire_at"
