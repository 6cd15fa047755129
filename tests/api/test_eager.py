"""Eager mode (atf_sdk.testing.Eager): a callback run in this process ends as it would on a worker host.

The unit tests pin each way an attempt can end; the live test runs the same payloads on a real worker
host and replays them attempt by attempt in eager mode: same statuses, same errors.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from atf_core.config import StackConfig
from atf_core.errors import InputError, UnknownLambda, UnknownPriority, WrongType
from atf_core.schema import TaskStatus
from atf_sdk import Fatal, Lambdas, Retry, TaskContext
from atf_sdk.client import AtfClient
from atf_sdk.testing import Eager
from tests.api import lambdas as live_lambdas
from tests.api.live import LIVE_CONFIG, LiveStack

CONFIG = StackConfig.model_validate(
    {
        "timeouts": {"backoff_base": 4, "backoff_max": 60},
        "lambdas": {
            "bill": {"priorities": ["urgent", "bulk"], "default_priority": "bulk", "max_attempts": 3},
            "notify": {"priorities": ["normal"], "default_priority": "normal", "max_attempts": 2, "dead_letter": False},
        },
    }
)
lambdas = Lambdas()


class GatewayDown(Exception):
    pass


@lambdas.register("bill")
def bill(task: TaskContext) -> Any:
    """Does what its payload says: return a value, or raise Retry, Fatal or another exception."""
    logging.getLogger("bill").info("billing %s", task.id)
    match task.payload.get("then"):
        case "retry":
            raise Retry("not yet", after=task.payload.get("after"))
        case "fatal":
            raise Fatal("card declined")
        case "raise":
            raise GatewayDown("gateway down")
    return {"billed": task.payload.get("cents"), "attempt": task.attempt}


@lambdas.register("notify")
def notify(task: TaskContext) -> None:
    raise GatewayDown("smtp down")


eager = Eager(lambdas, CONFIG)


def test_a_return_is_a_success_with_its_value() -> None:
    outcome = eager.run("bill", {"cents": 5}, attempt=2)
    assert outcome.status is TaskStatus.SUCCESS and outcome.value == {"billed": 5, "attempt": 2}
    assert outcome.succeeded and (outcome.raised, outcome.error, outcome.retry_in) == (None, None, None)


@pytest.mark.parametrize(("after", "lasts"), [(7, (7.0, 7.0)), (None, (4.0, 8.0))], ids=["after", "backoff"])
def test_retry_runs_again_after_its_delay_or_the_backoff(after: float | None, lasts: tuple[float, float]) -> None:
    outcome = eager.run("bill", {"then": "retry", "after": after}, attempt=2)
    assert outcome.status is TaskStatus.RETRIABLE_FAILURE and isinstance(outcome.raised, Retry)
    assert outcome.error is not None and (outcome.error.type, outcome.error.message) == ("Retry", "not yet")
    assert lasts[0] <= (outcome.retry_in or 0) <= lasts[1]  # backoff at attempt 2: base 4 x 2, half of it jittered


def test_any_other_exception_is_retried_with_backoff() -> None:
    delays = {eager.run("bill", {"then": "raise"}).retry_in for _ in range(20)}
    assert all(2.0 <= (d or 0) < 4.0 for d in delays) and len(delays) > 1, "jittered: base 4, attempt 1"
    outcome = eager.run("bill", {"then": "raise"})
    assert isinstance(outcome.raised, GatewayDown) and outcome.error is not None
    assert (outcome.error.type, outcome.error.message, outcome.error.attempt) == ("GatewayDown", "gateway down", 1)


@pytest.mark.parametrize("then", ["retry", "raise", "fatal"])
def test_the_last_attempt_or_fatal_makes_a_dead_letter(then: str) -> None:
    last = eager.run("bill", {"then": then}, attempt=3)
    assert last.status is TaskStatus.DEAD_LETTER and last.retry_in is None and last.error is not None
    if then == "fatal":
        assert eager.run("bill", {"then": then}, attempt=1).status is TaskStatus.DEAD_LETTER


def test_a_lambda_without_dead_letters_ends_as_fatal_failure() -> None:
    assert eager.run("notify", attempt=1).status is TaskStatus.RETRIABLE_FAILURE
    assert eager.run("notify", attempt=2).status is TaskStatus.FATAL_FAILURE


def test_the_context_is_built_from_the_configuration(client: AtfClient) -> None:
    context = eager.run("bill", {"cents": 1}).context
    assert (context.lambda_name, context.priority, context.collection) == ("bill", "bulk", "default")
    assert (context.attempt, context.max_attempts, context.payload) == (1, 3, {"cents": 1})
    given = eager.context("bill", {"cents": 2}, attempt=3, priority="urgent", collection="eu", max_attempts=4)
    assert (given.attempt, given.priority, given.collection, given.max_attempts) == (3, "urgent", "eu", 4)
    assert eager.context("bill", task_id="t-1").id == "t-1"
    # a key makes the id the API would give the task
    scheduled = client.schedule("work", key="eager-key", delay_seconds=600)
    assert Eager(lambdas).context("work", key="eager-key").id == scheduled.id


def test_without_a_configuration_a_lambda_has_the_defaults() -> None:
    context = Eager(lambdas).context("bill")
    assert (context.priority, context.max_attempts) == ("normal", 5)


def test_the_callback_logs_inside_the_task(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        outcome = eager.run("bill")
    assert f"billing {outcome.context.id}" in caplog.text and "task started" in caplog.text


def test_input_the_api_refuses_is_refused_with_its_error() -> None:
    with pytest.raises(WrongType) as payload:
        eager.run("bill", [1, 2])  # type: ignore[arg-type]
    assert payload.value.field == "payload"
    with pytest.raises(UnknownPriority):
        eager.run("bill", priority="normal")
    with pytest.raises(UnknownLambda):
        eager.run("refund")
    with pytest.raises(InputError) as attempt:
        eager.run("bill", attempt=4)
    assert attempt.value.field == "attempt"
    with pytest.raises(LookupError, match="no callback registered for 'work'"):
        Eager(lambdas).run("work")


@pytest.mark.parametrize(
    ("lambda_name", "payload"),
    [
        ("tick", {}),
        ("flaky", {"works_from": 2}),
        ("flaky", {"works_from": 3}),
        ("step", {"works_from": 2}),
    ],
    ids=["succeeds", "succeeds-second", "runs-out", "fatal"],
)
def test_eager_attempts_end_as_the_worker_hosts_do(live: LiveStack, lambda_name: str, payload: dict[str, Any]) -> None:
    done = live.client.wait(live.client.schedule(lambda_name, payload).id, timeout_s=60)
    replay = Eager(live_lambdas.lambdas, StackConfig.model_validate(LIVE_CONFIG))
    outcomes = [replay.run(lambda_name, payload, attempt=n) for n in range(1, done.attempt + 1)]
    assert [o.status for o in outcomes] == [TaskStatus.RETRIABLE_FAILURE] * (done.attempt - 1) + [done.status]
    eager_errors = [(o.error.type, o.error.message, o.error.attempt) for o in outcomes if o.error is not None]
    assert eager_errors == [(e.type, e.message, e.attempt) for e in done.errors]
