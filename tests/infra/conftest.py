"""Synthesizes every environment once per session, offline, the way `cdk synth` does."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "infra"), str(ROOT / "layers")]

import atf_infra  # noqa: E402, F401  (quiets jsii's Node banner before aws_cdk loads)
from atf_infra.app import build  # noqa: E402
from atf_infra.constructs.layer import BUNDLING_CONTEXT  # noqa: E402
from atf_infra.settings import EnvironmentSettings, available_environments, load_environment  # noqa: E402
from atf_infra.stack import AtfStack  # noqa: E402
from aws_cdk import App  # noqa: E402
from aws_cdk.assertions import Template  # noqa: E402

ENVIRONMENTS = available_environments()


def cdk_context(env: str) -> dict[str, Any]:
    """cdk.json's context (its feature flags) as the CLI would pass it, plus the environment,
    and the layer without pip so that nothing is downloaded."""
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    return {**context, "env": env, BUNDLING_CONTEXT: "source"}


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

    @property
    def template_path(self) -> Path:
        return self.outdir / f"{self.stack.stack_name}.template.json"

    @property
    def validation_report(self) -> dict[str, Any]:
        return json.loads((self.outdir / "validation-report.json").read_text())  # type: ignore[no-any-return]


def synthesize(env: str, outdir: Path) -> Synthesized:
    app = App(context=cdk_context(env), outdir=str(outdir))
    stack = build(app)
    app.synth()
    template = json.loads((outdir / f"{stack.stack_name}.template.json").read_text())
    return Synthesized(load_environment(env), app, stack, outdir, Template.from_json(template))


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Synthesized]:
    return {env: synthesize(env, tmp_path_factory.mktemp(f"cdk-{env}")) for env in ENVIRONMENTS}


@pytest.fixture(params=ENVIRONMENTS)
def synth(request: pytest.FixtureRequest, synthesized: dict[str, Synthesized]) -> Synthesized:
    return synthesized[request.param]
