"""`async def` callbacks on a real worker host: awaited, heartbeated while they wait, retried, fenced."""

from __future__ import annotations

from datetime import timedelta

from atf_core.schema import TaskStatus
from tests.e2e.conftest import RunningStack
from tests.e2e.test_worker_host import Host, finished, schedule

ASYNC = "tests.e2e.lambdas:async_lambdas"


def test_async_retries_then_success_and_fatal_failure_keep_the_error(stack: RunningStack, worker_host: Host) -> None:
    worker_host(lambdas=ASYNC)
    flaky = schedule(stack, payload={"succeed_on": 3})
    fatal = schedule(stack, payload={"fatal": True})
    flaky, fatal = stack.wait_for([flaky.id, fatal.id], finished, timeout_s=40)
    assert (flaky.status, flaky.attempt) == (TaskStatus.SUCCESS, 3)
    assert flaky.last_error is not None and (flaky.last_error.type, flaky.last_error.attempt) == ("Retry", 2)
    assert (fatal.status, fatal.attempt) == (TaskStatus.FATAL_FAILURE, 1)
    assert fatal.last_error is not None and fatal.last_error.type == "Fatal"


def test_an_awaiting_callback_is_heartbeated_and_runs_once(stack: RunningStack, worker_host: Host) -> None:
    worker_host(lambdas=ASYNC)
    long = schedule(stack, payload={"seconds": 4})
    (long,) = stack.wait_for([long.id], finished, timeout_s=40)
    assert (long.status, long.attempt, long.errors) == (TaskStatus.SUCCESS, 1, [])
    # the lease was renewed while the coroutine awaited (a beat a second here), not only at its end
    assert long.claimed_at is not None and long.heartbeat_at is not None
    assert long.heartbeat_at - long.claimed_at >= timedelta(seconds=2)
