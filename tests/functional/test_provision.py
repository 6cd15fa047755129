"""The embedded AWS's queues are made from the same QueueSpec as the CDK's (tests/infra/test_data.py checks the
template against it): visibility, retention, redrive, and the dead-letter queue's own retention."""

from __future__ import annotations

import json
from typing import Any

from atf_core.config import StackConfig
from atf_core.definitions import queue_specs


def attributes(aws: Any, name: str) -> dict[str, str]:
    url = aws.sqs.get_queue_url(QueueName=name)["QueueUrl"]
    return dict(aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"])


def test_each_queue_and_its_dead_letter_queue_have_their_specs_settings(aws: Any, config: StackConfig) -> None:
    for spec in queue_specs(config):
        queue, dead_letter = attributes(aws, spec.name), attributes(aws, spec.dead_letter_name)
        assert int(queue["VisibilityTimeout"]) == spec.visibility_timeout_s
        assert int(queue["MessageRetentionPeriod"]) == spec.retention_s
        redrive = json.loads(queue["RedrivePolicy"])
        assert (redrive["deadLetterTargetArn"], int(redrive["maxReceiveCount"])) == (
            dead_letter["QueueArn"],
            spec.max_receive_count,
        )
        assert int(dead_letter["MessageRetentionPeriod"]) == spec.dead_letter_retention_s
