"""Meters every DynamoDB and SQS client of a process the benchmarks start.

The benchmarks' start-up hook (bench/hook/sitecustomize.py) attaches it when
BENCH_METER_DIR is set, so the framework's own code is metered without a line
of it changing. The process writes its cumulative bill to
BENCH_METER_DIR/<pid>.json twice a second and as it exits; the benchmark
subtracts the snapshots taken at the edges of its window.

A worker host's executors fork from a server that ran the hook and made no
client, so everything that belongs to one process starts with its first
client: the writer thread (a thread alive as a process forks is not in the
child, and a lock it held there stays held), the pid the file is named by, and
the dump at exit (a forked multiprocessing child leaves through os._exit, so
atexit never runs in it; multiprocessing's own finalizers do). They start
through atf_local.instruments.per_process, as a History opens its file.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
from multiprocessing import util
from pathlib import Path
from typing import Any

from atf_local.cost.billing import CostMeter
from atf_local.instruments.per_process import PerProcess
from atf_local.instruments.startup import on_every_client

METER_ENV = "BENCH_METER_DIR"


class _ProcessMeter:
    """The meter of the process that attaches clients to it; what writes its bill starts with its first client."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self.meter = CostMeter(reader=None, bill_writes=False)  # writes are priced by the cost lifecycles
        self._writer = PerProcess(self._start)  # started by the first client of each process

    def attach(self, client: Any) -> None:
        self.meter.attach(client)
        self._writer.get()

    def _start(self) -> None:
        dumping = threading.Lock()  # the writer and the dump at exit share one temporary file

        def dump() -> None:
            path = self._directory / f"{os.getpid()}.json"
            snapshot = {"pid": os.getpid(), "argv": sys.argv, "t": time.time(), "bill": self.meter.snapshot().to_dict()}
            with dumping:
                temporary = path.with_suffix(".tmp")
                temporary.write_text(json.dumps(snapshot))
                temporary.replace(path)

        def dump_every_half_second() -> None:
            while True:
                time.sleep(0.5)
                try:
                    dump()
                except OSError:
                    return

        threading.Thread(target=dump_every_half_second, daemon=True, name="bench-meter").start()
        atexit.register(dump)
        util.Finalize(None, dump, exitpriority=0)  # a multiprocessing child's exit, which skips atexit


def meter_this_process(directory: Path) -> None:
    metered = _ProcessMeter(directory)
    on_every_client(lambda client, label: metered.attach(client))
