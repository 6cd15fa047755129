"""NextWork between executor threads and their host's controller.

Executors are separate processes; each thread holds one connection to the
controller over a Unix socket and asks for work, one task at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

from atf_core.schema import Task


@dataclass(frozen=True)
class NextWork:
    lambda_name: str
    wait_s: float
    worker: str = ""  # the asking executor, host:pid: the claim records it


@dataclass(frozen=True)
class Work:
    task_json: str

    def task(self) -> Task:
        return Task.model_validate_json(self.task_json)


@dataclass(frozen=True)
class NoWork:
    stop: bool = False  # the host is draining: finish what you run, then exit
