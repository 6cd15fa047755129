"""atf_local.fast_sqs: moto's SQS with its depth-bound shortcuts answers exactly as moto does (in-process
moto; the shortcuts are installed for the length of each test and taken off after)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.sqs import models

from atf_local.fast_sqs import fast_sqs

NAMES = [
    ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    ["MessageRetentionPeriod"],
    ["ApproximateNumberOfMessagesDelayed", "VisibilityTimeout", "QueueArn", "RedrivePolicy"],
    ["All"],
    ["FifoQueue"],
]


@pytest.fixture
def unpatched(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """moto's own functions, saved; the shortcuts installed until the test ends."""
    saved = {
        "unix_time": models.unix_time,
        "unix_time_millis": models.unix_time_millis,
        "retention": models.SQSBackend.is_message_valid_based_on_retention_period,
        "attributes": models.SQSBackend.get_queue_attributes,
    }
    for name in ("unix_time", "unix_time_millis"):
        monkeypatch.setattr(models, name, saved[name])
    monkeypatch.setattr(models.SQSBackend, "is_message_valid_based_on_retention_period", saved["retention"])
    monkeypatch.setattr(models.SQSBackend, "get_queue_attributes", saved["attributes"])
    monkeypatch.setattr(models, "_atf_fast", False, raising=False)
    fast_sqs()
    yield saved


def _queue_in_every_state(sqs: Any) -> str:
    """A queue holding visible, in-flight and delayed messages, with a dead-letter queue."""
    dlq = sqs.create_queue(QueueName="dead")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": "3"})
    url = sqs.create_queue(QueueName="work", Attributes={"RedrivePolicy": policy})["QueueUrl"]
    for batch in range(5):
        entries = [{"Id": str(i), "MessageBody": f"m{batch}-{i}"} for i in range(10)]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=60)
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300)
    return str(url)


def test_named_attributes_are_moto_s_own(unpatched: dict[str, Any]) -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        _queue_in_every_state(sqs)
        backend = models.sqs_backends["123456789012"]["us-east-1"]
        for names in NAMES:
            assert backend.get_queue_attributes("work", names) == unpatched["attributes"](backend, "work", names)
        with pytest.raises(models.InvalidAttributeName):
            backend.get_queue_attributes("work", ["ApproximateNumberOfMessages", "NoSuchAttribute"])


def test_the_retention_check_and_the_clock_are_moto_s_own(unpatched: dict[str, Any]) -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = _queue_in_every_state(sqs)
        backend = models.sqs_backends["123456789012"]["us-east-1"]
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"MessageRetentionPeriod": "60"})
        queue = backend.get_queue("work")
        fresh, old = queue._messages[0], queue._messages[1]
        old.sent_timestamp = int((time.time() - 61) * 1000)  # past the queue's 60 s
        for message in (fresh, old):
            ours = backend.is_message_valid_based_on_retention_period("work", message)
            assert ours == unpatched["retention"](backend, "work", message)
        assert (backend.is_message_valid_based_on_retention_period("work", fresh), ours) == (True, False)
        assert abs(models.unix_time() - unpatched["unix_time"]()) < 0.05
        assert abs(models.unix_time_millis() - unpatched["unix_time_millis"]()) < 50


def test_receive_and_delete_through_the_api_are_unchanged(unpatched: dict[str, Any]) -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = _queue_in_every_state(sqs)
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300)["Messages"]
        assert len(got) == 10
        entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)]
        assert len(sqs.delete_message_batch(QueueUrl=url, Entries=entries)["Successful"]) == 10
        counts = sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        )["Attributes"]
        assert counts == {"ApproximateNumberOfMessages": "30", "ApproximateNumberOfMessagesNotVisible": "10"}
