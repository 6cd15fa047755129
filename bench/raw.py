"""The embedded backend's ceiling: the calls one task makes, in a raw loop, with no framework around them.

The mix (calls per task by API) comes from the metered end-to-end run; each
loop turn is one group of ten tasks: their puts, the consumer's batch reads
(or its enqueue writes, with record_enqueued), the send, receives, claims,
deletes and success writes, plus the polling calls (queries, gate reads, queue
depths) in the measured proportion. Several
processes run the loop at once against the same moto server, as the
framework's components do.
"""

from __future__ import annotations

import math
import multiprocessing
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from atf_core import lifecycle
from atf_core.aws import make_clients
from atf_core.config import StackConfig
from atf_core.lifecycle import Assoc
from atf_core.queues import QueueDirectory
from atf_core.schema import ScheduleRequest
from atf_core.store.base import Change, TaskRef
from atf_core.store.codec import index_partition
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import build_task

GROUP = 10


@dataclass
class Quota:
    """Whole calls per group for a fractional rate per task, carrying the remainder."""

    per_task: dict[str, float]
    carried: dict[str, float] = field(default_factory=dict)

    def take(self, call: str) -> int:
        due = self.carried.get(call, 0.0) + self.per_task.get(call, 0.0) * GROUP
        whole = math.floor(due)
        self.carried[call] = due - whole
        return whole


class RawLoop:
    def __init__(self, endpoint: str, config: StackConfig, mix: dict[str, float]) -> None:
        clients = make_clients(endpoint)
        self.sqs = clients.sqs
        self.store = DynamoTaskStore(clients.dynamodb, config)
        self.config = config
        self.url = QueueDirectory(clients.sqs, config).url("noop", "normal")
        self.quota = Quota(mix)
        self.request = ScheduleRequest.model_validate({"lambda": "noop", "payload": {}})

    def group(self) -> None:
        now = datetime.now(UTC)
        tasks = [self.store.create(build_task(self.config, self.request, now), "f").task for _ in range(GROUP)]
        refs = [TaskRef.of(t) for t in tasks]
        if self.config.record_enqueued:
            for ref in refs:
                self.store.transition(ref, lifecycle.ENQUEUE, Change(now=now))
        self._repeat("dynamodb.BatchGetItem", lambda: self.store.get_many([r.id for r in refs], consistent=False))
        self._repeat("sqs.SendMessageBatch", self._send, minimum=1)
        handles = self._receive()
        for ref in refs:
            self.store.transition(ref, lifecycle.CLAIM, Change(now=now, attempt=0))
        self._delete(handles)
        for ref in refs:
            self.store.transition(ref, lifecycle.SUCCEED, Change(now=now, attempt=1))
        self._polling(now)

    def _repeat(self, call: str, action: Callable[[], Any], minimum: int = 0) -> None:
        for _ in range(max(minimum, self.quota.take(call))):
            action()

    def _send(self) -> None:
        entries = [{"Id": str(i), "MessageBody": '{"id":"x","a":0,"due":0,"c":"default"}'} for i in range(GROUP)]
        self.sqs.send_message_batch(QueueUrl=self.url, Entries=entries)  # type: ignore[arg-type]

    def _receive(self) -> list[str]:
        calls = max(1, self.quota.take("sqs.ReceiveMessage"))
        each = max(1, math.ceil(GROUP / calls))
        handles: list[str] = []
        for _ in range(calls):
            reply = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=min(10, each))
            handles += [m["ReceiptHandle"] for m in reply.get("Messages", [])]
        return handles

    def _delete(self, handles: list[str]) -> None:
        calls = max(1, self.quota.take("sqs.DeleteMessageBatch"))
        each = max(1, math.ceil(len(handles) / calls))
        for start in range(0, len(handles), each):
            entries = [{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(handles[start : start + each][:10])]
            self.sqs.delete_message_batch(QueueUrl=self.url, Entries=entries)  # type: ignore[arg-type]

    def _polling(self, now: datetime) -> None:
        partition = index_partition(Assoc.NEW, "noop", "normal", 0)
        self._repeat("dynamodb.Query", lambda: list(self.store.due(partition, now)))
        self._repeat("dynamodb.GetItem", self.store.gates)
        self._repeat("sqs.GetQueueAttributes", lambda: QueueDirectory(self.sqs, self.config).depth("noop", "normal"))


def _worker(endpoint: str, config_json: str, mix: dict[str, float], seconds: float, start_at: float) -> int:
    loop = RawLoop(endpoint, StackConfig.model_validate_json(config_json), mix)
    time.sleep(max(0.0, start_at - time.time()))
    deadline = start_at + seconds
    groups = 0
    while time.time() < deadline:
        loop.group()
        groups += 1
    return groups * GROUP


def fresh(endpoint: str, config: StackConfig, label: str) -> StackConfig:
    """A table and queues of their own on the same server: moto's calls slow down as a table grows
    (an index query reads every item), so each loop starts from an empty table, as the framework's run did."""
    from atf_local.provision import provision

    own = config.model_copy(update={"name": f"raw{label}", "table_name": f"raw{label}-tasks"})
    provision(make_clients(endpoint), own)
    return own


def ceiling(endpoint: str, config: StackConfig, mix: dict[str, float], processes: int, seconds: float) -> float:
    """Tasks/s the backend serves when `processes` loops run the mix flat out."""
    config = fresh(endpoint, config, f"p{processes}")
    context = multiprocessing.get_context("spawn")
    start_at = time.time() + 5.0  # every process imported and connected before the clock starts
    with context.Pool(processes) as pool:
        args = [(endpoint, config.model_dump_json(), mix, seconds, start_at)] * processes
        done = pool.starmap(_worker, args)
    return sum(done) / seconds


def call_latencies(endpoint: str, config: StackConfig, repeat: int = 30) -> dict[str, float]:
    """Milliseconds per call of each kind, one at a time against an otherwise idle server."""
    loop = RawLoop(endpoint, config, {})
    loop.url = QueueDirectory(loop.sqs, config).url("noop", "normal")
    now = datetime.now(UTC)
    tasks = [loop.store.create(build_task(config, loop.request, now), "f").task for _ in range(repeat)]
    refs = [TaskRef.of(t) for t in tasks]
    partition = index_partition(Assoc.NEW, "noop", "normal", 0)
    probes: dict[str, Callable[[int], Any]] = {
        "PutItem (create)": lambda i: loop.store.create(build_task(config, loop.request, now), "f"),
        "BatchGetItem (10, consumer)": lambda i: loop.store.get_many([r.id for r in refs[:10]], consistent=False),
        "UpdateItem (enqueue)": lambda i: loop.store.transition(refs[i], lifecycle.ENQUEUE, Change(now=now)),
        "UpdateItem (claim)": lambda i: loop.store.transition(refs[i], lifecycle.CLAIM, Change(now=now, attempt=0)),
        "UpdateItem (succeed)": lambda i: loop.store.transition(refs[i], lifecycle.SUCCEED, Change(now=now, attempt=1)),
        "Query (index)": lambda i: list(loop.store.due(partition, now)),
        "GetItem (gates)": lambda i: loop.store.gates(),
        "SendMessageBatch (10)": lambda i: loop._send(),
        "ReceiveMessage (10)": lambda i: loop.sqs.receive_message(QueueUrl=loop.url, MaxNumberOfMessages=10),
    }
    timings = {}
    for name, probe in probes.items():
        started = time.perf_counter()
        for i in range(repeat):
            probe(i)
        timings[name] = (time.perf_counter() - started) / repeat * 1000
    return timings
