"""The dashboard's flow keys (issue 16): tasks the keys held back per lambda, by the metric names the
controller emits, and the busiest keys ranked from the worker hosts' log lines: never a metric per key."""

from __future__ import annotations

import json
from typing import Any

import pytest
from atf_cdk.constructs.observability import LOG_GROUPS_PER_QUERY, held_back_query
from atf_cdk.settings import EnvironmentSettings

from atf_core.limits import KEY_HOLD_METRICS, KeyHold
from atf_core.telemetry import Dimension, LogKey, LogLine, Metric
from tests.infra.conftest import ROOT, Synthesized, synthesize_settings
from tests.infra.test_observability import _widgets


def keyed_dev() -> EnvironmentSettings:
    settings = json.loads((ROOT / "infra" / "environments" / "dev.json").read_text())
    settings["config"]["lambdas"]["charge"]["key_limits"] = {"max_running": 2, "max_starts_per_second": 5}
    return EnvironmentSettings.model_validate(settings)


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize_settings(keyed_dev(), tmp_path_factory.mktemp("cdk-keyed"))


def _titled(widgets: list[dict[str, Any]], start: str) -> list[dict[str, Any]]:
    return [w for w in widgets if w["properties"].get("title", "").startswith(start)]


def test_a_graph_per_key_limit_draws_the_metric_the_controller_counts_per_lambda(keyed: Synthesized) -> None:
    graphs = _titled(_widgets(keyed), "Tasks held back by their flow key")
    assert len(graphs) == len(KeyHold) == 3
    drawn = {}
    for graph in graphs:
        ((line,),) = graph["properties"]["metrics"]
        drawn[graph["properties"]["title"]] = line["expression"]
    assert set(KEY_HOLD_METRICS.values()) == {Metric.KEY_WAITED, Metric.KEY_THROTTLED, Metric.KEY_RATE_LIMITED}
    for hold, metric in KEY_HOLD_METRICS.items():
        (title,) = [t for t in drawn if f": {hold} ({metric} " in t]
        namespace = keyed.settings.config.metrics_namespace
        assert drawn[title] == held_back_query(namespace, metric)
        assert drawn[title].startswith(f'SELECT SUM({metric}) FROM "{namespace}" GROUP BY "{Dimension.LAMBDA}"')


def test_no_graph_reads_a_flow_key(keyed: Synthesized) -> None:
    graphs = [w for w in _widgets(keyed) if w["type"] == "metric"]
    assert LogKey.FLOW_KEY not in json.dumps(graphs)  # keys are ranked from logs only (below)


def test_without_key_limits_that_hold_tasks_back_there_is_no_such_graph(synth: Synthesized) -> None:
    assert all(spec.key_limits is None for spec in synth.settings.config.lambdas.values())
    assert not _titled(_widgets(synth), "Tasks held back by their flow key")


def _worker_log_groups(synth: Synthesized) -> set[str]:
    """The log groups the worker hosts' containers write to, as their task definitions name them."""
    groups = {k: g["Properties"].get("LogGroupName") for k, g in synth.resources("AWS::Logs::LogGroup").items()}
    named = set()
    for task in synth.resources("AWS::ECS::TaskDefinition").values():
        (container,) = task["Properties"]["ContainerDefinitions"]
        ref = container["LogConfiguration"]["Options"]["awslogs-group"]
        named.add(groups[ref["Ref"]] if isinstance(ref, dict) else ref)
    return named


def _log_queries(synth: Synthesized) -> dict[str, list[dict[str, Any]]]:
    logs = [w for w in _widgets(synth) if w["type"] == "log"]
    return {
        "started": [w for w in logs if w["properties"]["title"].startswith("Busiest flow keys")],
        "held": [w for w in logs if w["properties"]["title"].startswith("Flow keys holding tasks back")],
    }


def _sources(widget: dict[str, Any]) -> list[str]:
    query = widget["properties"]["query"]
    return [part.strip()[len("SOURCE '") : -1] for part in query.split("|") if part.strip().startswith("SOURCE")]


def test_logs_insights_rank_the_keys_over_every_worker_services_logs(synth: Synthesized) -> None:
    groups = _worker_log_groups(synth)
    assert groups == {f"/ecs/{synth.settings.config.name}-{name}" for name in synth.settings.workers}
    queries = _log_queries(synth)
    for kind, widgets in queries.items():
        assert widgets, kind
        assert {g for w in widgets for g in _sources(w)} == groups
        for widget in widgets:
            assert len(_sources(widget)) <= LOG_GROUPS_PER_QUERY
            assert widget["properties"]["view"] == "table"
    (started,) = queries["started"]
    assert (
        f'filter message = "{LogLine.TASK_STARTED}" and ispresent({LogKey.FLOW_KEY})' in started["properties"]["query"]
    )
    assert f"by {LogKey.FLOW_KEY}, lambda" in started["properties"]["query"]
    (held,) = queries["held"]
    assert f'filter message = "{LogLine.HELD_BACK}"' in held["properties"]["query"]
    assert f"by {LogKey.FLOW_KEY}, lambda, {LogKey.HELD_BY}" in held["properties"]["query"]


def test_the_dashboard_names_the_log_groups_with_no_reference_into_the_nested_stacks(synth: Synthesized) -> None:
    own = json.loads(synth.template_path.read_text())  # the environment's own template, not the flattened one
    (dashboard,) = [r for r in own["Resources"].values() if r["Type"] == "AWS::CloudWatch::Dashboard"]
    tokens = [p for p in dashboard["Properties"]["DashboardBody"]["Fn::Join"][1] if not isinstance(p, str)]
    assert tokens and not [t for t in tokens if "Logs" in json.dumps(t)]  # the alarms' ARNs, no log group's
    for group in _worker_log_groups(synth):
        assert f"SOURCE '{group}'" in json.dumps(dashboard)
