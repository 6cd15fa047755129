"""The store consumer: finds due tasks in the index and pushes them onto their queues."""

from atf_core.consumer.consumer import Consumer, PollReport
from atf_core.consumer.loop import run_until

__all__ = ["Consumer", "PollReport", "run_until"]
