"""Dashboard, alarms and outputs."""

from __future__ import annotations

import json
from typing import Any

from atf_cdk.constructs.workers import WORKER_SERVICE
from aws_cdk.assertions import Match

from atf_core.telemetry import Metric
from tests.infra.conftest import Synthesized


def _widgets(synth: Synthesized) -> list[dict[str, Any]]:
    (dashboard,) = synth.resources("AWS::CloudWatch::Dashboard").values()
    # The body is a Fn::Join of literal JSON and tokens (region, alarm ARNs): put placeholders in for the tokens.
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    body = json.loads("".join(p if isinstance(p, str) else "TOKEN" for p in parts))
    return body["widgets"]  # type: ignore[no-any-return]


def _graph(widgets: list[dict[str, Any]], title: str) -> dict[str, Any]:
    (found,) = [w["properties"] for w in widgets if w["properties"].get("title") == title]
    return found


def test_start_lag_alarm_per_lambda_and_priority_at_the_objective(synth: Synthesized) -> None:
    expected = {(name, p) for name, spec in synth.settings.config.lambdas.items() for p in spec.priorities}
    found = set()
    for alarm in synth.resources("AWS::CloudWatch::Alarm").values():
        props = alarm["Properties"]
        if props.get("MetricName") == Metric.START_LAG_MS:
            dims = {d["Name"]: d["Value"] for d in props["Dimensions"]}
            found.add((dims["lambda"], dims["priority"]))
            assert props["ExtendedStatistic"] == "p95"
            assert props["Threshold"] == synth.settings.start_lag_objective_ms == 5000
            assert props["ComparisonOperator"] == "GreaterThanThreshold"
            # what the worker hosts emit into: this environment's namespace, not every environment's
            assert {props["Namespace"]} == _worker_env(synth, "POWERTOOLS_METRICS_NAMESPACE")
            assert props["Namespace"] == f"ATF/{synth.settings.config.name}"
            assert {dims["service"]} == _worker_env(synth, "POWERTOOLS_SERVICE_NAME") == {WORKER_SERVICE}
    assert found == expected


def _worker_env(synth: Synthesized, variable: str) -> set[str]:
    """A variable of the worker hosts' environment, as their Powertools reads it (service, namespace)."""
    values = set()
    for task in synth.resources("AWS::ECS::TaskDefinition").values():
        (container,) = task["Properties"]["ContainerDefinitions"]
        values |= {e["Value"] for e in container["Environment"] if e["Name"] == variable}
    return values


def test_dead_letter_alarm_per_dead_letter_queue(synth: Synthesized) -> None:
    dead_letters = {
        k for k, q in synth.resources("AWS::SQS::Queue").items() if q["Properties"]["QueueName"].endswith("-dlq")
    }
    alarmed = set()
    for alarm in synth.resources("AWS::CloudWatch::Alarm").values():
        props = alarm["Properties"]
        if props.get("MetricName") == "ApproximateNumberOfMessagesVisible":
            assert props["Threshold"] == 0 and props["ComparisonOperator"] == "GreaterThanThreshold"
            (dimension,) = props["Dimensions"]
            alarmed.add(dimension["Value"]["Fn::GetAtt"][0])
    assert alarmed == dead_letters


def test_consumer_errors_alarm_and_every_alarm_notifies(synth: Synthesized) -> None:
    synth.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": "AWS/Lambda",
            "MetricName": "Errors",
            "Threshold": 0,
            "ComparisonOperator": "GreaterThanThreshold",
        },
    )
    (topic,) = synth.resources("AWS::SNS::Topic")
    for alarm in synth.incident_alarms().values():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic}]


def test_housekeeping_that_keeps_failing_alarms_and_shows_on_the_dashboard(synth: Synthesized) -> None:
    alarms = synth.template.find_resources(
        "AWS::CloudWatch::Alarm", {"Properties": {"MetricName": Metric.HOUSEKEEPING_FAILURES}}
    )
    (alarm,) = [a["Properties"] for a in alarms.values()]
    namespace = f"ATF/{synth.settings.config.name}"
    assert (alarm["Namespace"], alarm["Statistic"], alarm["Period"]) == (namespace, "Sum", 300)
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "consumer"}]
    assert (alarm["Threshold"], alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (0, 3, 3)
    assert alarm["TreatMissingData"] == "notBreaching"
    (name,) = alarms
    (dashboard,) = synth.resources("AWS::CloudWatch::Dashboard").values()
    assert {"Fn::GetAtt": [name, "Arn"]} in dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]


def test_alarm_topic_is_encrypted_and_tls_only(synth: Synthesized) -> None:
    (ops_key,) = [k for k in synth.resources("AWS::KMS::Key") if k.startswith("OpsKey")]
    synth.template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": {"Fn::GetAtt": [ops_key, "Arn"]}})
    synth.template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]
                )
            }
        },
    )


def test_dashboard_shows_what_the_issue_asks_for(synth: Synthesized) -> None:
    widgets = _widgets(synth)
    for name in synth.settings.config.lambdas:
        tasks = _graph(widgets, f"{name}: tasks per minute")
        lines = {m[0]["label"]: m[0]["expression"] for m in tasks["metrics"]}
        assert set(lines) == {"scheduled", "started", "succeeded", "failed", "dropped"}
        assert f'MetricName="{Metric.STARTED}"' in lines["started"] and f'lambda="{name}"' in lines["started"]
        assert f'MetricName="{Metric.RETRIABLE_FAILURES}" OR MetricName="{Metric.FATAL_FAILURES}"' in lines["failed"]
        lag = _graph(widgets, f"{name}: start lag (ms) by priority")
        assert [m[0]["label"] for m in lag["metrics"]] == ["p50", "p95", "p99"]
        assert all(f"'{m[0]['label']}', 60)" in m[0]["expression"] for m in lag["metrics"])
        assert lag["annotations"]["horizontal"][0]["value"] == synth.settings.start_lag_objective_ms
    queues = {q["Properties"]["QueueName"] for q in synth.resources("AWS::SQS::Queue").values()}
    shown = set()
    for title in ("Queue depth", "Oldest message age (s)", "Dead letters"):
        shown |= {m[-1]["label"] for m in _graph(widgets, title)["metrics"]}
    assert shown == queues
    consumer = json.dumps([_graph(widgets, t) for t in ("Consumer loop (s)", "Tasks per loop", "Throttles")])
    for metric in (Metric.CONSUMER_LOOP_SECONDS, Metric.TASKS_PER_LOOP, Metric.THROTTLES, "WriteThrottleEvents"):
        assert metric in consumer


def test_outputs_a_user_needs(synth: Synthesized) -> None:
    outputs = synth.json["Outputs"]
    assert {"ApiUrl", "TableName", "DashboardUrl", "AlarmTopicArn", "WorkerCluster"} <= set(outputs)
    (table,) = synth.resources("AWS::DynamoDB::Table")
    assert outputs["TableName"]["Value"] == {"Ref": table}
    assert "execute-api" in json.dumps(outputs["ApiUrl"]["Value"])
    assert "#dashboards/dashboard/" in json.dumps(outputs["DashboardUrl"]["Value"])
