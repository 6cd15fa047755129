"""Worker services scale on their backlog per running task, from zero, and ahead of tasks coming due."""

from __future__ import annotations

import json
from typing import Any

import pytest
from atf_cdk.constructs.scaling import MAX_METRICS_PER_EXPRESSION, Backlog, ServiceView, from_zero_steps
from atf_cdk.service import Scaling

from atf_core.telemetry import CONSUMER_SERVICE, Metric
from tests.infra.conftest import Synthesized


def _service_ref(synth: Synthesized, service_name: str) -> str:
    (found,) = [
        k for k, s in synth.resources("AWS::ECS::Service").items() if s["Properties"]["ServiceName"] == service_name
    ]
    return found


def _target(synth: Synthesized, service_name: str) -> tuple[str, dict[str, Any]] | None:
    ref = _service_ref(synth, service_name)
    found = [
        (k, t["Properties"])
        for k, t in synth.resources("AWS::ApplicationAutoScaling::ScalableTarget").items()
        if {"Fn::GetAtt": [ref, "Name"]} in json.loads(json.dumps(t["Properties"]["ResourceId"]))["Fn::Join"][1]
    ]
    assert len(found) <= 1
    return found[0] if found else None


def _policies(synth: Synthesized, target: str, kind: str) -> list[dict[str, Any]]:
    return [
        p["Properties"]
        for p in synth.resources("AWS::ApplicationAutoScaling::ScalingPolicy").values()
        if p["Properties"]["ScalingTargetId"] == {"Ref": target} and p["Properties"]["PolicyType"] == kind
    ]


def _queue_names(synth: Synthesized, lambdas: list[str]) -> set[str]:
    config = synth.settings.config
    return {f"{config.name}-{name}-{p}" for name in lambdas for p in config.lambdas[name].priorities}


def test_each_service_with_an_image_tracks_its_backlog_per_running_task(synth: Synthesized) -> None:
    config, groups = synth.settings.config, synth.settings.props().consumer_groups
    for name, worker in synth.settings.workers.items():
        service_name = f"{config.name}-{name}"
        found = _target(synth, service_name)
        if not worker.image:  # no image: no task, nothing to scale
            assert found is None
            continue
        assert found is not None
        target, props = found
        assert (props["MinCapacity"], props["MaxCapacity"]) == (worker.min_tasks, worker.max_tasks)
        assert props["ScalableDimension"] == "ecs:service:DesiredCount"
        (policy,) = _policies(synth, target, "TargetTrackingScaling")
        tracking = policy["TargetTrackingScalingPolicyConfiguration"]
        assert tracking["TargetValue"] == worker.backlog_per_task
        queries = {q["Id"]: q for q in tracking["CustomizedMetricSpecification"]["Metrics"]}
        (returned,) = [q for q in queries.values() if q.get("ReturnData")]
        stats = {i: q["MetricStat"] for i, q in queries.items() if "MetricStat" in q}
        # visible + in flight of each of its queues, the look-ahead of each of its lambdas, per running task
        by_metric: dict[str, set[str]] = {}
        for stat in stats.values():
            dims = {d["Name"]: d["Value"] for d in stat["Metric"].get("Dimensions", [])}
            by_metric.setdefault(stat["Metric"]["MetricName"], set()).add(json.dumps(dims, sort_keys=True))
        queues = _queue_names(synth, worker.lambdas or [name])
        for sqs in ("ApproximateNumberOfMessagesVisible", "ApproximateNumberOfMessagesNotVisible"):
            assert {json.loads(d)["QueueName"] for d in by_metric[sqs]} == queues
        assert by_metric[Metric.TASKS_DUE_SOON] == {
            json.dumps({"lambda": n, "service": CONSUMER_SERVICE}, sort_keys=True) for n in worker.lambdas or [name]
        }
        (running,) = by_metric["RunningTaskCount"]
        assert json.loads(running) == {"ClusterName": f"{config.name}-workers", "ServiceName": service_name}
        expression = returned["Expression"]
        assert expression.endswith("/ MAX([FILL(running, 0), 1])")
        assert f"+ {groups} * (FILL(due0, 0))" in expression
        assert all(f"FILL({i}, 0)" in expression for i in stats if i != "running")
        assert len(queries) - 1 <= MAX_METRICS_PER_EXPRESSION


