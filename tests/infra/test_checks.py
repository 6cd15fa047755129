"""cdk-nag's AwsSolutions pack finds nothing unacknowledged, every acknowledgement says why,
and cfn-lint finds nothing in the synthesized templates."""

from __future__ import annotations

import json
from pathlib import Path

import cfnlint.api
import pytest
from atf_cdk import nag
from aws_cdk import App, Stack
from aws_cdk import aws_sqs as sqs

from tests.infra.conftest import Synthesized
from tests.infra.linting import lint_file

ACKNOWLEDGED_RULES_METADATA = "aws:cdk:acknowledged-rules"
# Each one is explained where it is made; this list makes adding one a visible decision.
EXPECTED_ACKNOWLEDGEMENTS = {
    "AwsSolutions::AwsSolutions-APIG3",
    "AwsSolutions::AwsSolutions-COG4",
    "AwsSolutions::AwsSolutions-ECS2",
    "AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]",
    "AwsSolutions::AwsSolutions-IAM5[Resource::*]",
    # The frontend simulates the policies of the account's callers of a batch or chain spanning lambdas.
    "AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:role/*]",
    "AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:user/*]",
    "AwsSolutions::AwsSolutions-L1",
}
CFN_LINT_IGNORED = (
    # CDK declares a DependsOn on a Lambda function's role next to the GetAtt that already
    # implies it (in its own code and in its custom-resource providers): redundant, harmless.
    "W3005",
    # An environment file may name its availability zones (prod does, to use three);
    # CDK's own validation acknowledges the same check as expected.
    "W3010",
)


def _acknowledgements(app: App) -> dict[str, list[tuple[str, str]]]:
    found: dict[str, list[tuple[str, str]]] = {}
    for construct in app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == ACKNOWLEDGED_RULES_METADATA:
                for rule, reason in dict(entry.data).items():
                    found.setdefault(rule, []).append((construct.node.path, reason))
    return found


def test_nag_reports_no_finding(synth: Synthesized) -> None:
    # Errors would have stopped synthesis; the report also lists warnings.
    plugins = {plugin["pluginName"]: plugin for plugin in synth.validation_report["pluginReports"]}
    assert {name: (p["conclusion"], p["violations"]) for name, p in plugins.items()} == {
        name: ("success", []) for name in plugins
    }
    plugin = plugins["AwsSolutions"]
    suppressed = {f"AwsSolutions::{v['ruleName']}" for v in plugin["suppressedViolations"]}
    assert suppressed == EXPECTED_ACKNOWLEDGEMENTS


def test_every_acknowledgement_carries_a_reason(synth: Synthesized) -> None:
    acknowledgements = _acknowledgements(synth.app)
    # CDK acknowledges a few of its own CloudFormation checks, with reasons; ours are the AwsSolutions ones.
    assert {rule for rule in acknowledgements if rule.startswith("AwsSolutions::")} == EXPECTED_ACKNOWLEDGEMENTS
    for rule, places in acknowledgements.items():
        for path, reason in places:
            assert len(reason.split()) >= 8, f"{rule} at {path}: {reason!r}"


def _careless_app(outdir: Path, acknowledged: bool) -> App:
    app = App(outdir=str(outdir))
    queue = sqs.Queue(Stack(app, "Careless"), "Plain", encryption=sqs.QueueEncryption.UNENCRYPTED)
    if acknowledged:
        for rule in ("AwsSolutions-SQS2", "AwsSolutions-SQS3", "AwsSolutions-SQS4"):
            nag.acknowledge(queue, rule, "a throwaway queue in a test that shows what acknowledging does")
    nag.check(app)
    return app


def test_nag_is_really_watching(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        _careless_app(tmp_path / "plain", acknowledged=False).synth()
    rules = {v["ruleName"] for plugin in _report(tmp_path / "plain") for v in plugin["violations"]}
    assert {"AwsSolutions-SQS2", "AwsSolutions-SQS3", "AwsSolutions-SQS4"} <= rules
    _careless_app(tmp_path / "acknowledged", acknowledged=True).synth()
    (plugin,) = _report(tmp_path / "acknowledged")
    assert plugin["violations"] == []
    assert {v["ruleName"] for v in plugin["suppressedViolations"]} == {
        "AwsSolutions-SQS2",
        "AwsSolutions-SQS3",
        "AwsSolutions-SQS4",
    }


def test_acknowledging_needs_a_reason() -> None:
    app = App()
    with pytest.raises(ValueError, match="real reason"):
        nag.acknowledge(Stack(app, "S"), "AwsSolutions-SQS4", "because we can")


def _report(outdir: Path) -> list[dict[str, list[dict[str, str]]]]:
    return json.loads((outdir / "validation-report.json").read_text())["pluginReports"]  # type: ignore[no-any-return]


def test_cfn_lint_finds_nothing(synth: Synthesized) -> None:
    config = cfnlint.api.ManualArgs(
        regions=[synth.settings.region or "us-east-1"], ignore_checks=list(CFN_LINT_IGNORED)
    )
    for path in synth.template_paths:  # the account's, the environment's and each lambda's
        matches = lint_file(path, config)
        assert [str(m) for m in matches] == [], path.name


def test_cfn_lint_is_really_watching(tmp_path: Path) -> None:
    # The rules loaded once (tests/infra/linting.py) find what cfn-lint's own lint_file finds, template after
    # template and configuration after configuration: a wrong property (E3002), and a redundant DependsOn
    # (W3005) found, then ignored, then found again.
    template = {
        "Resources": {
            "Plain": {"Type": "AWS::SQS::Queue", "Properties": {"Bogus": 1}},
            "Rule": {"Type": "AWS::Config::ConfigRule", "DependsOn": "Plain",
                     "Properties": {"Source": {"Owner": "AWS", "SourceIdentifier": "X"},
                                    "InputParameters": {"a": {"Fn::GetAtt": ["Plain", "Arn"]}}}},
        }
    }  # fmt: skip
    careless, clean = tmp_path / "careless.json", tmp_path / "clean.json"
    careless.write_text(json.dumps(template))
    clean.write_text(json.dumps({"Resources": {"Plain": {"Type": "AWS::SQS::Queue"}}}))
    found = {
        ignored: [str(m) for m in cfnlint.api.lint_file(careless, config=_lint_config(ignored))]
        for ignored in ((), CFN_LINT_IGNORED)
    }
    assert any("E3002" in m for m in found[()]) and any("W3005" in m for m in found[()])
    assert not any("W3005" in m for m in found[CFN_LINT_IGNORED])
    for ignored in ((), CFN_LINT_IGNORED, ()):
        assert [str(m) for m in lint_file(careless, _lint_config(ignored))] == found[ignored]
        assert lint_file(clean, _lint_config(ignored)) == []


def _lint_config(ignored: tuple[str, ...]) -> cfnlint.api.ManualArgs:
    return cfnlint.api.ManualArgs(regions=["us-east-1"], ignore_checks=list(ignored))
