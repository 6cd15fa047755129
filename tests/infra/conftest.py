"""Synthesizes every environment once per session, offline, the way `cdk synth` does.

Each worker service's resources (its lambdas' queues, its ECS service, their alarms) are in a nested
stack of its own. The tests read one flattened
template: the environment's resources and every nested stack's, each nested logical id
prefixed with its stack's, and the references between them (nested stack parameters and
outputs) replaced by what they refer to, so that a grant on a queue reads as the queue's
GetAtt wherever the two live."""

from __future__ import annotations

import copy
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "infra"), str(ROOT / "layers")]

import atf_cdk  # noqa: E402, F401  (quiets jsii's Node banner before aws_cdk loads)
from atf_cdk.app import build, environment_stack  # noqa: E402
from atf_cdk.constructs.layer import BUNDLING_CONTEXT  # noqa: E402
from atf_cdk.settings import EnvironmentSettings, available_environments, load_environment  # noqa: E402
from atf_cdk.stack import AtfStack  # noqa: E402
from aws_cdk import App, NestedStack, Stack  # noqa: E402
from aws_cdk.assertions import Template  # noqa: E402

ENVIRONMENTS = available_environments()


def cdk_context(env: str) -> dict[str, Any]:
    """cdk.json's context (its feature flags) as the CLI would pass it, plus the environment,
    and the layer without pip so that nothing is downloaded."""
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    return {**context, "env": env, BUNDLING_CONTEXT: "source"}


def nested_templates(stack: Stack) -> dict[str, str]:
    """Each nested stack's template file, by its resource's logical id in the parent."""
    found = {}
    for construct in stack.node.find_all():
        if isinstance(construct, NestedStack) and construct.nested_stack_parent is stack:
            resource = construct.nested_stack_resource
            assert resource is not None
            found[stack.get_logical_id(resource)] = construct.template_file
    return found


def _rewrite(node: Any, local: set[str], prefix: str, parameters: dict[str, Any]) -> Any:
    """A nested template's part in the parent's terms."""
    if isinstance(node, list):
        return [_rewrite(item, local, prefix, parameters) for item in node]
    if not isinstance(node, dict):
        return node
    if set(node) == {"Ref"} and node["Ref"] in parameters:
        return copy.deepcopy(parameters[node["Ref"]])
    if set(node) == {"Ref"} and node["Ref"] in local:
        return {"Ref": prefix + node["Ref"]}
    if set(node) == {"Fn::GetAtt"} and node["Fn::GetAtt"][0] in local:
        return {"Fn::GetAtt": [prefix + node["Fn::GetAtt"][0], *node["Fn::GetAtt"][1:]]}
    rewritten = {key: _rewrite(value, local, prefix, parameters) for key, value in node.items()}
    if "DependsOn" in node and "Type" in node:
        depends = node["DependsOn"] if isinstance(node["DependsOn"], list) else [node["DependsOn"]]
        rewritten["DependsOn"] = [prefix + d if d in local else d for d in depends]
    return rewritten


def _resolve_outputs(node: Any, outputs: dict[str, dict[str, Any]]) -> Any:
    """The parent's references to nested outputs, replaced by the outputs' values."""
    if isinstance(node, list):
        return [_resolve_outputs(item, outputs) for item in node]
    if not isinstance(node, dict):
        return node
    if set(node) == {"Fn::GetAtt"} and node["Fn::GetAtt"][0] in outputs:
        stack_id, attribute = node["Fn::GetAtt"]
        return copy.deepcopy(outputs[stack_id][attribute.removeprefix("Outputs.")]["Value"])
    return {key: _resolve_outputs(value, outputs) for key, value in node.items()}


def flatten(outdir: Path, stack: Stack) -> dict[str, Any]:
    parent = json.loads((outdir / stack.template_file).read_text())
    nested = nested_templates(stack)
    resources = {k: v for k, v in parent["Resources"].items() if k not in nested}
    outputs: dict[str, dict[str, Any]] = {}
    for stack_id, file_name in nested.items():
        template = json.loads((outdir / file_name).read_text())
        parameters = parent["Resources"][stack_id]["Properties"].get("Parameters", {})
        prefix = f"{stack_id}."
        rewritten = _rewrite(template, set(template["Resources"]), prefix, parameters)
        clashes = set(resources) & {prefix + k for k in rewritten["Resources"]}
        assert not clashes, clashes
        resources.update({prefix + k: v for k, v in rewritten["Resources"].items()})
        outputs[stack_id] = rewritten.get("Outputs", {})
    return _resolve_outputs({**parent, "Resources": resources}, outputs)  # type: ignore[no-any-return]


@dataclass
class Synthesized:
    settings: EnvironmentSettings
    app: App
    stack: AtfStack
    outdir: Path
    template: Template

    @property
    def json(self) -> dict[str, Any]:
        return self.template.to_json()  # type: ignore[no-any-return]

    def resources(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.json["Resources"].items() if v["Type"] == type_}

    def scaling_alarms(self) -> dict[str, dict[str, Any]]:
        """The alarms that act on a scaling policy (a worker service's start from zero): signals, not incidents."""
        policies = set(self.resources("AWS::ApplicationAutoScaling::ScalingPolicy"))
        return {
            k: a
            for k, a in self.resources("AWS::CloudWatch::Alarm").items()
            if any(action.get("Ref") in policies for action in a["Properties"].get("AlarmActions", []))
        }

    def incident_alarms(self) -> dict[str, dict[str, Any]]:
        scaling = self.scaling_alarms()
        return {k: a for k, a in self.resources("AWS::CloudWatch::Alarm").items() if k not in scaling}

    @property
    def template_path(self) -> Path:
        return self.outdir / self.stack.template_file

    @property
    def template_paths(self) -> list[Path]:
        """Every template of the app: the account's, the environment's and its nested ones."""
        nested = [self.outdir / name for name in nested_templates(self.stack).values()]
        return [self.outdir / s.template_file for s in self.app.node.children if isinstance(s, Stack)] + nested

    @property
    def validation_report(self) -> dict[str, Any]:
        return json.loads((self.outdir / "validation-report.json").read_text())  # type: ignore[no-any-return]


def synthesize(env: str, outdir: Path) -> Synthesized:
    app = App(context=cdk_context(env), outdir=str(outdir))
    stack = build(app)
    app.synth()
    return Synthesized(load_environment(env), app, stack, outdir, Template.from_json(flatten(outdir, stack)))


def synthesize_settings(settings: EnvironmentSettings, outdir: Path) -> Synthesized:
    """An environment that has no file, e.g. one with many lambdas."""
    app = App(context=cdk_context(settings.environment), outdir=str(outdir))
    stack = environment_stack(app, settings)
    app.synth()
    return Synthesized(settings, app, stack, outdir, Template.from_json(flatten(outdir, stack)))


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Synthesized]:
    return {env: synthesize(env, tmp_path_factory.mktemp(f"cdk-{env}")) for env in ENVIRONMENTS}


@pytest.fixture(params=ENVIRONMENTS)
def synth(request: pytest.FixtureRequest, synthesized: dict[str, Synthesized]) -> Synthesized:
    return synthesized[request.param]
