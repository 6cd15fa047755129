"""Bounds derived from a lambda's planned rate (issue 18 §1): shards, queue parts, in-flight bounds and
consumer groups follow from `rate`; explicit settings win; a rate the bounds cannot hold is refused naming
the field."""

from __future__ import annotations

import math

import pytest
from moto import mock_aws
from pydantic import ValidationError

from atf_core import sizing
from atf_core.aws import make_clients
from atf_core.config import MOST_SHARDS, LambdaSpec, StackConfig
from atf_core.definitions import queue_specs
from atf_core.queues import QueueDirectory, TaskMessage
from atf_sdk.worker.buffers import WorkBuffer


def config_with(**spec: object) -> StackConfig:
    return StackConfig.model_validate(
        {"name": "s", "lambdas": {"a": {"priorities": ["high", "low"], "default_priority": "low", **spec}}}
    )


def test_no_rate_keeps_the_stack_defaults() -> None:
    config = config_with()
    assert (config.shards_of("a"), config.queue_parts_of("a"), config.in_flight_cap_of("a")) == (4, 1, 200)
    assert config.planned_rate == 0


def test_shards_follow_the_rate_at_half_a_partitions_write_limit() -> None:
    # 10,000 tasks/s x 2 index units = 20,000 units/s over partitions of 1,000 at half: 40 shards
    assert config_with(rate=10_000).shards_of("a") == 40
    assert config_with(rate=100).shards_of("a") == 4  # never below the stack's default
    assert config_with(rate=10_000, shards=7).shards_of("a") == 7  # set explicitly: kept


def test_a_priority_past_half_sqs_in_flight_cap_is_split() -> None:
    # 100,000 tasks/s held 2 s (lookahead 1 + half a poll 0.5 + 0.5 to claim): 200,000 in flight, 60,000 a queue
    config = config_with(rate=100_000)
    assert config.queue_parts_of("a") == math.ceil(200_000 / 60_000) == 4
    assert config.in_flight_cap_of("a") == 50_000  # each part's share, not the fixed 200
    assert config_with(rate=20_000).queue_parts_of("a") == 1
    assert config_with(rate=100_000, queue_parts=2).queue_parts_of("a") == 2


def test_queue_specs_name_each_part_and_keep_the_first_name() -> None:
    specs = queue_specs(config_with(queue_parts=3))
    assert [s.name for s in specs] == ["s-a-high", "s-a-high-1", "s-a-high-2", "s-a-low", "s-a-low-1", "s-a-low-2"]
    assert [s.label for s in specs][:3] == ["a-high", "a-high-1", "a-high-2"]


def test_a_rate_the_bounds_cannot_hold_is_refused_naming_the_field() -> None:
    too_many_shards = (MOST_SHARDS + 1) * 250
    with pytest.raises(ValidationError, match=r"lambdas\.a\.rate: .* shards, more than 1024"):
        config_with(rate=too_many_shards)
    with pytest.raises(ValidationError, match=r"lambdas\.a\.rate: .* queues per priority"):
        StackConfig.model_validate({"lookahead": 60, "lambdas": {"a": {"rate": 100_000}}})
    with pytest.raises(ValidationError, match="queue_parts"):
        LambdaSpec(queue_parts=0)


def test_consumer_groups_follow_the_planned_rate_and_the_consumers_cpu() -> None:
    # A full vCPU at half use, 2 ms a task: 250 tasks/s a group
    assert sizing.group_rate(1769) == 250
    assert sizing.consumer_groups_for(100_000, 1769) == 400
    assert sizing.consumer_groups_for(100_000, 10_240) == 400  # one thread decides: more vCPUs do not help
    assert sizing.consumer_groups_for(0, 512) == 1
    # a measured figure instead of the planning one, for the capacity model's other designs
    assert sizing.group_rate(1769, 0.001) == 500  # a full vCPU exactly: 1769 * (1 / 1769) would be a hair less
    assert sizing.consumer_groups_for(10_000, 1769, cpu_s_per_task=0.001) == 20
    assert sizing.consumer_vcpus(884) == 884 / 1769 and sizing.consumer_vcpus(3538) == 1.0
    assert sizing.most_consumer_groups() == 450  # (1,000 - 100 unreserved) / 2 executions a group


def test_sends_go_round_the_parts_and_the_depth_is_theirs_together() -> None:
    config = config_with(queue_parts=3)
    with mock_aws():
        clients = make_clients(None, region="us-east-1")
        for spec in queue_specs(config):
            clients.sqs.create_queue(QueueName=spec.name)
        directory = QueueDirectory(clients.sqs, config)
        for n in range(7):
            directory.send("a", "high", [TaskMessage(f"t{n}", 1, 0, "")])
        held = [
            int(clients.sqs.get_queue_attributes(QueueUrl=directory.url("a", "high", part), AttributeNames=["All"])[
                "Attributes"
            ]["ApproximateNumberOfMessages"])
            for part in range(3)
        ]  # fmt: skip
        assert sorted(held) == [2, 2, 3]  # in turn, from a random first part
        assert directory.depth("a", "high") == 7
        assert directory.depth("a", "low") == 0


def test_a_split_priority_holds_lower_ones_back_while_any_of_its_parts_may_hold_more() -> None:
    buffer = WorkBuffer(capacity=100, ranks=2, parts=2)
    buffer.may_hold_more(0, False, part=0)
    assert buffer.batch(1) == 0  # part 1 of the higher priority has not been read yet
    buffer.may_hold_more(0, False, part=1)
    assert buffer.batch(1) > 0
    buffer.put_many(0, [], more=True, part=1)
    assert buffer.expects_more(0, part=1) and not buffer.expects_more(0, part=0)
    assert buffer.batch(1) == 0
