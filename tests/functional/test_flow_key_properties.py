"""Property tests of the limits per flow key (issue 16 §1): under random interleavings of claims, finishes and
crashes (a worker that dies holds its slot until the lease lapses), no key ever runs over its cap, and
every task is started in the end (nothing is lost). In-process moto: the steps are sequential."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atf_core.config import KeyLimits, StackConfig
from atf_core.limits import Grant, Limiter
from atf_core.store.counters import Counters

KEYS = ("A", "B", "C")
CAP = 2
EXAMPLES = itertools.count()  # numbers each example, for keys and task ids of its own
# One step: ("claim", key) asks for a start of a new task of that key; ("finish", i) ends the i-th running task
# (its slot given back); ("crash", i) loses it (no release, no renewal); ("tick", s) lets s seconds pass,
# the live executors renewing their leases as their heartbeats would.
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("claim"), st.sampled_from(KEYS)),
        st.tuples(st.just("finish"), st.integers(0, 7)),
        st.tuples(st.just("crash"), st.integers(0, 7)),
        st.tuples(st.just("tick"), st.sampled_from([1, 5, 12])),
    ),
    max_size=40,
)


def keyed(config: StackConfig) -> StackConfig:
    spec = config.lambdas["work"].model_copy(update={"key_limits": KeyLimits(max_running=CAP)})
    return config.model_copy(update={"lambdas": {**config.lambdas, "work": spec}})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_no_key_runs_over_its_cap_and_every_task_starts_in_the_end(
    aws: Any, config: StackConfig, steps: list[tuple[str, Any]]
) -> None:
    run = next(EXAMPLES)
    # Each example its own keys (the table outlives an example: its slots must not meet another's).
    clock = {"t": 1_000.0}
    limits = Limiter(Counters(aws.dynamodb, config.table_name), keyed(config), clock=lambda: clock["t"])
    lease_s = max(config.timeouts.heartbeat, config.timeouts.claim)
    running: list[tuple[str, Grant, float]] = []  # live executors: (key, grant, when its lease was last given)
    crashed: list[tuple[str, float]] = []  # (key, when its lease lapses)
    waiting: list[tuple[str, str]] = []  # (key, task id) held back
    started: set[str] = set()
    for n, (action, arg) in enumerate(steps):
        if action == "claim":
            waiting.append((f"{run}-{arg}", f"{run}-{n}"))
        elif action in ("finish", "crash") and running:
            key, grant, renewed = running.pop(arg % len(running))
            if action == "finish":
                limits.release(grant)
            else:
                crashed.append((key, renewed + lease_s))
        elif action == "tick":
            clock["t"] += arg
            for i, (key, grant, _) in enumerate(running):
                limits.renew(grant)
                running[i] = (key, grant, clock["t"])
        waiting = _start_what_may(limits, waiting, running, started, clock["t"])
        _assert_within_caps(running, crashed, clock["t"])
    # Nothing lost: once every executor finishes and the dead ones' leases lapse, every task starts.
    for _, grant, _ in running:
        limits.release(grant)
    running.clear()
    clock["t"] += lease_s + 1
    while waiting:
        before = len(waiting)
        waiting = _start_what_may(limits, waiting, running, started, clock["t"])
        assert len(waiting) < before, f"tasks never started: {waiting}"
        for _, grant, _ in running:
            limits.release(grant)
        running.clear()
    assert len(started) == sum(1 for action, _ in steps if action == "claim")


def _start_what_may(
    limits: Limiter,
    waiting: list[tuple[str, str]],
    running: list[tuple[str, Grant, float]],
    started: set[str],
    now: float,
) -> list[tuple[str, str]]:
    """Ask for every waiting task, oldest first, as controllers would; the ones still held back."""
    still = []
    for key, task_id in waiting:
        answer = limits.acquire("work", "default", task_id, key)
        if isinstance(answer, Grant):
            running.append((key, answer, now))
            started.add(task_id)
        else:
            assert not answer.drop  # throttling never drops
            still.append((key, task_id))
    return still


def _assert_within_caps(running: list[tuple[str, Grant, float]], crashed: list[tuple[str, float]], now: float) -> None:
    """Live executors and dead ones whose leases still hold: never more than the cap of one key."""
    for key in {k for k, _, _ in running} | {k for k, _ in crashed}:
        live = sum(1 for k, _, _ in running if k == key)
        holding = live + sum(1 for k, until in crashed if k == key and until >= now)
        assert holding <= CAP, f"key {key}: {holding} running, cap {CAP}"
