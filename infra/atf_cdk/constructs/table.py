"""The task table, built from the very request the local stack sends to CreateTable."""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from atf_cdk.builders import grant_key, removal
from atf_cdk.grants import Component, service_actions
from atf_core.config import StackConfig
from atf_core.definitions import create_table_request, table_spec
from atf_sdk.transaction import REQUIRED_ACTIONS

_TYPES = {"S": dynamodb.AttributeType.STRING, "N": dynamodb.AttributeType.NUMBER, "B": dynamodb.AttributeType.BINARY}
_PROJECTIONS = {
    "ALL": dynamodb.ProjectionType.ALL,
    "KEYS_ONLY": dynamodb.ProjectionType.KEYS_ONLY,
    "INCLUDE": dynamodb.ProjectionType.INCLUDE,
}


def _attribute(definitions: dict[str, str], name: str) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=name, type=_TYPES[definitions[name]])


def _key(definitions: dict[str, str], key_schema: list[dict[str, str]], role: str) -> dynamodb.Attribute | None:
    names = [k["AttributeName"] for k in key_schema if k["KeyType"] == role]
    return _attribute(definitions, names[0]) if names else None


class TaskTable(Construct):
    """On demand, point-in-time recovery, the environment's key, TTL, and the sharded due index."""

    def __init__(self, scope: Construct, id: str, *, config: StackConfig, key: kms.IKey, retain: bool) -> None:
        super().__init__(scope, id)
        request: dict[str, Any] = create_table_request(config)
        types = {d["AttributeName"]: d["AttributeType"] for d in request["AttributeDefinitions"]}
        partition = _key(types, request["KeySchema"], "HASH")
        assert partition is not None, "the table needs a partition key"
        self.key = key
        self.index_names = [index["IndexName"] for index in request.get("GlobalSecondaryIndexes", [])]
        self.table = dynamodb.Table(
            self,
            "Table",
            table_name=request["TableName"],
            partition_key=partition,
            sort_key=_key(types, request["KeySchema"], "RANGE"),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
            encryption_key=key,
            time_to_live_attribute=table_spec(config).ttl_attribute,
            deletion_protection=retain,
            removal_policy=removal(retain),
        )
        for index in request.get("GlobalSecondaryIndexes", []):
            projection = index["Projection"]
            self.table.add_global_secondary_index(
                index_name=index["IndexName"],
                partition_key=_key(types, index["KeySchema"], "HASH"),  # type: ignore[arg-type]
                sort_key=_key(types, index["KeySchema"], "RANGE"),
                projection_type=_PROJECTIONS[projection["ProjectionType"]],
                non_key_attributes=projection.get("NonKeyAttributes"),
            )

    def grant(self, grantee: iam.IGrantable, component: Component) -> None:
        """The item actions the component's code calls (atf_cdk.grants), on the table and, for a component
        that queries, its indexes; and the key to read and write them."""
        actions = service_actions(component, "dynamodb")
        resources = [self.table.table_arn]
        if "dynamodb:Query" in actions:
            resources += [f"{self.table.table_arn}/index/{name}" for name in self.index_names]
        iam.Grant.add_to_principal(grantee=grantee, actions=actions, resource_arns=resources)
        grant_key(self.key, grantee, write=True, services=("dynamodb",))  # the queues grant theirs (queues.py)

    def grant_transactional_schedule(self, grantee: iam.IGrantable) -> None:
        """What a team's role needs to schedule tasks inside its own DynamoDB transactions (atf_sdk.transaction,
        docs/transactions.md): the entries' actions on the table, and the table's key through DynamoDB. No read,
        no index, nothing else: the role creates tasks and cannot read, change or delete one."""
        iam.Grant.add_to_principal(
            grantee=grantee, actions=list(REQUIRED_ACTIONS), resource_arns=[self.table.table_arn]
        )
        grant_key(self.key, grantee, write=True, services=("dynamodb",))
