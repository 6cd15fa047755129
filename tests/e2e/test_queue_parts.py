"""A priority split over several queues (issue 18 §1): the consumer fills every part, and every worker host
reads every part, so no task waits on a queue nobody reads."""

from __future__ import annotations

import copy
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from atf_core.definitions import queue_name
from atf_core.queues import QueueDirectory
from atf_core.schema import TaskStatus
from tests.conftest import TEST_CONFIG
from tests.e2e.conftest import RunningStack, running_stack
from tests.e2e.test_worker_host import Host, finished, schedule

PARTS = 3
TASKS = 30  # at least one batch of ten for each part
ROUNDS = 2


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    config = copy.deepcopy(TEST_CONFIG)
    config["lambdas"]["work"]["queue_parts"] = PARTS
    with running_stack(config, tmp_path_factory) as running:
        yield running


def waiting_per_part(stack: RunningStack) -> list[int]:
    """The messages each part of work/normal holds (the operator's view)."""
    sqs = stack.clients.sqs
    names = [queue_name(stack.config, "work", "normal", part) for part in range(PARTS)]
    urls = [sqs.get_queue_url(QueueName=name)["QueueUrl"] for name in names]
    return [
        int(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"][
            "ApproximateNumberOfMessages"
        ])
        for url in urls
    ]  # fmt: skip


def test_the_consumer_fills_every_part_and_one_host_alone_drains_them_all(
    stack: RunningStack, worker_host: Host, tmp_path: Path
) -> None:
    directory = QueueDirectory(stack.clients.sqs, stack.config)
    assert [directory.url("work", "normal", part).rsplit("/", 1)[1] for part in range(PARTS)] == [
        "atf-test-work-normal",
        "atf-test-work-normal-1",
        "atf-test-work-normal-2",
    ]
    for round_ in range(ROUNDS):
        # Given tasks sent while no host runs: they are spread over all the parts
        tasks = [schedule(stack, payload={"seconds": 0.01}) for _ in range(TASKS)]
        deadline = time.monotonic() + 30
        while sum(counts := waiting_per_part(stack)) < TASKS:
            assert time.monotonic() < deadline, f"round {round_}: only {counts} of {TASKS} sent"
            time.sleep(0.2)
        assert all(count > 0 for count in counts), f"round {round_}: a part got nothing: {counts}"
        # When one host runs alone (a new one each round)
        host = worker_host(executors=1, threads=4, log=tmp_path / f"host-{round_}.log")
        # Then it takes every task from every part, each once
        done = stack.wait_for([t.id for t in tasks], finished, timeout_s=60)
        assert {(t.status, t.attempt) for t in done} == {(TaskStatus.SUCCESS, 1)}
        assert waiting_per_part(stack) == [0] * PARTS
        host.send_signal(signal.SIGTERM)
        host.wait(timeout=30)
