"""A lambdas module that registers an atexit handler, as a team's module does to flush a tracer or close a pool:
each process that imports it (the host and every executor) writes a file named by its pid as it exits."""

from __future__ import annotations

import atexit
import os
from pathlib import Path

from atf_sdk.worker.registry import Lambdas, TaskContext

AT_EXIT_ENV = "ATF_TEST_AT_EXIT_DIR"
lambdas = Lambdas()


@lambdas.register("work")
def work(task: TaskContext) -> None:
    pass


def _exited() -> None:
    (Path(os.environ[AT_EXIT_ENV]) / str(os.getpid())).touch()


if os.environ.get(AT_EXIT_ENV):
    atexit.register(_exited)
