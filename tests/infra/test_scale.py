"""An environment of 100 lambdas, each with limits (its flow keys' too): it synthesizes within CloudFormation's,
ECS's, Lambda's and CloudWatch's limits, and every function and host reads the whole configuration."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from atf_cdk.settings import EnvironmentSettings

from atf_core.config import CONFIG_ENV, StackConfig
from tests.infra.conftest import ROOT, Synthesized, nested_templates, synthesize_settings
from tests.infra.test_compute import function_config

LAMBDAS = 100
# CloudFormation: resources, outputs and parameters per template, and a template's size from S3.
MAX_RESOURCES = 500
MAX_OUTPUTS = 200
MAX_PARAMETERS = 200
MAX_TEMPLATE_BYTES = 1_000_000
# ECS refuses a task definition over 64 KiB.
MAX_TASK_DEFINITION_BYTES = 65_536
# CloudWatch: alarms in an alarm-status widget, lines in a graph, widgets on a dashboard.
MAX_ALARMS_PER_WIDGET = 100
MAX_LINES_PER_GRAPH = 100
MAX_WIDGETS = 500
# CloudWatch Logs Insights: log groups one query reads.
MAX_LOG_GROUPS_PER_QUERY = 50


def many_lambdas(count: int = LAMBDAS) -> EnvironmentSettings:
    settings = json.loads((ROOT / "infra" / "environments" / "dev.json").read_text())
    limits = {"max_starts_per_second": 25.5, "max_running": 200}
    settings["config"]["lambdas"] = {
        f"lambda-{i:03d}": {
            "priorities": ["high", "normal", "low"],
            "default_priority": "normal",
            "limits": limits,
            "collection_limits": {f"tenant-{c}": {"max_running": 5} for c in range(3)},
            "key_limits": {"max_running": 2, "max_starts_per_second": 5},
        }
        for i in range(count)
    }
    settings["workers"] = {name: {"image": "atf-workers:1.0.0"} for name in settings["config"]["lambdas"]}
    return EnvironmentSettings.model_validate(settings)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize_settings(many_lambdas(), tmp_path_factory.mktemp("cdk-many"))


def test_the_configuration_is_far_over_lambdas_environment_limit() -> None:
    assert len(many_lambdas().config.to_env()) > 6 * 4096


def test_every_template_is_within_cloudformations_limits(big: Synthesized) -> None:
    nested = nested_templates(big.stack)
    assert len(nested) == LAMBDAS
    for path in [big.template_path, *(big.outdir / name for name in nested.values())]:
        template = json.loads(path.read_text())
        assert len(template["Resources"]) <= MAX_RESOURCES, path.name
        assert len(template.get("Outputs", {})) <= MAX_OUTPUTS, path.name
        assert len(template.get("Parameters", {})) <= MAX_PARAMETERS, path.name
        assert path.stat().st_size <= MAX_TEMPLATE_BYTES, path.name
    assert len(big.resources("AWS::ECS::Service")) == LAMBDAS
    assert len(big.resources("AWS::SQS::Queue")) == 2 * 3 * LAMBDAS


def test_functions_read_the_whole_configuration_from_their_code(
    big: Synthesized, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("consumer", "frontend"):
        assert function_config(big, name, monkeypatch) == big.settings.config


def test_hosts_read_it_from_their_environment_within_ecs_limits(
    big: Synthesized, monkeypatch: pytest.MonkeyPatch
) -> None:
    for task in big.resources("AWS::ECS::TaskDefinition").values():
        assert len(json.dumps(task["Properties"]).encode()) < MAX_TASK_DEFINITION_BYTES
        (container,) = task["Properties"]["ContainerDefinitions"]
        monkeypatch.setenv(CONFIG_ENV, {e["Name"]: e["Value"] for e in container["Environment"]}[CONFIG_ENV])
        assert StackConfig.from_env() == big.settings.config


def _dashboard(big: Synthesized) -> list[dict[str, Any]]:
    (dashboard,) = big.resources("AWS::CloudWatch::Dashboard").values()
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    return json.loads("".join(p if isinstance(p, str) else "TOKEN" for p in parts))["widgets"]  # type: ignore[no-any-return]


def test_the_dashboard_splits_what_one_widget_cannot_hold(big: Synthesized) -> None:
    widgets = _dashboard(big)
    assert len(widgets) <= MAX_WIDGETS
    alarm_widgets = [w for w in widgets if w["type"] == "alarm"]
    assert all(len(w["properties"]["alarms"]) <= MAX_ALARMS_PER_WIDGET for w in alarm_widgets)
    assert sum(len(w["properties"]["alarms"]) for w in alarm_widgets) == len(big.incident_alarms())
    assert len(big.scaling_alarms()) == LAMBDAS  # each service's start from zero, shown on its graph instead
    graphs = [w for w in widgets if w["type"] == "metric"]
    assert all(len(w["properties"]["metrics"]) <= MAX_LINES_PER_GRAPH for w in graphs)
    depth = [w for w in graphs if w["properties"]["title"].startswith("Queue depth")]
    shown = {line[-1]["label"] for widget in depth for line in widget["properties"]["metrics"]}
    names = {q["Properties"]["QueueName"] for q in big.resources("AWS::SQS::Queue").values()}
    assert shown == {name for name in names if not name.endswith("-dlq")}
    logs = [w for w in widgets if w["type"] == "log"]  # the flow keys' queries: 50 log groups each at most
    assert all(w["properties"]["query"].count("SOURCE '") <= MAX_LOG_GROUPS_PER_QUERY for w in logs)
    assert sum(w["properties"]["query"].count("SOURCE '") for w in logs) == 2 * LAMBDAS  # two queries a group


def test_no_role_policy_outgrows_iams_limits(big: Synthesized) -> None:
    """IAM takes 10,240 characters of inline policy per role; CDK moves the rest to managed policies
    (6,144 each, ten per role). Sizes are measured with each reference replaced by a realistic ARN."""
    arn = "arn:aws:sqs:eu-west-1:123456789012:atf-dev-lambda-000-normal-dlq"
    for kind, limit in (("AWS::IAM::Policy", 10_240), ("AWS::IAM::ManagedPolicy", 6_144)):
        for logical_id, policy in big.resources(kind).items():
            document = json.dumps(policy["Properties"]["PolicyDocument"], separators=(",", ":"))
            size = len(_with_arns(document, arn))
            assert size <= limit, (logical_id, size)


def _with_arns(document: str, arn: str) -> str:
    """Every intrinsic (a Ref, GetAtt or Join) counted as one ARN of a queue with a long name."""
    return re.sub(r'\{"(Ref|Fn::GetAtt|Fn::Join)":(?:[^{}]|\{[^{}]*\})*\}', f'"{arn}"', document)
