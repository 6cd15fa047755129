"""Who owns a limit's running slot when a claim does not happen: a slot is given back only by the take that
added it. A duplicate message of a running task (SQS delivers at least once; the consumer sends again after
its enqueue timeout) asked for the slot its task already held, and its refused claim gave that slot back:
the lambda's max_running was then passed while the task still ran. A claim whose write failed gives its
slot back and keeps its message, to try again shortly."""

from __future__ import annotations

from typing import Any

import pytest

from atf_core import lifecycle
from atf_core.config import Limits, StackConfig
from atf_core.limits import Grant, Limiter, Refusal
from atf_core.queues import TaskMessage
from atf_core.schema import ScheduleRequest, TaskStatus, to_ms, utcnow
from atf_core.store.base import Change, TaskRef
from atf_core.store.counters import Counters
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling
from atf_sdk.worker.buffers import Buffered, Received
from atf_sdk.worker.controller import CLAIM_RETRY_S, ControllerSettings
from tests.conftest import work_controller


def one_at_a_time(config: StackConfig) -> StackConfig:
    lambdas = dict(config.lambdas)
    lambdas["work"] = lambdas["work"].model_copy(update={"limits": Limits(max_running=1)})
    return config.model_copy(update={"lambdas": lambdas})


def sent(store: DynamoTaskStore, config: StackConfig) -> Buffered:
    """A task of `work` enqueued, and its message as a worker host's buffer holds it."""
    task = Scheduling(store, config).schedule(ScheduleRequest.model_validate({"lambda": "work"})).task
    now = utcnow()
    store.transition(TaskRef.of(task), lifecycle.ENQUEUE, Change(now=now, due_by=now))
    rank = config.lambdas["work"].priorities.index(task.priority)
    message = TaskMessage(task.id, 0, to_ms(now), "default", None)
    return Buffered(rank, to_ms(now), 0, message, "https://queue.invalid/work", "receipt-1")


def again(item: Buffered) -> Buffered:
    return Buffered(item.rank, item.due_ms, 1, item.message, item.queue_url, "receipt-2")


def test_a_duplicate_message_of_a_running_task_leaves_its_slot_to_it(
    aws: Any, config: StackConfig, drained: list[Any]
) -> None:
    # Given a lambda that runs one task at a time, task A claimed (holding the slot) and task B held back
    config = one_at_a_time(config)
    controller, store, _ = work_controller(aws, config, drained)
    counters = Counters(aws.dynamodb, config.table_name)
    a, b = sent(store, config), sent(store, config)
    running = controller.claim("work", a)
    assert running is not None and running.status is TaskStatus.CLAIMED
    assert controller.claim("work", b) is None
    # When a duplicate of A's message comes, and its claim is refused
    assert controller.claim("work", again(a)) is None
    # Then A still holds the slot, and B is still held back while A runs
    assert set(counters.slots("work")) == {running.id}
    assert controller.claim("work", b) is None
    assert store.get(b.message.task_id).status is TaskStatus.ENQUEUED  # type: ignore[union-attr]


def test_a_refusal_by_a_later_scope_gives_back_only_the_slots_this_start_took(aws: Any, config: StackConfig) -> None:
    # Given a task holding the lambda's slot, its collection limited to one start a second, that start spent
    lambdas = dict(config.lambdas)
    throttled = {"default": Limits(max_starts_per_second=1)}
    lambdas["work"] = lambdas["work"].model_copy(
        update={"limits": Limits(max_running=2), "collection_limits": throttled}
    )
    config = config.model_copy(update={"lambdas": lambdas})
    counters = Counters(aws.dynamodb, config.table_name)
    limiter = Limiter(counters, config, clock=lambda: 1_000.5)
    assert isinstance(limiter.acquire("work", "default", "running"), Grant)
    # When the same task asks again (a duplicate message) and the collection's rate refuses it
    assert isinstance(limiter.acquire("work", "default", "running"), Refusal)
    # Then the slot it held is still held
    assert set(counters.slots("work")) == {"running"}


def failing_its_first_claim(store: DynamoTaskStore) -> None:
    real = store.transition
    claims: list[str] = []

    def transition(ref: TaskRef, what: lifecycle.Transition, change: Change) -> Any:
        if what is lifecycle.CLAIM:
            claims.append(ref.id)
            if len(claims) == 1:
                raise RuntimeError("ProvisionedThroughputExceededException, past botocore's retries")
        return real(ref, what, change)

    store.transition = transition  # type: ignore[method-assign]


