"""Create the table and queues on the embedded AWS from the shared definitions."""

from __future__ import annotations

import json

from botocore.exceptions import ClientError

from atf_core.aws import AwsClients
from atf_core.config import StackConfig
from atf_core.definitions import create_table_request, queue_specs, table_spec


def provision(clients: AwsClients, config: StackConfig) -> None:
    _create_table(clients, config)
    for spec in queue_specs(config):
        dlq_url = clients.sqs.create_queue(
            QueueName=spec.dead_letter_name,
            Attributes={"MessageRetentionPeriod": str(spec.dead_letter_retention_s)},
        )["QueueUrl"]
        dlq_arn = clients.sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        clients.sqs.create_queue(
            QueueName=spec.name,
            Attributes={
                "VisibilityTimeout": str(spec.visibility_timeout_s),
                "MessageRetentionPeriod": str(spec.retention_s),
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": spec.max_receive_count}
                ),
            },
        )


def _create_table(clients: AwsClients, config: StackConfig) -> None:
    try:
        clients.dynamodb.create_table(**create_table_request(config))
    except ClientError as error:
        if error.response["Error"]["Code"] != "ResourceInUseException":
            raise
        return
    clients.dynamodb.get_waiter("table_exists").wait(TableName=config.table_name)
    clients.dynamodb.update_time_to_live(
        TableName=config.table_name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": table_spec(config).ttl_attribute},
    )
