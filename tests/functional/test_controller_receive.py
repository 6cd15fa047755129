"""A worker host's controller at its edges: a receive that brings a message it cannot read, and messages
that come due or back to its buffer as the host drains (in-process moto, one controller)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from atf_core.config import Limits, StackConfig
from atf_core.limits import Refusal
from atf_core.queues import TaskMessage
from atf_core.schema import ScheduleRequest, Task, TaskStatus, to_ms, utcnow
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling
from atf_sdk.worker.buffers import Received
from atf_sdk.worker.controller import STRANDED_S, ControllerSettings
from tests.conftest import work_controller


def scheduled(store: DynamoTaskStore, config: StackConfig) -> Task:
    return Scheduling(store, config).schedule(ScheduleRequest.model_validate({"lambda": "work"})).task


def message_of(task: Task) -> TaskMessage:
    return TaskMessage(task.id, 0, to_ms(utcnow()), task.collection, task.flow_key)


def ready_to_receive(controller: Any) -> None:
    """No priority waits for a higher one's first receive."""
    buffer = controller._buffers["work"]
    for rank in range(len(buffer._more)):
        buffer.may_hold_more(rank, False)


@pytest.mark.parametrize("body", ['{"id": "x"}', "not json", '["a list"]'])
def test_a_message_that_is_no_task_message_does_not_hold_up_those_received_with_it(
    aws: Any, config: StackConfig, drained: list[Any], caplog: pytest.LogCaptureFixture, body: str
) -> None:
    # Given a queue holding a message sent by hand (or by another version), then a task's
    controller, store, _ = work_controller(aws, config, drained, limits=False)
    url, task = controller.queue_url("work", "normal"), scheduled(store, config)
    aws.sqs.send_message(QueueUrl=url, MessageBody=body)
    aws.sqs.send_message(QueueUrl=url, MessageBody=message_of(task).encode())
    ready_to_receive(controller)
    # When one receive brings both
    assert controller._receive_once("work", "normal", 1)
    # Then the task is claimed now, and the other is named in the log and left for the dead-letter queue
    claimed = controller.next_work("work", wait_s=0.5)
    assert claimed is not None and claimed.id == task.id
    assert any("is not a task message" in r.getMessage() for r in caplog.records)


def test_a_message_put_back_as_the_host_drains_is_handed_back_to_sqs(
    aws: Any, config: StackConfig, drained: list[Any]
) -> None:
    # Given a lambda that runs one task at a time, and a task's message received
    spec = config.lambdas["work"].model_copy(update={"limits": Limits(max_running=1)})
    config = config.model_copy(update={"lambdas": {**config.lambdas, "work": spec}})
    controller, store, _ = work_controller(aws, config, drained)
    url, task = controller.queue_url("work", "normal"), scheduled(store, config)
    aws.sqs.send_message(QueueUrl=url, MessageBody=message_of(task).encode())
    ready_to_receive(controller)
    controller._receive_once("work", "normal", 1)
    released: list[str] = []
    release = controller._release

    def recorded(items: Any) -> None:
        items = list(items)
        released.extend(item.message.task_id for item in items)
        release(items)

    def refused_as_the_drain_begins(*_: Any, **__: Any) -> Refusal:
        controller.drain()
        return Refusal("work runs 1 at most")

    controller._release = recorded
    controller._limiter.acquire = refused_as_the_drain_begins
    # When an executor's claim is refused by the limit while SIGTERM drains the host
    assert controller.next_work("work", wait_s=0.5) is None
    # Then its message goes back to SQS at once, not left in a buffer no one empties again
    assert released == [task.id]
    assert controller._buffers["work"].drain() == []
    reply = aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    assert [TaskMessage.decode(m["Body"]).task_id for m in reply.get("Messages", [])] == [task.id]


