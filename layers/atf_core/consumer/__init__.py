"""The store consumer: finds due tasks in the index and pushes them onto their queues."""

from atf_core.consumer.consumer import Consumer
from atf_core.consumer.loop import run_until
from atf_core.consumer.poll import Event, PollReport

__all__ = ["Consumer", "Event", "PollReport", "run_until"]
