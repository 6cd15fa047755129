"""Run the consumer Lambda's handler the way EventBridge would: one invocation a minute."""

from __future__ import annotations

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


def run_forever(tick_s: float = 60.0, group_index: int = 0, groups: int = 1) -> None:
    from functions.consumer.handler import lambda_handler

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    event = {"group": {"index": group_index, "of": groups}}
    while not stop.is_set():
        lambda_handler(event, FakeLambdaContext(timeout_s=tick_s, stop=stop))
