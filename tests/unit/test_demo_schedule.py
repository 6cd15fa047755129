"""`make run`'s demo is done with its periodic schedule once a task it fired has run: the schedule makes its next
task up to a lookahead before its time, so its newest task is mostly still waiting (the demo that waited for
the newest one to succeed took up to a minute, 2 runs in 8)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from atf_core.chains import ChainStatus
from atf_core.schema import TaskStatus
from atf_local.demo import Extras


class ScheduleAhead:
    """A client whose schedule has made a new task, still waiting, at each read; each earlier one has run."""

    def __init__(self) -> None:
        self.fired: list[str] = []

    def get_schedule(self, name: str, upcoming: int) -> Any:
        self.fired.append(f"task-{len(self.fired)}")
        return SimpleNamespace(fired=len(self.fired), last_task_id=self.fired[-1])

    def get(self, task_id: str) -> Any:
        newest = task_id == self.fired[-1]
        return SimpleNamespace(status=TaskStatus.NEW if newest else TaskStatus.SUCCESS)

    def get_chain(self, chain_id: str) -> Any:
        return SimpleNamespace(status=ChainStatus.SUCCEEDED)


def test_the_schedule_is_settled_once_a_task_it_fired_has_run_though_the_newest_waits() -> None:
    # Given a schedule whose newest task is always still waiting
    client, extras = ScheduleAhead(), Extras(chain_id="c")

    # When the demo reads it twice
    extras.poll(client)  # type: ignore[arg-type]
    settled_at_first = extras.settled
    extras.poll(client)  # type: ignore[arg-type]

    # Then it waits while the first task it saw waits, and is settled once that one has run
    assert not settled_at_first
    assert extras.settled and not extras.problems
    assert extras.state == "schedule fired 2x (first: success); chain succeeded"
