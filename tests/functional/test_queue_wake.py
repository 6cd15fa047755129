"""The consumer keeps every worker queue awake, so that SQS goes on publishing the metrics a service at zero
scales from (atf_core.consumer.wake)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from atf_core.config import StackConfig
from atf_core.consumer.wake import WAKE_EVERY, QueueWake
from atf_core.definitions import queue_specs
from atf_core.queues import QueueDirectory
from atf_core.schema import utcnow
from atf_local.consumer_process import FakeLambdaContext
from functions.consumer import handler
from tests.functional.helpers import T0


class CountedReads:
    """An SQS client that counts GetQueueAttributes by queue URL and passes every call on."""

    def __init__(self, sqs: Any) -> None:
        self._sqs = sqs
        self.reads: Counter[str] = Counter()

    def get_queue_url(self, **kwargs: Any) -> Any:
        return self._sqs.get_queue_url(**kwargs)

    def get_queue_attributes(self, **kwargs: Any) -> Any:
        self.reads[kwargs["QueueUrl"]] += 1
        return self._sqs.get_queue_attributes(**kwargs)


def every_queue(sqs: Any, config: StackConfig) -> set[str]:
    queues = QueueDirectory(sqs, config)
    return {queues.url(q.lambda_name, q.priority, q.part) for q in queue_specs(config)}


@pytest.fixture
def split_config(config: StackConfig) -> StackConfig:
    """The test stack with work's queues split in two, so that a wake must reach every part."""
    work = config.lambdas["work"].model_copy(update={"queue_parts": 2})
    return config.model_copy(update={"lambdas": {**config.lambdas, "work": work}})


def test_each_queue_is_read_once_an_hour_and_not_in_between(aws: Any, split_config: StackConfig) -> None:
    # Given a wake over queues nobody sends to (provisioned with work's second parts)
    from atf_local.provision import provision

    provision(aws, split_config)
    sqs = CountedReads(aws.sqs)
    queue_wake = QueueWake(QueueDirectory(sqs, split_config), split_config)  # type: ignore[arg-type]
    expected = every_queue(aws.sqs, split_config)
    assert len(expected) == 7  # work: 3 priorities x 2 parts; sleepy: 1

    # When it runs at the first poll, through the hour, and past it
    queue_wake.wake(T0, 1.0)
    after_first = dict(sqs.reads)
    for minutes in (1, 30, 59):
        queue_wake.wake(T0 + timedelta(minutes=minutes), 1.0)
    in_the_hour = dict(sqs.reads)
    queue_wake.wake(T0 + WAKE_EVERY, 1.0)

    # Then every queue was read once at first, none again within the hour, and each once more after it
    assert after_first == dict.fromkeys(expected, 1)
    assert in_the_hour == after_first
    assert dict(sqs.reads) == dict.fromkeys(expected, 2)


def test_a_failed_read_waits_for_the_next_round(aws: Any, config: StackConfig) -> None:
    # Given a wake whose SQS refuses the reads
    class Refusing(CountedReads):
        def get_queue_attributes(self, **kwargs: Any) -> Any:
            super().get_queue_attributes(**kwargs)
            raise RuntimeError("throttled")

    sqs = Refusing(aws.sqs)
    queue_wake = QueueWake(QueueDirectory(sqs, config), config)  # type: ignore[arg-type]

    # When it fails at one poll, and the consumer polls again a second later
    with pytest.raises(RuntimeError):
        queue_wake.wake(T0, 1.0)
    queue_wake.wake(T0 + timedelta(seconds=1), 1.0)

    # Then it tried one queue once, rather than every poll: the next try is the next round's
    assert sum(sqs.reads.values()) == 1


@pytest.mark.parametrize(("group", "wakes"), [(0, True), (1, False)])
def test_a_warm_consumer_lambda_of_the_first_group_wakes_every_queue_each_hour(
    consumer_env: Any, config: StackConfig, monkeypatch: pytest.MonkeyPatch, group: int, wakes: bool
) -> None:
    # Given a stack with no task at all, and the consumer of one of two groups, warm: it has polled
    shift = {"by": timedelta(0)}
    monkeypatch.setattr(handler, "process_clock", lambda: utcnow() + shift["by"])
    reads: Counter[str] = Counter()
    handler._clients().sqs.meta.events.register(
        "provide-client-params.sqs.GetQueueAttributes", lambda params, **_: reads.update([params["QueueUrl"]])
    )
    handler._consumer(group, 2).poll()
    handler._due_soon(group, 2)

    # When its Lambda is invoked an hour later (its last poll comes whatever the machine's load)
    reads.clear()
    shift["by"] = WAKE_EVERY
    result = handler.lambda_handler({"group": {"index": group, "of": 2}}, FakeLambdaContext(timeout_s=4.0))

    # Then the first group read every queue once (though it sent nothing), and the other group none
    expected = dict.fromkeys(every_queue(handler._clients().sqs, config), 1) if wakes else {}
    assert result["polls"] >= 1 and dict(reads) == expected