def test_a_message_that_comes_due_as_the_host_drains_is_handed_back_not_claimed(
    aws: Any, config: StackConfig, drained: list[Any]
) -> None:
    # Given a task's message received a moment before the task is due, and an executor waiting for work
    controller, store, _ = work_controller(aws, config, drained, limits=False)
    url, task = controller.queue_url("work", "normal"), scheduled(store, config)
    due_soon = TaskMessage(task.id, 0, to_ms(utcnow()) + 300, task.collection, task.flow_key)
    aws.sqs.send_message(QueueUrl=url, MessageBody=due_soon.encode())
    ready_to_receive(controller)
    controller._receive_once("work", "normal", 1)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(controller.next_work, "work", 5.0)
        # When SIGTERM begins the drain before it is due (its receives still in: the buffers not yet emptied)
        time.sleep(0.1)
        controller._draining.set()
        # Then the waiting executor gets no work once it is due, the task is not claimed, and its message is back
        assert waiting.result(timeout=10) is None
    assert store.get(task.id).status is TaskStatus.NEW  # type: ignore[union-attr]
    reply = aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    assert [TaskMessage.decode(m["Body"]).task_id for m in reply.get("Messages", [])] == [task.id]


def test_a_due_message_no_thread_comes_for_goes_back_to_sqs_for_another_host(
    aws: Any, config: StackConfig, drained: list[Any]
) -> None:
    # Given a host (receiving only for threads waiting for work) that holds a due task's message while none waits:
    # it came early, received while a thread was idle, and every thread is busy now
    controller, store, _ = work_controller(aws, config, drained, ControllerSettings(gate_refresh_s=0), limits=False)
    url, task = controller.queue_url("work", "normal"), scheduled(store, config)
    aws.sqs.send_message(QueueUrl=url, MessageBody=message_of(task).encode())
    ready_to_receive(controller)
    [raw] = aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=300)["Messages"]
    buffer = controller._buffers["work"]
    buffer.put_many(1, [Received(TaskMessage.decode(raw["Body"]), url, raw["ReceiptHandle"])], more=False)
    # When its receive loop runs a while with no thread waiting
    loop = threading.Thread(target=controller._receive_loop, args=("work", "normal", 1), daemon=True)
    loop.start()
    time.sleep(STRANDED_S + 0.5)
    controller._draining.set()
    loop.join(5)
    # Then the message is visible in SQS again, for a host with a free thread, and this one holds nothing
    again = aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1).get("Messages", [])
    assert [TaskMessage.decode(m["Body"]).task_id for m in again] == [task.id]
    assert buffer.take(0.01) is None


def test_a_draining_host_hands_back_what_it_holds_before_its_polls_in_flight_end(
    aws: Any, config: StackConfig, drained: list[Any]
) -> None:
    # Given a host with a prefetch, long-polling its queue (5 s), holding a due task's message no thread took
    settings = ControllerSettings(gate_refresh_s=0, receive_wait_s=5, prefetch_per_lambda=5)
    controller, store, _ = work_controller(aws, config, drained, settings, limits=False)
    url, task = controller.queue_url("work", "normal"), scheduled(store, config)
    aws.sqs.send_message(QueueUrl=url, MessageBody=message_of(task).encode())
    ready_to_receive(controller)
    [raw] = aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=300)["Messages"]
    controller._buffers["work"].put_many(
        1, [Received(TaskMessage.decode(raw["Body"]), url, raw["ReceiptHandle"])], more=False
    )

    class LongPoll:  # in-process moto answers at once: a poll that runs its time, finding nothing
        meta = controller._long_poll.meta

        def receive_message(self, **_: Any) -> dict[str, Any]:
            time.sleep(4)
            return {"Messages": []}

    controller._long_poll = LongPoll()  # type: ignore[assignment]
    loop = threading.Thread(target=controller._receive_loop, args=("work", "normal", 1), daemon=True)
    controller._receivers["work/normal"] = loop  # the drain waits for it, as for a receiver the host started
    loop.start()
    time.sleep(0.3)  # its long poll is in flight
    # When it drains (SIGTERM), then the message is visible again well before that poll ends
    started = time.monotonic()
    draining = threading.Thread(target=controller.drain, daemon=True)
    draining.start()
    again: list[Any] = []
    while not again and time.monotonic() - started < 3:
        again = aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1).get("Messages", [])
    assert [TaskMessage.decode(m["Body"]).task_id for m in again] == [task.id]
    assert time.monotonic() - started < 3 and draining.is_alive(), "handed back while the poll was in flight"
    draining.join(10)
