"""Who may do what: each worker host reaches only its own lambda's queues; nobody scans or deletes."""

from __future__ import annotations

import json
from typing import Any

from atf_cdk.constructs.queues import CONSUMER_QUEUE_ACTIONS, WORKER_QUEUE_ACTIONS
from atf_cdk.constructs.table import TABLE_ACTIONS

from tests.infra.conftest import Synthesized


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _statements(synth: Synthesized, role_id: str) -> list[dict[str, Any]]:
    """The role's inline policies' statements and those of the managed policies attached to it."""
    statements = []
    policies = {**synth.resources("AWS::IAM::Policy"), **synth.resources("AWS::IAM::ManagedPolicy")}
    for policy in policies.values():
        if {"Ref": role_id} in policy["Properties"].get("Roles", []):
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def _granted(statements: list[dict[str, Any]], prefix: str) -> tuple[set[str], list[Any]]:
    actions: set[str] = set()
    resources: list[Any] = []
    for statement in statements:
        chosen = [a for a in _as_list(statement["Action"]) if a.startswith(prefix)]
        if chosen:
            assert statement["Effect"] == "Allow"
            actions.update(chosen)
            resources += [r for r in _as_list(statement["Resource"]) if r not in resources]
    return actions, resources


def _queue_arns(synth: Synthesized, predicate: Any) -> list[dict[str, Any]]:
    return [
        {"Fn::GetAtt": [logical_id, "Arn"]}
        for logical_id, queue in synth.resources("AWS::SQS::Queue").items()
        if predicate(queue["Properties"]["QueueName"])
    ]


def _role_of_worker(synth: Synthesized, lambda_name: str) -> str:
    family = f"{synth.settings.config.name}-{lambda_name}"
    (task,) = [t for t in synth.resources("AWS::ECS::TaskDefinition").values() if t["Properties"]["Family"] == family]
    return str(task["Properties"]["TaskRoleArn"]["Fn::GetAtt"][0])


def _role_of_function(synth: Synthesized, name: str) -> str:
    (function,) = [
        f
        for f in synth.resources("AWS::Lambda::Function").values()
        if f["Properties"].get("FunctionName") == f"{synth.settings.config.name}-{name}"
    ]
    return str(function["Properties"]["Role"]["Fn::GetAtt"][0])


def _table_id(synth: Synthesized) -> str:
    (table_id,) = synth.resources("AWS::DynamoDB::Table")
    return table_id


def test_each_worker_reaches_only_its_own_queues(synth: Synthesized) -> None:
    config = synth.settings.config
    for name, spec in config.lambdas.items():
        own = {f"{config.name}-{name}-{priority}" for priority in spec.priorities}
        actions, resources = _granted(_statements(synth, _role_of_worker(synth, name)), "sqs:")
        assert actions == set(WORKER_QUEUE_ACTIONS)
        assert sorted(resources, key=str) == sorted(_queue_arns(synth, own.__contains__), key=str)


def test_each_worker_reads_and_updates_items_of_the_table_only(synth: Synthesized) -> None:
    table = {"Fn::GetAtt": [_table_id(synth), "Arn"]}
    for name in synth.settings.config.lambdas:
        actions, resources = _granted(_statements(synth, _role_of_worker(synth, name)), "dynamodb:")
        assert actions == set(TABLE_ACTIONS["worker"])
        assert resources == [table]


def test_consumer_sends_to_every_queue_but_no_dead_letter_queue(synth: Synthesized) -> None:
    actions, resources = _granted(_statements(synth, _role_of_function(synth, "consumer")), "sqs:")
    assert actions == set(CONSUMER_QUEUE_ACTIONS)
    assert sorted(resources, key=str) == sorted(_queue_arns(synth, lambda n: not n.endswith("-dlq")), key=str)


def test_functions_have_their_item_actions_and_no_scan_or_delete(synth: Synthesized) -> None:
    for name in ("consumer", "frontend"):
        actions, _ = _granted(_statements(synth, _role_of_function(synth, name)), "dynamodb:")
        assert actions == set(TABLE_ACTIONS[name])
        assert not {"dynamodb:Scan", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"} & actions


def test_the_data_key_is_used_only_through_dynamodb_and_sqs(synth: Synthesized) -> None:
    (data_key,) = [k for k in synth.resources("AWS::KMS::Key") if k.startswith("DataKey")]
    roles = [_role_of_function(synth, "consumer"), _role_of_function(synth, "frontend")]
    roles += [_role_of_worker(synth, name) for name in synth.settings.config.lambdas]
    for role in roles:
        key_statements = [
            s for s in _statements(synth, role) if any(a.startswith("kms:") for a in _as_list(s["Action"]))
        ]
        assert key_statements, role
        for statement in key_statements:
            assert statement["Resource"] == {"Fn::GetAtt": [data_key, "Arn"]}
            services = [json.dumps(v) for v in statement["Condition"]["StringEquals"]["kms:ViaService"]]
            assert len(services) == 2
            region = synth.settings.region or '", {"Ref": "AWS::Region"}, "'
            assert services == [
                f'"{service}.{region}.amazonaws.com"' for service in ("dynamodb", "sqs")
            ] or services == [
                f'{{"Fn::Join": ["", ["{service}.{region}.amazonaws.com"]]}}' for service in ("dynamodb", "sqs")
            ]
