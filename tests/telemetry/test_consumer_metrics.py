"""The consumer Lambda's metrics and logs, from a real invocation against in-process moto."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from atf_core.config import StackConfig
from atf_core.consumer import Event, PollReport
from atf_core.gating import Gating
from atf_core.schema import GateAction, ScheduleRequest, utcnow
from atf_core.store.tasks import DynamoTaskStore
from atf_core.tasks import Scheduling
from atf_core.telemetry import CONSUMER_SERVICE, Metric
from atf_local.consumer_process import FakeLambdaContext
from functions.consumer import handler
from tests.telemetry.emf import named


def test_an_invocation_emits_enqueued_and_dropped_per_lambda_and_priority(
    consumer_env: DynamoTaskStore,
    config: StackConfig,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    scheduling = Scheduling(consumer_env, config)
    for lambda_name, priority in (("work", "high"), ("work", "high"), ("work", "low"), ("sleepy", "normal")):
        scheduling.schedule(ScheduleRequest.model_validate({"lambda": lambda_name, "priority": priority}))
    Gating(consumer_env, config).set("sleepy", None, GateAction.DROP, None, "test")

    # A warm container: building the clients is not part of this invocation's time, which on a loaded
    # machine could otherwise leave no poll at all (counting the tasks due soon comes first, and takes some).
    handler._consumer(0, 1)
    handler._due_soon(0, 1)
    # poll_interval is 0.5 s and the loop stops 2 s before the end: a few polls
    result = handler.lambda_handler({}, FakeLambdaContext(timeout_s=4.0))

    assert result["polls"] >= 1
    out = capsys.readouterr().out
    enqueued = {(p.dimensions["lambda"], p.dimensions["priority"]): p.total for p in named(out, Metric.ENQUEUED)}
    assert enqueued == {("work", "high"): 2, ("work", "low"): 1}
    (dropped,) = named(out, Metric.DROPPED)
    assert (dropped.dimensions, dropped.total) == ({"lambda": "sleepy", "priority": "normal", "service": "consumer"}, 1)
    (loops,) = named(out, Metric.CONSUMER_LOOP_SECONDS)
    assert loops.unit == "Seconds" and len(loops.values) == result["polls"]
    assert sum(p.total for p in named(out, Metric.TASKS_PER_LOOP)) == 3
    assert all(p.dimensions["service"] == CONSUMER_SERVICE for p in named(out, Metric.TASKS_PER_LOOP))
    # The log line, as Powertools writes it: JSON with the invocation's context
    (record, *_) = [r for r in caplog.records if r.getMessage() == "poll"]
    line = json.loads(handler.logger.registered_formatter.format(record))
    assert (line["enqueued"], line["function_name"], line["service"]) == (3, "atf-consumer-local", "atf-consumer")


def test_requeues_exhaustions_dead_letters_and_errors_are_counted(capsys: pytest.CaptureFixture[str]) -> None:
    report = PollReport()
    for event, queue in (
        (Event.ENQUEUED, ("work", "low")),
        (Event.REQUEUED, ("work", "low")),
        (Event.EXHAUSTED, ("mail", "normal")),
        (Event.DEAD_LETTERED, ("mail", "normal")),
        (Event.SEND_FAILED, ("work", "low")),
    ):
        report.count(event, queue)
    report.count(Event.ERROR, n=2)
    report.count(Event.HOUSEKEEPING_FAILED)
    handler.record(report, 0.25)
    handler.metrics.flush()

    out = capsys.readouterr().out
    assert [p.total for p in named(out, Metric.REQUEUED, priority="low")] == [1]
    assert [p.total for p in named(out, Metric.EXHAUSTED, **{"lambda": "mail"})] == [1]
    assert [p.total for p in named(out, Metric.DEAD_LETTERED, **{"lambda": "mail"})] == [1]
    (errors,) = named(out, Metric.CONSUMER_ERRORS)
    assert (errors.dimensions, errors.total) == ({"service": "consumer"}, 4)
    (chores,) = named(out, Metric.HOUSEKEEPING_FAILURES)  # what the housekeeping alarm watches
    assert (chores.dimensions, chores.total) == ({"service": "consumer"}, 1)


def test_an_invocation_publishes_each_lambdas_tasks_due_soon(
    consumer_env: DynamoTaskStore, config: StackConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    scheduling = Scheduling(consumer_env, config)
    soon = (utcnow() + timedelta(seconds=60)).isoformat()
    for _ in range(3):
        scheduling.schedule(ScheduleRequest.model_validate({"lambda": "work", "run_at": soon}))
    scheduling.schedule(ScheduleRequest.model_validate({"lambda": "work"}))  # due now: the queues' business

    handler._consumer(0, 1)
    handler._due_soon(0, 1)
    handler.lambda_handler({}, FakeLambdaContext(timeout_s=2.6))

    out = capsys.readouterr().out
    due = {p.dimensions["lambda"]: p.values for p in named(out, Metric.TASKS_DUE_SOON)}
    assert due == {"work": (3,), "sleepy": (0,)}  # one point per lambda and invocation, zero included
    assert all(
        p.dimensions == {"lambda": p.dimensions["lambda"], "service": CONSUMER_SERVICE}
        for p in named(out, Metric.TASKS_DUE_SOON)
    )
