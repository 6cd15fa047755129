"""Synthesizes every environment once per session, offline, the way `cdk synth` does.

Each worker service's resources (its lambdas' queues, its ECS service, their alarms) are in a nested
stack of its own. The tests read one flattened
template: the environment's resources and every nested stack's, each nested logical id
prefixed with its stack's, and the references between them (nested stack parameters and
outputs) replaced by what they refer to, so that a grant on a queue reads as the queue's
GetAtt wherever the two live."""

from __future__ import annotations

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
from atf_cdk.settings import EnvironmentSettings, available_environments, load_environment  # noqa: E402
from atf_cdk.stack import AtfStack  # noqa: E402
from aws_cdk import App, Stack  # noqa: E402
from aws_cdk.assertions import Template  # noqa: E402

# One flattening of the nested stacks, shared with the local stack's IAM (which reads its roles from it)
from atf_local.iam.template import cdk_context, flatten, nested_templates  # noqa: E402

ENVIRONMENTS = available_environments()


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
