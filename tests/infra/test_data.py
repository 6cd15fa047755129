"""The task table and the queues are built from atf_core.definitions, encrypted, and TLS-only."""

from __future__ import annotations

from aws_cdk.assertions import Match

from atf_core.definitions import create_table_request, queue_specs, table_spec
from tests.infra.conftest import Synthesized


def _ref(resources: dict[str, object]) -> str:
    (logical_id,) = resources
    return logical_id


def test_table_is_the_one_the_local_stack_creates(synth: Synthesized) -> None:
    config = synth.settings.config
    request = create_table_request(config)
    (table,) = synth.resources("AWS::DynamoDB::Table").values()
    props = table["Properties"]
    assert props["TableName"] == request["TableName"]
    assert props["KeySchema"] == request["KeySchema"]
    assert sorted(props["AttributeDefinitions"], key=str) == sorted(request["AttributeDefinitions"], key=str)
    assert props["GlobalSecondaryIndexes"] == [
        {
            "IndexName": index["IndexName"],
            "KeySchema": index["KeySchema"],
            "Projection": {
                "NonKeyAttributes": index["Projection"]["NonKeyAttributes"],
                "ProjectionType": index["Projection"]["ProjectionType"],
            },
        }
        for index in request["GlobalSecondaryIndexes"]
    ]
    assert props["TimeToLiveSpecification"] == {"AttributeName": table_spec(config).ttl_attribute, "Enabled": True}


def test_table_is_on_demand_recoverable_and_encrypted_with_the_data_key(synth: Synthesized) -> None:
    data_key = _ref({k: v for k, v in synth.resources("AWS::KMS::Key").items() if k.startswith("DataKey")})
    synth.template.has_resource(
        "AWS::DynamoDB::Table",
        {
            "Properties": Match.object_like(
                {
                    "BillingMode": "PAY_PER_REQUEST",
                    "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                    "SSESpecification": {
                        "SSEEnabled": True,
                        "SSEType": "KMS",
                        "KMSMasterKeyId": {"Fn::GetAtt": [data_key, "Arn"]},
                    },
                    "DeletionProtectionEnabled": synth.settings.retain_data,
                }
            ),
            "DeletionPolicy": "Retain" if synth.settings.retain_data else "Delete",
        },
    )


def test_keys_rotate(synth: Synthesized) -> None:
    keys = synth.resources("AWS::KMS::Key")
    assert len(keys) == 2
    assert all(key["Properties"]["EnableKeyRotation"] for key in keys.values())


def test_one_queue_and_one_dead_letter_queue_per_lambda_and_priority(synth: Synthesized) -> None:
    config = synth.settings.config
    expected = sum(len(spec.priorities) for spec in config.lambdas.values())
    specs = queue_specs(config)
    assert len(specs) == expected
    queues = {q["Properties"]["QueueName"]: q["Properties"] for q in synth.resources("AWS::SQS::Queue").values()}
    assert len(queues) == 2 * expected
    for spec in specs:
        queue = queues[spec.name]
        assert spec.dead_letter_name in queues
        assert queue["VisibilityTimeout"] == spec.visibility_timeout_s
        assert queue["MessageRetentionPeriod"] == spec.retention_s
        assert queue["RedrivePolicy"]["maxReceiveCount"] == spec.max_receive_count
        dead_letter_id = queue["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
        dead_letter = synth.json["Resources"][dead_letter_id]["Properties"]
        assert dead_letter["QueueName"] == spec.dead_letter_name
        assert dead_letter["MessageRetentionPeriod"] == spec.dead_letter_retention_s


def test_every_queue_is_encrypted_with_the_data_key(synth: Synthesized) -> None:
    data_key = _ref({k: v for k, v in synth.resources("AWS::KMS::Key").items() if k.startswith("DataKey")})
    for queue in synth.resources("AWS::SQS::Queue").values():
        assert queue["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [data_key, "Arn"]}


def test_every_queue_refuses_requests_without_tls(synth: Synthesized) -> None:
    queues = set(synth.resources("AWS::SQS::Queue"))
    guarded: set[str] = set()
    for policy in synth.resources("AWS::SQS::QueuePolicy").values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        denies_plain_http = any(
            s["Effect"] == "Deny"
            and s["Action"] == "sqs:*"
            and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
            and s["Principal"] == {"AWS": "*"}
            for s in statements
        )
        if denies_plain_http:
            guarded.update(q["Ref"] for q in policy["Properties"]["Queues"])
    assert guarded == queues
