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

    def _apply_proposals() -> None:
        """BENCH_PROPOSALS=1: the SQS savings docs/benchmarks.md proposes, patched into this process only.
        Deletes wait up to a second for nine others (a claimed message's delete is not urgent: the store
        holds the task, and a redelivered message fails its claim); receives wait until ten fit in the buffer."""
        from atf_sdk.worker import buffers, deletes

        batcher_init = deletes.DeleteBatcher.__init__
        room = buffers.WorkBuffer.room

        def linger_a_second(self, sqs, linger_s=1.0):  # type: ignore[no-untyped-def]
            batcher_init(self, sqs, linger_s=1.0)

        def room_for_ten(self):  # type: ignore[no-untyped-def]
            free = room(self)
            return free if free >= min(10, self._capacity) else 0

        deletes.DeleteBatcher.__init__ = linger_a_second  # type: ignore[method-assign]
        buffers.WorkBuffer.room = room_for_ten  # type: ignore[method-assign]

    if os.environ.get("BENCH_PROPOSALS"):
        _apply_proposals()
    botocore.session.Session.create_client = _metered_create_client  # type: ignore[method-assign]
    threading.Thread(target=_dump_every_half_second, daemon=True, name="bench-meter").start()
    atexit.register(_dump)
