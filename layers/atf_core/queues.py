"""The (lambda, priority) queues: where they are and what a message says.

A message names a task and the attempt it was enqueued at, never the
payload: the claim reads the task itself, so SQS stays small and cheap.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from atf_core import tracing
from atf_core.calls import calls
from atf_core.config import StackConfig
from atf_core.definitions import queue_name

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


@dataclass(frozen=True)
class TaskMessage:
    task_id: str
    attempt: int
    due_ms: int  # the consumer may enqueue slightly early; the controller holds it until then
    collection: str  # lets a controller apply a collection's gate before it claims

    def encode(self) -> str:
        body = {"id": self.task_id, "a": self.attempt, "due": self.due_ms, "c": self.collection}
        return json.dumps(body, separators=(",", ":"))

    @classmethod
    def decode(cls, body: str) -> TaskMessage:
        raw = json.loads(body)
        return cls(task_id=str(raw["id"]), attempt=int(raw["a"]), due_ms=int(raw["due"]), collection=str(raw["c"]))


class QueueDirectory:
    """Queue URLs by (lambda, priority), looked up once and cached."""

    def __init__(self, sqs: SQSClient, config: StackConfig) -> None:
        self._sqs = sqs
        self._config = config
        self._urls: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    @calls("sqs:GetQueueUrl")
    def url(self, lambda_name: str, priority: str) -> str:
        key = (lambda_name, priority)
        with self._lock:
            if key not in self._urls:
                name = queue_name(self._config, lambda_name, priority)
                self._urls[key] = self._sqs.get_queue_url(QueueName=name)["QueueUrl"]
            return self._urls[key]

    @calls("sqs:GetQueueAttributes", url)
    def depth(self, lambda_name: str, priority: str) -> int:
        """Messages waiting, held by controllers, or delayed: what backpressure bounds."""
        attrs = self._sqs.get_queue_attributes(
            QueueUrl=self.url(lambda_name, priority),
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        return sum(int(v) for v in attrs.values())

    @calls("sqs:SendMessage", url)
    def send(self, lambda_name: str, priority: str, messages: Sequence[TaskMessage]) -> set[int]:
        """Send up to ten messages in one call; the positions of those SQS did not take."""
        if not messages:
            return set()
        entries = [{"Id": str(i), "MessageBody": m.encode()} for i, m in enumerate(messages)]
        attributes: tracing.Attributes = {tracing.LAMBDA: lambda_name, tracing.PRIORITY: priority}
        attributes |= {tracing.TASK_IDS: [m.task_id for m in messages], tracing.ATTEMPTS: [m.attempt for m in messages]}
        with tracing.span("atf send", "PRODUCER", attributes):
            reply = self._sqs.send_message_batch(QueueUrl=self.url(lambda_name, priority), Entries=entries)  # type: ignore[arg-type]
        return {int(failure["Id"]) for failure in reply.get("Failed") or []}
