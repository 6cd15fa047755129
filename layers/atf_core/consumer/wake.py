"""Keeps every worker queue's CloudWatch metrics flowing, so that a service at zero can leave it.

SQS publishes a queue's metrics only while the queue is active: for up to six hours after any call on
it. A worker service scaled to zero (`min_tasks` 0) makes no call, and a warm consumer calls a queue
only when it sends to it, so after a quiet night the first message finds the queue's metrics asleep. They
come back minutes later, and the service's alarm from zero (atf_cdk.constructs.scaling), which reads
them, starts no host until then. One GetQueueAttributes a queue an hour keeps every queue awake, at
about 720 requests a queue a month.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from atf_core.config import StackConfig
from atf_core.queues import QueueDirectory

WAKE_EVERY = timedelta(hours=1)  # six chances within SQS's six hours, should a call fail


class QueueWake:
    """A consumer chore (`wake`): reads every (lambda, priority)'s queues once every WAKE_EVERY."""

    def __init__(self, queues: QueueDirectory, config: StackConfig, every: timedelta = WAKE_EVERY) -> None:
        self._queues = queues
        self._config = config
        self._every = every
        self._woke_at: datetime | None = None

    def wake(self, now: datetime, _lookahead: float) -> None:
        if self._woke_at is not None and now - self._woke_at < self._every:
            return
        # Marked before the calls: a failing one waits for the next round instead of being retried each poll.
        self._woke_at = now
        for lambda_name, spec in self._config.lambdas.items():
            for priority in spec.priorities:
                self._queues.depth(lambda_name, priority)
