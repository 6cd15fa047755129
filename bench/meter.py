"""Meters every DynamoDB and SQS client of a process the benchmarks start.

The benchmarks' start-up hook (bench/hook/sitecustomize.py) attaches it when
BENCH_METER_DIR is set, so the framework's own code is metered without a line
of it changing. The process writes its cumulative bill to
BENCH_METER_DIR/<pid>.json twice a second and as it exits; the benchmark
subtracts the snapshots taken at the edges of its window.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
from pathlib import Path

from atf_local.cost.billing import CostMeter
from atf_local.instruments.startup import on_every_client

METER_ENV = "BENCH_METER_DIR"


def meter_this_process(directory: Path) -> None:
    meter = CostMeter(reader=None, bill_writes=False)  # writes are priced by the cost lifecycles
    on_every_client(lambda client, label: meter.attach(client))
    path = directory / f"{os.getpid()}.json"
    dumping = threading.Lock()  # the periodic thread and atexit share one temporary file

    def dump() -> None:
        snapshot = {"pid": os.getpid(), "argv": sys.argv, "t": time.time(), "bill": meter.snapshot().to_dict()}
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
