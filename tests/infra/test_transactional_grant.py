"""A team's role, given `grant_transactional_schedule` by the construct, holds what scheduling inside its own
DynamoDB transaction needs (atf_sdk.transaction.REQUIRED_ACTIONS on the task table, the table's key through
DynamoDB) and nothing more: no read, no index, no other table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from atf_cdk.app import environment_stack
from atf_cdk.settings import load_environment
from aws_cdk import App
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from atf_local.iam.template import cdk_context
from atf_sdk.transaction import REQUIRED_ACTIONS
from tests.infra.conftest import ENVIRONMENTS


@pytest.fixture(scope="module")
def granted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Template, dict[str, Any]]:
    env = ENVIRONMENTS[0]
    app = App(context=cdk_context(env), outdir=str(Path(tmp_path_factory.mktemp("cdk-transactions"))))
    stack = environment_stack(app, load_environment(env))
    role = iam.Role(stack, "TeamService", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    stack.atf.grant_transactional_schedule(role)
    template = Template.from_stack(stack)
    (policy,) = template.find_resources(
        "AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": stack.get_logical_id(role.node.default_child)}]}}
    ).values()
    return template, policy


def test_the_role_may_put_task_items_on_the_table_only(granted: tuple[Template, dict[str, Any]]) -> None:
    template, policy = granted
    (table,) = template.find_resources("AWS::DynamoDB::Table")
    assert _dynamodb(policy) == [
        {"Action": REQUIRED_ACTIONS[0], "Effect": "Allow", "Resource": {"Fn::GetAtt": [table, "Arn"]}}
    ]


def test_the_role_may_use_the_data_key_through_dynamodb_only(granted: tuple[Template, dict[str, Any]]) -> None:
    template, policy = granted
    (data_key,) = [k for k in template.find_resources("AWS::KMS::Key") if k.startswith("DataKey")]
    (key,) = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s not in _dynamodb(policy)]
    assert key["Resource"] == {"Fn::GetAtt": [data_key, "Arn"]}
    assert set(_listed(key["Action"])) == {"kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey"}
    (through,) = key["Condition"]["StringEquals"]["kms:ViaService"]
    assert json.dumps(through).startswith(('"dynamodb.', '{"Fn::Join": ["", ["dynamodb.')), through


def _dynamodb(policy: dict[str, Any]) -> list[dict[str, Any]]:
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    return [s for s in statements if any(str(a).startswith("dynamodb:") for a in _listed(s["Action"]))]


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
