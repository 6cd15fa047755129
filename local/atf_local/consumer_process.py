"""Run the consumer Lambda's handler the way EventBridge would: one invocation a minute."""

from __future__ import annotations

import math
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field


@dataclass
class FakeLambdaContext:
    """The parts of a Lambda context the handler and Powertools read."""

    timeout_s: float
    function_name: str = "atf-consumer-local"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:000000000000:function:atf-consumer-local"
    aws_request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    started: float = field(default_factory=time.monotonic)
    stop: threading.Event | None = None

    def get_remaining_time_in_millis(self) -> int:
        if self.stop is not None and self.stop.is_set():
            return 0
        return int(max(0.0, self.timeout_s - (time.monotonic() - self.started)) * 1000)


def run_forever(group_index: int = 0, groups: int = 1) -> None:
    """Invoke the handler at each tick, every TICK_S, with the deployed rule's input and the deployed function's
    timeout. One that runs past its next tick is followed at once (Lambda would start the next in another
    environment; here it waits its turn); ticks missed meanwhile are dropped, as EventBridge drops a tick
    older than its maximum event age."""
    from atf_core.config import StackConfig
    from atf_core.consumer.tick import TICK_S, consumer_timeout_s
    from functions.consumer.handler import lambda_handler

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    timeout_s = consumer_timeout_s(StackConfig.from_env().poll_interval)
    event = {"group": {"index": group_index, "of": groups}}
    tick = time.monotonic()
    while not stop.is_set():
        lambda_handler(event, FakeLambdaContext(timeout_s=timeout_s, stop=stop))
        missed = max(0, math.floor((time.monotonic() - tick) / TICK_S) - 1)
        tick += (missed + 1) * TICK_S
        stop.wait(max(0.0, tick - time.monotonic()))
