"""Property test of debounced flow keys (issue 16 §1): under random interleavings of requests, racing schedulers
(one reads the key's pending task, others act, then it writes from what it read), the consumer sending due
tasks (without writing) and executors claiming what it sent, each burst runs exactly once, and nothing is lost:
the payload a task runs with is the one of the last request merged into it (every other request of the burst
is superseded by a later one), and a key never has two waiting tasks. In-process moto: the steps are sequential.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atf_core import debounce, lifecycle
from atf_core.config import Debounce, StackConfig
from atf_core.schema import ScheduleRequest, Task, TaskStatus, to_ms
from atf_core.store.base import Change, CreateResult, TaskRef
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling, build_task
from tests.functional.helpers import T0
from tests.functional.test_flow_keys import keyed_config

KEYS = ("A", "B")
DEBOUNCE = Debounce(quiet_seconds=5, max_delay_seconds=12)
EXAMPLES = itertools.count()  # numbers each example, for keys of its own (the table outlives an example)
# ("request", key): a scheduler reads and writes at once; ("read", key): a scheduler reads the key's pending
# task and writes later, at ("write", i), from what it read; ("wait", s): time passes; ("send", _): the
# consumer sends every due task; ("claim", i): an executor claims the i-th message sent (and succeeds).
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("request"), st.sampled_from(KEYS)),
        st.tuples(st.just("read"), st.sampled_from(KEYS)),
        st.tuples(st.just("write"), st.integers(0, 5)),
        st.tuples(st.just("wait"), st.integers(1, 8)),
        st.tuples(st.just("send"), st.none()),
        st.tuples(st.just("claim"), st.integers(0, 9)),
    ),
    max_size=30,
)


@dataclass
class Reader:
    """A scheduler between its read and its write."""

    request: ScheduleRequest
    task: Task
    held_by: str | None
    pending: Task | None


class Run:
    def __init__(self, aws: Any, config: StackConfig) -> None:
        self.number = next(EXAMPLES)
        self.config = keyed_config(config, debounce=DEBOUNCE)
        self.store = DynamoTaskStore(aws.dynamodb, self.config)
        self.now = T0
        self.scheduling = Scheduling(self.store, self.config, clock=lambda: self.now)
        self.payloads = itertools.count()
        self.accepted: dict[str, list[int]] = {}  # task id -> the payloads written into it, in order
        self.readers: list[Reader] = []
        self.messages: list[tuple[str, int]] = []  # (task id, entry ms) the consumer sent
        self.ran: dict[str, list[int]] = {}  # task id -> the payload of each run

    def request(self, key: str) -> ScheduleRequest:
        body = {"lambda": "work", "flow_key": f"{self.number}-{key}", "payload": {"n": next(self.payloads)}}
        return ScheduleRequest.model_validate(body)

    def took(self, result: CreateResult, request: ScheduleRequest) -> None:
        self.accepted.setdefault(result.task.id, []).append(request.payload["n"])

    def schedule(self, key: str) -> None:
        request = self.request(key)
        self.took(self.scheduling.schedule(request, self.now), request)

    def read(self, key: str) -> None:
        """What debounce.schedule reads, its write put off."""
        request = self.request(key)
        task = debounce.first_run(build_task(self.config, request, self.now), DEBOUNCE)
        held_by = self.store.key_holder("work", f"{self.number}-{key}")
        pending = self.store.get(held_by) if held_by else None
        self.readers.append(Reader(request, task, held_by, pending))

    def write(self, index: int) -> None:
        """The reader's write from what it read; refused (stale), it does what debounce.schedule does: again."""
        if not self.readers:
            return
        reader = self.readers.pop(index % len(self.readers))
        request, task, fingerprint = reader.request, reader.task, reader.request.fingerprint()
        result: CreateResult | None
        if reader.pending is not None and debounce.waiting(reader.pending):
            result = debounce._merge(self.store, reader.pending, task, fingerprint, DEBOUNCE)
        else:
            result = self.store.create_holding(task, fingerprint, reader.held_by, None)
        if result is None:
            result = self.scheduling.schedule(request, self.now)
        self.took(result, request)

    def send(self) -> None:
        """The consumer: every waiting task whose entry is due, sent once per entry."""
        for task in self.store.get_many(list(self.accepted)):
            entry = task.next_at or task.scheduled_at
            sent = (task.id, to_ms(entry))
            if task.status is TaskStatus.NEW and entry <= self.now and sent not in self.messages:
                self.messages.append(sent)

    def claim(self, index: int) -> None:
        if not self.messages:
            return
        task_id, entry_ms = self.messages.pop(index % len(self.messages))
        [task] = self.store.get_many([task_id])
        outcome = self.store.transition(
            TaskRef.of(task), lifecycle.CLAIM, Change(now=self.now, attempt=0, entry_ms=entry_ms)
        )
        if outcome.applied:
            assert outcome.task is not None
            self.ran.setdefault(task_id, []).append(outcome.task.payload["n"])
            self.store.transition(TaskRef.of(task), lifecycle.SUCCEED, Change(now=self.now, attempt=1))

    def settle(self) -> None:
        """Every reader writes, then time runs past every burst's max delay and everything sent is claimed."""
        while self.readers:
            self.write(0)
        self.wait(DEBOUNCE.max_delay_seconds + 1)
        self.send()
        while self.messages:
            self.claim(0)

    def wait(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def check_one_waiting_per_key(self) -> None:
        tasks = self.store.get_many(list(self.accepted))
        for key in KEYS:
            flow_key = f"{self.number}-{key}"
            waiting = [t.id for t in tasks if t.flow_key == flow_key and debounce.waiting(t)]
            assert len(waiting) <= 1, f"key {flow_key} has two waiting tasks: {waiting}"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_each_burst_runs_exactly_once_with_its_last_payload(
    aws: Any, config: StackConfig, steps: list[tuple[str, Any]]
) -> None:
    run = Run(aws, config)
    for action, arg in steps:
        if action == "request":
            run.schedule(arg)
        elif action == "read":
            run.read(arg)
        elif action == "write":
            run.write(arg)
        elif action == "wait":
            run.wait(arg)
        elif action == "send":
            run.send()
        elif action == "claim":
            run.claim(arg)
        run.check_one_waiting_per_key()
    run.settle()
    assert set(run.ran) == set(run.accepted), "a burst did not run"
    for task_id, payloads in run.accepted.items():
        assert run.ran[task_id] == [payloads[-1]], f"{task_id} ran {run.ran[task_id]}, not once with {payloads[-1]}"
