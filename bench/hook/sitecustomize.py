"""Meters every DynamoDB and SQS client of a process the benchmarks start.

Python imports `sitecustomize` at start-up from sys.path; the benchmarks put
this directory on PYTHONPATH (with BENCH_METER_DIR set) for the processes of
the local stack and the worker host, spawned executors included, so the
framework's own code is metered without a line of it changing. Each process
writes its cumulative bill to BENCH_METER_DIR/<pid>.json twice a second; the
benchmark subtracts the snapshots taken at the edges of its window.
"""

from __future__ import annotations

import os

if os.environ.get("BENCH_METER_DIR"):
    import atexit
    import json
    import sys
    import threading
    import time
    from pathlib import Path

    import botocore.session

    from atf_core.billing import CostMeter

    _meter = CostMeter(reader=None, bill_writes=False)  # writes are priced by the cost lifecycles
    _create_client = botocore.session.Session.create_client
    _path = Path(os.environ["BENCH_METER_DIR"]) / f"{os.getpid()}.json"

    def _metered_create_client(self, service_name, *args, **kwargs):  # type: ignore[no-untyped-def]
        client = _create_client(self, service_name, *args, **kwargs)
        if service_name in ("dynamodb", "sqs"):
            _meter.attach(client)
        return client

    _dumping = threading.Lock()  # the periodic thread and atexit share one temporary file

    def _dump() -> None:
        snapshot = {"pid": os.getpid(), "argv": sys.argv, "t": time.time(), "bill": _meter.snapshot().to_dict()}
        with _dumping:
            temporary = _path.with_suffix(".tmp")
            temporary.write_text(json.dumps(snapshot))
            temporary.replace(_path)

    def _dump_every_half_second() -> None:
        while True:
            time.sleep(0.5)
            try:
                _dump()
            except OSError:
                return

    botocore.session.Session.create_client = _metered_create_client  # type: ignore[method-assign]
    threading.Thread(target=_dump_every_half_second, daemon=True, name="bench-meter").start()
    atexit.register(_dump)
