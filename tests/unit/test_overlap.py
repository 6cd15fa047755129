"""The consumer's I/O threads: results in order, a bounded number under way, nothing in the background with one."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from atf_core.config import StackConfig
from atf_core.consumer.overlap import MAX_IO_THREADS, Overlap, io_threads_for


def test_results_come_in_order_with_at_most_ahead_under_way() -> None:
    overlap = Overlap(4)
    lock, running, most = threading.Lock(), [0], [0]

    def call(i: int) -> Callable[[], int]:
        def run() -> int:
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            time.sleep(0.02 * (5 - i % 5))  # later calls finish first
            with lock:
                running[0] -= 1
            return i

        return run

    try:
        assert list(overlap.ordered((call(i) for i in range(12)), ahead=3)) == list(range(12))
        assert 2 <= most[0] <= 3
    finally:
        overlap.close()


def test_calls_not_started_when_the_reader_stops_are_cancelled() -> None:
    overlap = Overlap(1 + 1)
    made: list[int] = []

    def call(i: int) -> Callable[[], int]:
        return lambda: made.append(i) or i

    results = overlap.ordered((call(i) for i in range(100)), ahead=2)
    assert next(results) == 0
    results.close()
    overlap.close()
    assert len(made) <= 3


def test_one_thread_makes_each_call_when_its_result_is_asked_for() -> None:
    overlap = Overlap(1)
    made: list[int] = []

    def call(i: int) -> Callable[[], int]:
        return lambda: made.append(i) or i

    results = overlap.ordered((call(i) for i in range(5)), ahead=3)
    assert made == []
    assert next(results) == 0 and made == [0]
    failed = overlap.submit(lambda: 1 // 0)
    with pytest.raises(ZeroDivisionError):
        failed.result()
    assert threading.current_thread() is threading.main_thread()


def test_threads_follow_the_widest_queue_within_the_connection_pool() -> None:
    def config(shards: int) -> StackConfig:
        return StackConfig.model_validate({"lambdas": {"a": {"shards": 1}, "b": {"shards": shards}}})

    assert io_threads_for(config(1)) == 2
    assert io_threads_for(config(40)) == MAX_IO_THREADS
    with pytest.raises(ValueError, match="io_threads"):
        Overlap(0)