def test_a_backlog_with_no_desired_task_starts_tasks_at_once(synth: Synthesized) -> None:
    config = synth.settings.config
    alarms = synth.scaling_alarms()
    for name, worker in synth.settings.workers.items():
        found = _target(synth, f"{config.name}-{name}")
        if found is None:
            continue
        (step,) = _policies(synth, found[0], "StepScaling")
        steps = step["StepScalingPolicyConfiguration"]
        assert steps["AdjustmentType"] == "ExactCapacity"
        adjustments = [s["ScalingAdjustment"] for s in steps["StepAdjustments"]]
        assert adjustments[0] == 1 and adjustments[-1] == worker.max_tasks and adjustments == sorted(adjustments)
        (alarm,) = [
            a["Properties"]
            for a in alarms.values()
            if any(json.dumps(action).count("FromZero") for action in a["Properties"]["AlarmActions"])
            and f"{config.name}-{name}" in json.dumps(a["Properties"]["Metrics"])
        ]
        assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
        (expression,) = [m["Expression"] for m in alarm["Metrics"] if m.get("ReturnData", True) and "Expression" in m]
        assert expression.startswith("IF(FILL(desired, 0) < 1, ")
        assert "due0" in expression  # tasks coming due start hosts before their messages exist


def test_staging_may_scale_a_service_to_zero(synthesized: dict[str, Synthesized]) -> None:
    staging = synthesized["staging"]
    found = _target(staging, f"{staging.settings.config.name}-flaky")
    assert found is not None and found[1]["MinCapacity"] == 0


def test_the_dashboard_shows_each_services_backlog_look_ahead_and_tasks(synth: Synthesized) -> None:
    (dashboard,) = synth.resources("AWS::CloudWatch::Dashboard").values()
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    widgets = json.loads("".join(p if isinstance(p, str) else "TOKEN" for p in parts))["widgets"]
    for name in synth.settings.workers:
        (graph,) = [
            w["properties"] for w in widgets if w["properties"].get("title", "").startswith(f"Worker service {name}:")
        ]
        lines = {m[0]["label"]: m[0]["expression"] for m in graph["metrics"]}
        assert set(lines) == {"queued and in flight", "due soon (look-ahead)", "running tasks", "desired tasks"}
        assert f'MetricName="{Metric.TASKS_DUE_SOON}"' in lines["due soon (look-ahead)"]
        assert f"{synth.settings.props().consumer_groups} * SUM(" in lines["due soon (look-ahead)"]


def test_from_zero_steps_double_up_to_the_maximum() -> None:
    assert from_zero_steps(Scaling(min_tasks=0, max_tasks=10, backlog_per_task=50)) == [
        (0.0, 50.0, 1), (50.0, 100.0, 2), (100.0, 200.0, 4), (200.0, 400.0, 8), (400.0, None, 10),
    ]  # fmt: skip
    assert from_zero_steps(Scaling(min_tasks=0, max_tasks=1)) == [(0.0, None, 1)]


def test_a_service_on_more_queues_than_an_alarm_can_read_is_refused() -> None:
    view = ServiceView("big", "s", "c", ["a", "b", "c"], [f"q{i}" for i in range(6)], 1, "ATF/test")
    backlog = Backlog(view)
    with pytest.raises(ValueError, match="CloudWatch alarms take 10"):
        backlog.with_metric("running", backlog.metrics["due0"])


def test_a_split_priority_scales_on_its_first_queue_times_its_parts() -> None:
    # one lambda, three priorities each split over four queues: 12 queues, two metrics each, would be 24
    names = [f"q-{p}" if part == 0 else f"q-{p}-{part}" for p in ("high", "normal", "low") for part in range(4)]
    view = ServiceView("hot", "s", "c", ["hot"], names, 1, "ATF/test", split={"q-high": 4, "q-normal": 4, "q-low": 4})
    assert view.scaled_queues == [("q-high", 4), ("q-normal", 4), ("q-low", 4)]
    backlog = Backlog(view)
    assert len(backlog.with_metric("running", backlog.metrics["due0"])) == 8  # under the alarm's 10
    assert backlog.queued.startswith("4 * (FILL(visible0, 0) + FILL(inflight0, 0))")
    assert backlog.metrics["visible1"].to_metric_config().metric_stat.dimensions[0].value == "q-normal"  # type: ignore[union-attr]
