"""The (lambda, priority) queues: where they are and what a message says.

A message names a task and the attempt it was enqueued at, never the
payload: the claim reads the task itself, so SQS stays small and cheap.
"""

from __future__ import annotations

import itertools
import json
import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from atf_core import tracing
from atf_core.calls import calls
from atf_core.config import StackConfig
from atf_core.definitions import queue_name
from atf_core.store.base import Flow

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


@dataclass(frozen=True)
class TaskMessage:
    task_id: str
    attempt: int
    due_ms: int  # the consumer may enqueue slightly early; the controller holds it until then
    collection: str  # lets a controller apply a collection's gate before it claims
    flow_key: str | None = None  # lets it apply the key's limits before it claims

    @property
    def flow(self) -> Flow:
        """What fairness takes turns between, as for the task's index entry (DueEntry.flow)."""
        return (self.collection, self.flow_key)

    def encode(self) -> str:
        body: dict[str, str | int] = {"id": self.task_id, "a": self.attempt, "due": self.due_ms, "c": self.collection}
        if self.flow_key is not None:
            body["k"] = self.flow_key
        return json.dumps(body, separators=(",", ":"))

    @classmethod
    def decode(cls, body: str) -> TaskMessage:
        raw = json.loads(body)
        flow_key = None if raw.get("k") is None else str(raw["k"])
        return cls(str(raw["id"]), int(raw["a"]), int(raw["due"]), str(raw["c"]), flow_key)


class QueueDirectory:
    """Queue URLs by (lambda, priority, part), looked up once and cached.

    A (lambda, priority) split over several queues (config.queue_parts_of) is one queue to its callers:
    its depth is theirs together, and each send goes to the next of them in turn, so the parts fill
    evenly and every worker host reads them all.
    """

    def __init__(self, sqs: SQSClient, config: StackConfig) -> None:
        self._sqs = sqs
        self._config = config
        self._urls: dict[tuple[str, str, int], str] = {}
        self._turns: dict[tuple[str, str], itertools.count[int]] = {}
        self._lock = threading.Lock()

    @calls("sqs:GetQueueUrl")
    def url(self, lambda_name: str, priority: str, part: int = 0) -> str:
        key = (lambda_name, priority, part)
        with self._lock:
            if key not in self._urls:
                name = queue_name(self._config, lambda_name, priority, part)
                self._urls[key] = self._sqs.get_queue_url(QueueName=name)["QueueUrl"]
            return self._urls[key]

    @calls("sqs:GetQueueAttributes", url)
    def depth(self, lambda_name: str, priority: str) -> int:
        """Messages waiting, held by controllers, or delayed, in all the priority's queues: what
        backpressure bounds."""
        total = 0
        for part in range(self._config.queue_parts_of(lambda_name)):
            attrs = self._sqs.get_queue_attributes(
                QueueUrl=self.url(lambda_name, priority, part),
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                    "ApproximateNumberOfMessagesDelayed",
                ],
            )["Attributes"]
            total += sum(int(v) for v in attrs.values())
        return total

    def _next_part(self, lambda_name: str, priority: str) -> int:
        parts = self._config.queue_parts_of(lambda_name)
        if parts == 1:
            return 0
        with self._lock:
            # Each consumer invocation starts at a random part: one that always began at the first would fill
            # it more than the others, which the worker services' scaling takes to be alike.
            turn = self._turns.setdefault((lambda_name, priority), itertools.count(random.randrange(parts)))
            return next(turn) % parts

    @calls("sqs:SendMessage", url)
    def send(self, lambda_name: str, priority: str, messages: Sequence[TaskMessage]) -> set[int]:
        """Send up to ten messages in one call (to the priority's next queue); the positions of those SQS
        did not take."""
        if not messages:
            return set()
        entries = [_entry(i, m) for i, m in enumerate(messages)]
        attributes: tracing.Attributes = {tracing.LAMBDA: lambda_name, tracing.PRIORITY: priority}
        attributes |= {tracing.TASK_IDS: [m.task_id for m in messages], tracing.ATTEMPTS: [m.attempt for m in messages]}
        url = self.url(lambda_name, priority, self._next_part(lambda_name, priority))
        with tracing.span("atf send", "PRODUCER", attributes):
            reply = self._sqs.send_message_batch(QueueUrl=url, Entries=entries)  # type: ignore[arg-type]
        return {int(failure["Id"]) for failure in reply.get("Failed") or []}


def _entry(position: int, message: TaskMessage) -> dict[str, str]:
    """One SendMessageBatch entry. A keyed task's flow key is its message group: on a standard queue that
    makes it an SQS fair queue, which keeps one key's backlog from delaying other keys' messages."""
    entry = {"Id": str(position), "MessageBody": message.encode()}
    if message.flow_key is not None:
        entry["MessageGroupId"] = message.flow_key
    return entry
