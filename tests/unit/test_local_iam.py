"""The local stack's roles are the template's: each component's statements, found through its function's
Role or its task definition's TaskRoleArn, resolved to local ARNs and translated for moto's evaluation."""

from __future__ import annotations

from typing import Any

import pytest

from atf_local.iam.roles import ACCOUNT, REGION, component_roles, local_policies, translate

TABLE = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/t-tasks"
QUEUE = f"arn:aws:sqs:{REGION}:{ACCOUNT}:t-work-normal"


def _template() -> dict[str, Any]:
    table = {"Fn::GetAtt": ["Table", "Arn"]}
    queue = {"Fn::GetAtt": ["Nested.Queue", "Arn"]}
    return {
        "Resources": {
            "Table": {"Type": "AWS::DynamoDB::Table", "Properties": {"TableName": "t-tasks"}},
            "Nested.Queue": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "t-work-normal"}},
            "FrontendRole": {"Type": "AWS::IAM::Role", "Properties": {}},
            "ConsumerRole": {"Type": "AWS::IAM::Role", "Properties": {}},
            "Nested.TaskRole": {"Type": "AWS::IAM::Role", "Properties": {}},
            "Frontend": _function("frontend", "FrontendRole"),
            "Consumer": _function("consumer", "ConsumerRole"),
            "Nested.Task": {
                "Type": "AWS::ECS::TaskDefinition",
                "Properties": {
                    "TaskRoleArn": {"Fn::GetAtt": ["Nested.TaskRole", "Arn"]},
                    "ContainerDefinitions": [{"Environment": [{"Name": "ATF_LAMBDA", "Value": "work"}]}],
                },
            },
            "FrontendPolicy": _policy("AWS::IAM::Policy", "FrontendRole", ["dynamodb:GetItem"], [table]),
            "ConsumerQueues": _policy("AWS::IAM::ManagedPolicy", "ConsumerRole", ["sqs:SendMessage"], [queue]),
            "TaskPolicy": _policy("AWS::IAM::Policy", "Nested.TaskRole", ["sqs:DeleteMessage"], [queue]),
        }
    }


def _function(module: str, role: str) -> dict[str, Any]:
    handler = f"functions.{module}.handler.lambda_handler"
    return {"Type": "AWS::Lambda::Function", "Properties": {"Handler": handler, "Role": {"Fn::GetAtt": [role, "Arn"]}}}


def _policy(kind: str, role: str, actions: list[str], resources: list[Any]) -> dict[str, Any]:
    document = {"Statement": [{"Effect": "Allow", "Action": actions, "Resource": resources}]}
    return {"Type": kind, "Properties": {"Roles": [{"Ref": role}], "PolicyDocument": document}}


def test_each_component_is_found_through_its_function_or_task_definition() -> None:
    assert component_roles(_template()) == {
        "frontend": "FrontendRole",
        "consumer": "ConsumerRole",
        "worker-work": "Nested.TaskRole",
    }


def test_each_role_holds_the_statements_attached_to_it_and_no_other() -> None:
    policies = local_policies(_template())
    assert policies["frontend"] == [{"Effect": "Allow", "Action": ["dynamodb:GetItem"], "Resource": "*"}]
    assert policies["consumer"] == [
        {"Effect": "Allow", "Action": ["sqs:SendMessage", "sqs:SendMessageBatch"], "Resource": [QUEUE]}
    ]
    assert policies["worker"] == policies["worker-work"]
    assert policies["worker"][0]["Action"] == ["sqs:DeleteMessage", "sqs:DeleteMessageBatch"]


def test_moto_is_given_dynamodb_grants_on_star_and_get_queue_url_on_star() -> None:
    statement = {"Effect": "Allow", "Action": ["dynamodb:PutItem", "sqs:GetQueueUrl"], "Resource": [TABLE, QUEUE]}
    assert translate(statement, {TABLE}) == [
        {"Effect": "Allow", "Action": ["dynamodb:PutItem", "dynamodb:TransactWriteItems"], "Resource": "*"},
        {"Effect": "Allow", "Action": ["sqs:GetQueueUrl"], "Resource": "*"},
    ]


def test_a_write_grant_allows_the_transaction_moto_checks_in_place_of_its_entries() -> None:
    """AWS authorizes a TransactWriteItems entry by entry (a Put as dynamodb:PutItem); moto checks the call's own
    name: a grant of an item write allows it locally, a read-only grant does not."""
    reads = {"Effect": "Allow", "Action": ["dynamodb:GetItem", "dynamodb:Query"], "Resource": [TABLE]}
    assert translate(reads, {TABLE}) == [{"Effect": "Allow", "Action": reads["Action"], "Resource": "*"}]
    check = {"Effect": "Allow", "Action": ["dynamodb:ConditionCheckItem"], "Resource": [TABLE]}
    assert translate(check, {TABLE})[0]["Action"] == ["dynamodb:ConditionCheckItem", "dynamodb:TransactWriteItems"]


def test_a_grant_on_another_table_is_no_grant_on_the_local_one() -> None:
    other = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/someone-else"
    assert translate({"Effect": "Allow", "Action": ["dynamodb:PutItem"], "Resource": [other]}, {TABLE}) == []
    index = {"Effect": "Allow", "Action": ["dynamodb:Query"], "Resource": [f"{TABLE}/index/due"]}
    assert translate(index, {TABLE}) == [{"Effect": "Allow", "Action": ["dynamodb:Query"], "Resource": "*"}]


def test_kms_grants_under_a_condition_are_left_out_and_other_conditions_refused() -> None:
    condition = {"StringEquals": {"kms:ViaService": "dynamodb.us-east-1.amazonaws.com"}}
    kms = {"Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": "arn:aws:kms:k", "Condition": condition}
    assert translate(kms, {TABLE}) == []
    with pytest.raises(ValueError, match="condition"):
        translate({**kms, "Action": ["dynamodb:GetItem"]}, {TABLE})


def test_a_deny_is_refused_rather_than_mistranslated() -> None:
    with pytest.raises(ValueError, match="Allow statements"):
        translate({"Effect": "Deny", "Action": ["sqs:SendMessage"], "Resource": QUEUE}, {TABLE})
