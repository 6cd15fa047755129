"""Each component's role in the synthesized template, its statements resolved to the local stack's
resources and translated where moto evaluates a policy differently from AWS (docs/deploy.md lists
every difference). The deployed policy is never changed: only this local copy of it is.

Components: "frontend" and "consumer" (each Lambda function, by its handler's module), and
"worker-<service>" (each ECS task definition, by the lambdas it serves; the local stack's worker
services serve one lambda each). "worker" holds every worker service's statements: the local stack's
worker hosts serve all its lambdas at once, as one host per service would.
"""

from __future__ import annotations

import copy
import re
from typing import Any

# moto's default account and the local stack's region
ACCOUNT = "123456789012"
REGION = "us-east-1"
PSEUDO = {"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com"}
WORKER = "worker"
# AWS authorizes a batch call under its single action; moto under the batch call's own name.
SQS_BATCH_ACTIONS = {
    "sqs:SendMessage": "sqs:SendMessageBatch",
    "sqs:DeleteMessage": "sqs:DeleteMessageBatch",
    "sqs:ChangeMessageVisibility": "sqs:ChangeMessageVisibilityBatch",
}
# AWS authorizes a TransactWriteItems entry by entry, under these actions; moto under TransactWriteItems alone.
DYNAMODB_TRANSACT_ACTIONS = {
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:ConditionCheckItem",
}
# moto names no queue for these (they take a QueueName, and moto reads the queue from QueueUrl): it
# matches them against resource "*".
SQS_UNNAMED_ACTIONS = {"sqs:GetQueueUrl"}

Statement = dict[str, Any]


def component_roles(template: dict[str, Any]) -> dict[str, str]:
    """Component -> the logical id of its role: each Lambda function's Role, each ECS task definition's
    TaskRoleArn."""
    found = {}
    for resource in template["Resources"].values():
        properties = resource.get("Properties", {})
        if resource["Type"] == "AWS::Lambda::Function":
            handler = re.fullmatch(r"functions\.(\w+)\.handler\.lambda_handler", str(properties.get("Handler")))
            if handler:
                found[handler.group(1)] = properties["Role"]["Fn::GetAtt"][0]
        elif resource["Type"] == "AWS::ECS::TaskDefinition":
            containers = properties["ContainerDefinitions"]
            environment = {e["Name"]: e["Value"] for c in containers for e in c.get("Environment", [])}
            found[f"{WORKER}-{environment['ATF_LAMBDA']}"] = properties["TaskRoleArn"]["Fn::GetAtt"][0]
    return found


def local_policies(template: dict[str, Any]) -> dict[str, list[Statement]]:
    """Component -> the statements its role holds, as moto must be given them to decide as AWS would."""
    resources = template["Resources"]
    tables = {_arn(resources, k) for k, r in resources.items() if r["Type"] == "AWS::DynamoDB::Table"}
    policies = {
        component: [s for raw in role_statements(resources, role) for s in translate(resolve(resources, raw), tables)]
        for component, role in component_roles(template).items()
    }
    workers = [s for name, statements in policies.items() if name.startswith(f"{WORKER}-") for s in statements]
    return {**policies, WORKER: workers}


def role_statements(resources: dict[str, Any], role: str) -> list[Statement]:
    """Every statement the template attaches to `role`: its policies, the managed policies it is given
    or that name it, and its inline ones."""
    ref = {"Ref": role}
    properties = resources[role]["Properties"]
    attached = {m["Ref"] for m in properties.get("ManagedPolicyArns", []) if isinstance(m, dict) and "Ref" in m}
    unknown = [m for m in properties.get("ManagedPolicyArns", []) if not (isinstance(m, dict) and "Ref" in m)]
    if unknown:
        raise ValueError(f"role {role} has managed policies the template does not hold: {unknown}")
    statements: list[Statement] = []
    for logical_id, resource in resources.items():
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            document = resource["Properties"]["PolicyDocument"]
            if ref in resource["Properties"].get("Roles", []) or logical_id in attached:
                statements += _listed(document["Statement"])
    for inline in properties.get("Policies", []):
        statements += _listed(inline["PolicyDocument"]["Statement"])
    return copy.deepcopy(statements)


def resolve(resources: dict[str, Any], node: Any) -> Any:
    """A template value with its references to the stack's resources replaced by the local stack's ARNs.
    A resource the local stack does not have (a log group, a key) gets an ARN that matches nothing."""
    if isinstance(node, list):
        return [resolve(resources, item) for item in node]
    if not isinstance(node, dict):
        return node
    if set(node) == {"Ref"}:
        return PSEUDO.get(node["Ref"]) or _arn(resources, node["Ref"])
    if set(node) == {"Fn::GetAtt"}:
        return _arn(resources, node["Fn::GetAtt"][0])
    if set(node) == {"Fn::Join"}:
        separator, parts = node["Fn::Join"]
        return separator.join(str(resolve(resources, part)) for part in parts)
    if set(node) == {"Fn::Sub"} and isinstance(node["Fn::Sub"], str):
        named = lambda m: PSEUDO.get(m.group(1)) or _arn(resources, m.group(1))  # noqa: E731
        return re.sub(r"\$\{([^}]+)\}", named, node["Fn::Sub"])
    return {key: resolve(resources, value) for key, value in node.items()}


def _arn(resources: dict[str, Any], logical_id: str) -> str:
    resource = resources.get(logical_id, {"Type": "", "Properties": {}})
    properties = resource.get("Properties", {})
    if resource["Type"] == "AWS::DynamoDB::Table":
        return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{properties['TableName']}"
    if resource["Type"] == "AWS::SQS::Queue":
        return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{properties['QueueName']}"
    return f"arn:aws:not-local:{REGION}:{ACCOUNT}:{logical_id}"


def translate(statement: Statement, tables: set[str]) -> list[Statement]:
    """The statement as moto must hold it to allow and refuse what AWS would (docs/deploy.md); `tables`:
    the ARNs of the stack's tables."""
    actions = _listed(statement.get("Action", []))
    if "Condition" in statement:
        if all(a.startswith("kms:") for a in actions):
            return []  # no KMS key locally (moto's tables and queues are not encrypted): nothing calls it
        raise ValueError(f"moto cannot evaluate this statement's condition like AWS: {statement}")
    if "NotAction" in statement or "NotResource" in statement or statement.get("Effect") != "Allow":
        raise ValueError(f"the local stack translates Allow statements with Action and Resource only: {statement}")
    resources = _listed(statement["Resource"])
    dynamodb = [a for a in actions if a.startswith("dynamodb:")]
    sqs_unnamed = [a for a in actions if a in SQS_UNNAMED_ACTIONS]
    rest = [a for a in actions if a not in dynamodb and a not in sqs_unnamed]
    rest += [SQS_BATCH_ACTIONS[a] for a in rest if a in SQS_BATCH_ACTIONS]
    out = [{"Effect": "Allow", "Action": rest, "Resource": resources}] if rest else []
    # moto authorizes every DynamoDB call against "*" (its tables have no resource in its check): a grant
    # on the local table becomes a grant on "*"; the local stack has that table only.
    if dynamodb and any(str(r).split("/index/")[0] in tables for r in resources):
        transact = ["dynamodb:TransactWriteItems"] if DYNAMODB_TRANSACT_ACTIONS & set(dynamodb) else []
        out.append({"Effect": "Allow", "Action": dynamodb + transact, "Resource": "*"})
    if sqs_unnamed and any(":sqs:" in r for r in resources):
        out.append({"Effect": "Allow", "Action": sqs_unnamed, "Resource": "*"})
    return out


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
