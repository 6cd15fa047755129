"""Who may do what: each role holds exactly the actions its component's code calls (atf_cdk.grants derives
them from the parts each composition root names), on the resources it uses: each worker host reaches only
its own lambda's queues, the consumer every task queue, and the table's indexes only a component that queries."""

from __future__ import annotations

import json
from typing import Any

from atf_cdk.grants import Component, parts

from atf_core.calls import actions_of
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


def _called(component: Component, service: str) -> set[str]:
    """What the component's code calls on a service: its parts' declared calls (atf_core.calls)."""
    return {a for a in actions_of(*parts(component)) if a.startswith(f"{service}:")}


def _table_resources(synth: Synthesized, queries: bool) -> list[Any]:
    table = {"Fn::GetAtt": [_table_id(synth), "Arn"]}
    if not queries:
        return [table]
    (spec,) = synth.resources("AWS::DynamoDB::Table").values()
    indexes = [i["IndexName"] for i in spec["Properties"].get("GlobalSecondaryIndexes", [])]
    assert indexes
    return [table] + [{"Fn::Join": ["", [table, f"/index/{name}"]]} for name in indexes]


def test_each_worker_reaches_only_its_own_queues(synth: Synthesized) -> None:
    config = synth.settings.config
    for name, spec in config.lambdas.items():
        own = {f"{config.name}-{name}-{priority}" for priority in spec.priorities}
        actions, resources = _granted(_statements(synth, _role_of_worker(synth, name)), "sqs:")
        assert actions == _called("worker", "sqs")
        assert sorted(resources, key=str) == sorted(_queue_arns(synth, own.__contains__), key=str)


def test_each_worker_has_the_item_actions_its_code_calls_on_the_table_only(synth: Synthesized) -> None:
    for name in synth.settings.config.lambdas:
        actions, resources = _granted(_statements(synth, _role_of_worker(synth, name)), "dynamodb:")
        assert actions == _called("worker", "dynamodb")
        assert resources == _table_resources(synth, "dynamodb:Query" in actions)


def test_consumer_sends_to_every_queue_but_no_dead_letter_queue(synth: Synthesized) -> None:
    actions, resources = _granted(_statements(synth, _role_of_function(synth, "consumer")), "sqs:")
    assert actions == _called("consumer", "sqs")
    assert sorted(resources, key=str) == sorted(_queue_arns(synth, lambda n: not n.endswith("-dlq")), key=str)


def test_functions_have_the_item_actions_their_code_calls(synth: Synthesized) -> None:
    functions: tuple[Component, ...] = ("consumer", "frontend")
    for name in functions:
        statements = _statements(synth, _role_of_function(synth, name))
        actions, resources = _granted(statements, "dynamodb:")
        assert actions == _called(name, "dynamodb"), name
        assert sorted(resources, key=str) == sorted(_table_resources(synth, "dynamodb:Query" in actions), key=str)
        assert not _granted(statements, "sqs:")[0] - _called(name, "sqs"), name


def test_the_calls_issue_13_found_ungranted_are_granted(synth: Synthesized) -> None:
    """The template once lacked these, each called by the component (schedules firing, chains, stats, the
    deletion of a schedule); with every role derived from the code, none can go missing again."""
    found = {
        ("consumer", "dynamodb:PutItem"),
        ("worker", "dynamodb:PutItem"),
        ("frontend", "dynamodb:BatchGetItem"),
        ("frontend", "dynamodb:DeleteItem"),
    }
    some_worker = next(iter(synth.settings.config.lambdas))
    roles = {
        "consumer": _role_of_function(synth, "consumer"),
        "frontend": _role_of_function(synth, "frontend"),
        "worker": _role_of_worker(synth, some_worker),
    }
    missing = {(c, a) for c, a in found if a not in _granted(_statements(synth, roles[c]), "dynamodb:")[0]}
    assert missing == set()


def test_nobody_scans_and_only_the_frontend_deletes_an_item(synth: Synthesized) -> None:
    roles = [_role_of_function(synth, "consumer"), _role_of_function(synth, "frontend")]
    roles += [_role_of_worker(synth, name) for name in synth.settings.config.lambdas]
    for role in roles:
        actions, _ = _granted(_statements(synth, role), "dynamodb:")
        assert not {"dynamodb:Scan", "dynamodb:BatchWriteItem"} & actions, role
        assert ("dynamodb:DeleteItem" in actions) == (role == roles[1]), role


def test_the_data_key_is_used_only_through_the_services_each_role_calls(synth: Synthesized) -> None:
    """Through DynamoDB for every role, and through SQS for those that send or receive: not the frontend's."""
    (data_key,) = [k for k in synth.resources("AWS::KMS::Key") if k.startswith("DataKey")]
    roles = {"consumer": _role_of_function(synth, "consumer"), "frontend": _role_of_function(synth, "frontend")}
    roles |= {f"worker {name}": _role_of_worker(synth, name) for name in synth.settings.config.lambdas}
    region = synth.settings.region or '", {"Ref": "AWS::Region"}, "'
    forms = {
        service: {f'"{service}.{region}.amazonaws.com"', f'{{"Fn::Join": ["", ["{service}.{region}.amazonaws.com"]]}}'}
        for service in ("dynamodb", "sqs")
    }
    for name, role in roles.items():
        key_statements = [
            s for s in _statements(synth, role) if any(a.startswith("kms:") for a in _as_list(s["Action"]))
        ]
        through = set()
        for statement in key_statements:
            assert statement["Resource"] == {"Fn::GetAtt": [data_key, "Arn"]}
            for value in _as_list(statement["Condition"]["StringEquals"]["kms:ViaService"]):
                (service,) = [service for service, texts in forms.items() if json.dumps(value) in texts]
                through.add(service)
        assert through == ({"dynamodb"} if name == "frontend" else {"dynamodb", "sqs"}), name


def test_only_the_frontend_asks_iam_and_only_about_the_accounts_users_and_roles(synth: Synthesized) -> None:
    """The frontend checks each lambda of a batch or chain spanning lambdas (atf_core.item_access): it may
    simulate the policies of the account's users and roles and read a role, nothing else of IAM."""
    frontend = _statements(synth, _role_of_function(synth, "frontend"))
    actions, resources = _granted(frontend, "iam:")
    assert actions == _called("frontend", "iam") == {"iam:SimulatePrincipalPolicy", "iam:GetRole"}
    account = {"Ref": "AWS::AccountId"}
    arn = ["arn:", {"Ref": "AWS::Partition"}, ":iam::", account]
    expected = [{"Fn::Join": ["", [*arn, f":{kind}/*"]]} for kind in ("user", "role")]
    assert sorted(resources, key=json.dumps) == sorted(expected, key=json.dumps), resources
    _, read_role_on = _granted([s for s in frontend if "iam:GetRole" in _as_list(s["Action"])], "iam:GetRole")
    assert read_role_on == expected[1:], "a role is read by name: GetRole has no user to apply to"
    others = [_role_of_function(synth, "consumer")] + [_role_of_worker(synth, n) for n in synth.settings.config.lambdas]
    assert not any(_granted(_statements(synth, role), "iam:")[0] for role in others)