def test_a_claim_whose_write_failed_gives_its_slot_back_and_tries_again_shortly(
    aws: Any, config: StackConfig, drained: list[Any]
) -> None:
    # Given a lambda that runs one task at a time, a task's message in a host's buffer, and a claim write that
    # fails once (not refused: raised)
    config = one_at_a_time(config)
    controller, store, _ = work_controller(aws, config, drained)
    item = sent(store, config)
    buffer = controller._buffers["work"]
    buffer.put_many(item.rank, [Received(item.message, item.queue_url, item.receipt)], more=False)
    for rank in range(len(config.lambdas["work"].priorities)):
        buffer.may_hold_more(rank, False)
    failing_its_first_claim(store)
    # When an executor asks for work: nothing now, and the slot the failed claim was granted is free again
    assert controller.next_work("work", wait_s=0.1) is None
    assert Counters(aws.dynamodb, config.table_name).slots("work") == {}
    # Then the message waits in the buffer (not out of sight for its visibility timeout), and is claimed next
    claimed = controller.next_work("work", wait_s=CLAIM_RETRY_S + 2)
    assert claimed is not None and claimed.id == item.message.task_id and claimed.status is TaskStatus.CLAIMED


def test_a_grant_whose_later_write_fails_gives_back_the_slot_it_took(
    aws: Any, config: StackConfig, drained: list[Any], monkeypatch: Any
) -> None:
    # Given a lambda that runs one task at a time, whose collection's starts are counted too
    config = one_at_a_time(config)
    limited = config.lambdas["work"].model_copy(
        update={"collection_limits": {"default": Limits(max_starts_per_second=100)}}
    )
    config = config.model_copy(update={"lambdas": {**config.lambdas, "work": limited}})
    controller, store, _ = work_controller(aws, config, drained)
    counters = Counters(aws.dynamodb, config.table_name)
    item = sent(store, config)

    def throttled(*_: Any, **__: Any) -> Any:
        raise RuntimeError("ProvisionedThroughputExceededException, past botocore's retries")

    # When the collection's start counter fails after the lambda's slot was taken
    monkeypatch.setattr(Counters, "take_start", throttled)
    assert controller.claim("work", item) is None
    # Then the slot is not left held by a task that does not run: another task may start
    assert counters.slots("work") == {}
    monkeypatch.undo()
    assert controller.claim("work", sent(store, config)) is not None


def held_back(
    aws: Any, config: StackConfig, drained: list[Any], capacity: int, **limits: Any
) -> tuple[Any, Any, Buffered]:
    """A lambda limited as given, one task of its `default` collection running; the controller's buffer of
    `capacity` half full (or with no room for a full receive beside one more), and a second task refused."""
    spec = config.lambdas["work"].model_copy(update=limits)
    config = config.model_copy(update={"lambdas": {**config.lambdas, "work": spec}})
    controller, store, _ = work_controller(aws, config, drained, ControllerSettings(buffer_per_lambda=capacity))
    assert controller.claim("work", sent(store, config)) is not None
    buffer, waiting = controller._buffers["work"], sent(store, config)
    for n in range(capacity // 2):
        buffer.hold(
            Buffered(0, 0, 10 + n, TaskMessage(f"other-{n}", 0, 0, "other"), "https://queue.invalid/w", "r"), 60
        )
    return controller, store, waiting


@pytest.mark.parametrize("capacity", [20, 12])
def test_a_collections_backlog_goes_back_to_the_index_rather_than_fill_the_buffer(
    aws: Any, config: StackConfig, drained: list[Any], capacity: int
) -> None:
    """Else the lambda's other collections stay in SQS while one collection's backlog waits in every host's
    buffer (a buffer of 12 half full has no room for a full receive of ten beside one more)."""
    limits = {"collection_limits": {"default": Limits(max_running=1)}}
    controller, store, waiting = held_back(aws, config, drained, capacity, **limits)
    assert controller.claim("work", waiting) is None
    after = store.get(waiting.message.task_id)
    assert after is not None and after.status is TaskStatus.NEW and after.attempt == 0
    assert after.next_at is not None and to_ms(after.next_at) > waiting.message.due_ms  # deferred, not lost
    assert controller._buffers["work"].room() == capacity - capacity // 2  # not held in the buffer


def test_a_lambdas_own_limit_keeps_its_tasks_in_the_buffer(aws: Any, config: StackConfig, drained: list[Any]) -> None:
    """No other task of the lambda could start meanwhile: sending it back to the index would only cost writes."""
    controller, store, waiting = held_back(aws, config, drained, 20, limits=Limits(max_running=1))
    assert controller.claim("work", waiting) is None
    after = store.get(waiting.message.task_id)
    assert after is not None and after.status is TaskStatus.ENQUEUED and to_ms(after.next_at) <= waiting.message.due_ms
    assert controller._buffers["work"].room() == 20 - 10 - 1  # held, to be asked again
