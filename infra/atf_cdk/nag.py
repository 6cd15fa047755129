"""cdk-nag: the AwsSolutions pack on every stack, and acknowledgements that must say why."""

from __future__ import annotations

from typing import Any

from aws_cdk import Acknowledgment, App, Stack, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct


def check(app: App) -> None:
    """cdk-nag 3 is a policy-validation plugin: findings fail `cdk synth` and are listed in
    cdk.out/policy-validation-report.json."""
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))


PLUGIN = "AwsSolutions"


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    """Accept one cdk-nag finding on a construct (and its children), with the reason written down.

    `rule` is the finding as cdk-nag names it, e.g. "AwsSolutions-IAM5[Resource::*]"; it is
    qualified with the plugin's name, as CDK's validation report expects."""
    if len(reason.split()) < 10:
        raise ValueError(f"the acknowledgement of {rule} needs a real reason, not {reason!r}")
    Validations.of(construct).acknowledge(Acknowledgment(id=f"{PLUGIN}::{rule}", reason=reason))


def rendered(stack: Stack, value: str) -> str:
    """A string as cdk-nag names it in a finding: each reference `<LogicalId>`, each attribute `<LogicalId.Name>`
    (so an acknowledgement can name a resource the synth has not resolved yet)."""
    return _text(stack.resolve(value))


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return f"<{value['Ref']}>"
    if "Fn::GetAtt" in value:
        return "<{}.{}>".format(*value["Fn::GetAtt"])
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_text(p) for p in parts)
    raise ValueError(f"cannot name {value} as cdk-nag does")
