"""Property test of singleton flow keys (issue 16 §1): under random interleavings of schedules (refuse or
replace), racing schedulers (one reads the key, others act, then it writes what it read), schedulers that die
between their read and their write, claims and finishes, a key never has two holders (two of its tasks not
settled), the holder item names the one there is, and nothing accepted is lost: every accepted task is in the
table, and only a task another one replaced is cancelled. In-process moto: the steps are sequential."""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atf_core import lifecycle
from atf_core.config import KeyLimits, StackConfig
from atf_core.errors import FlowKeyBusy
from atf_core.schema import ScheduleRequest, Task, TaskStatus
from atf_core.store.base import Change, TaskRef
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling, build_task
from tests.functional.helpers import T0

KEYS = ("A", "B")
MODES = ("refuse", "replace")
EXAMPLES = itertools.count()  # numbers each example, for keys of its own (the table outlives an example)
# ("schedule", key, mode): a scheduler reads and writes at once; ("read", key, mode): a scheduler reads the
# key and what holds it, and writes later, at ("write", i), from what it read (stale by then), or dies at
# ("die", i) without writing; ("claim", i) / ("finish", i): an executor claims / ends the i-th task.
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("schedule"), st.sampled_from(KEYS), st.sampled_from(MODES)),
        st.tuples(st.just("read"), st.sampled_from(KEYS), st.sampled_from(MODES)),
        st.tuples(st.just("write"), st.integers(0, 5), st.none()),
        st.tuples(st.just("die"), st.integers(0, 5), st.none()),
        st.tuples(st.just("claim"), st.integers(0, 9), st.none()),
        st.tuples(st.just("finish"), st.integers(0, 9), st.none()),
    ),
    max_size=30,
)


@dataclass
class Pending:
    """A scheduler between its read and its write."""

    task: Task
    fingerprint: str
    held_by: str | None
    cancel: Task | None


def singleton(config: StackConfig) -> StackConfig:
    spec = config.lambdas["work"].model_copy(update={"key_limits": KeyLimits(singleton=True)})
    return config.model_copy(update={"lambdas": {**config.lambdas, "work": spec}})


class Run:
    def __init__(self, aws: Any, config: StackConfig) -> None:
        self.number = next(EXAMPLES)
        self.config = singleton(config)
        self.store = DynamoTaskStore(aws.dynamodb, self.config)
        self.scheduling = Scheduling(self.store, self.config, clock=lambda: T0)
        self.accepted: list[Task] = []
        self.replaced: set[str] = set()
        self.pending: list[Pending] = []

    def request(self, key: str, mode: str) -> ScheduleRequest:
        body = {"lambda": "work", "flow_key": f"{self.number}-{key}", "on_conflict": mode}
        return ScheduleRequest.model_validate(body)

    def schedule(self, key: str, mode: str) -> None:
        with contextlib.suppress(FlowKeyBusy):  # a refusal: nothing accepted
            self.took(self.scheduling.schedule(self.request(key, mode), T0))

    def took(self, result: Any) -> None:
        self.accepted.append(result.task)
        if result.replaced is not None:
            self.replaced.add(result.replaced)

    def read(self, key: str, mode: str) -> None:
        """What create_singleton reads and decides, its write put off."""
        request = self.request(key, mode)
        task = build_task(self.config, request, T0)
        held_by = self.store.key_holder("work", f"{self.number}-{key}")
        holder = self.store.get(held_by) if held_by else None
        busy = holder is not None and not holder.status.settled
        if busy and (mode == "refuse" or not lifecycle.CANCEL.allows(holder.status)):  # type: ignore[union-attr]
            return  # refused at once
        self.pending.append(Pending(task, request.fingerprint(), held_by, holder if busy else None))

    def write(self, index: int) -> None:
        if self.pending:
            p = self.pending.pop(index % len(self.pending))
            result = self.store.create_holding(p.task, p.fingerprint, p.held_by, p.cancel)
            if result is not None:
                self.took(result)

    def act(self, index: int, transition: lifecycle.Transition, attempt: int) -> None:
        if self.accepted:
            task = self.accepted[index % len(self.accepted)]
            self.store.transition(TaskRef.of(task), transition, Change(now=T0, attempt=attempt))

    def check(self) -> None:
        found = {t.id: t for t in self.store.get_many([t.id for t in self.accepted])}
        assert set(found) == {t.id for t in self.accepted}, "an accepted task was lost"
        for key in KEYS:
            flow_key = f"{self.number}-{key}"
            live = [t.id for t in found.values() if t.flow_key == flow_key and not t.status.settled]
            assert len(live) <= 1, f"key {flow_key} has two holders: {live}"
            if live:
                assert self.store.key_holder("work", flow_key) == live[0]
        cancelled = {t.id for t in found.values() if t.status is TaskStatus.CANCELLED}
        assert cancelled == self.replaced, "a task was cancelled that nothing replaced, or a replace cancelled none"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_a_singleton_key_never_has_two_holders_and_nothing_accepted_is_lost(
    aws: Any, config: StackConfig, steps: list[tuple[str, Any, Any]]
) -> None:
    run = Run(aws, config)
    for action, arg, mode in steps:
        if action == "schedule":
            run.schedule(arg, mode)
        elif action == "read":
            run.read(arg, mode)
        elif action == "write":
            run.write(arg)
        elif action == "die" and run.pending:
            run.pending.pop(arg % len(run.pending))
        elif action == "claim":
            run.act(arg, lifecycle.CLAIM, 0)
        elif action == "finish":
            run.act(arg, lifecycle.SUCCEED, 1)
        run.check()
