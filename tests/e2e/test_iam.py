"""The local stack enforces IAM: each component's role holds what the synthesized template gives it, a
call outside it is refused, and the refusal names the component's role, the action and the resource."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from atf_core.aws import make_clients
from atf_core.definitions import queue_specs, table_spec
from atf_local.iam.accounts import credentials, session_of
from atf_local.iam.roles import WORKER
from tests.e2e.conftest import RunningStack

COMPONENTS = ["frontend", "consumer", WORKER]


@pytest.mark.parametrize("component", COMPONENTS)
def test_a_call_outside_the_role_is_refused_naming_role_action_and_resource(
    stack: RunningStack, component: str
) -> None:
    clients = make_clients(stack.endpoint, session=session_of(credentials(stack.endpoint, component)))
    table = f"arn:aws:dynamodb:us-east-1:123456789012:table/{stack.config.table_name}"
    with pytest.raises(ClientError) as refused:
        clients.dynamodb.delete_table(TableName=stack.config.table_name)  # no component is ever granted it
    assert refused.value.response["Error"]["Code"] == "AccessDeniedException"
    message = refused.value.response["Error"]["Message"]
    assert f"assumed-role/atf-local-{component}/" in message
    assert "dynamodb:DeleteTable" in message and f"on resource: {table}" in message
    assert stack.clients.dynamodb.describe_table(TableName=stack.config.table_name)["Table"]  # still there


def test_a_queue_is_named_in_the_refusal(stack: RunningStack) -> None:
    clients = make_clients(stack.endpoint, session=session_of(credentials(stack.endpoint, WORKER)))
    spec = queue_specs(stack.config)[0]
    url = stack.clients.sqs.get_queue_url(QueueName=spec.name)["QueueUrl"]
    with pytest.raises(ClientError) as refused:
        clients.sqs.send_message(QueueUrl=url, MessageBody="{}")  # workers receive; they never send
    message = refused.value.response["Error"]["Message"]
    assert "atf-local-worker/" in message and "sqs:SendMessage" in message
    assert f"on resource: arn:aws:sqs:us-east-1:123456789012:{spec.name}" in message


def test_what_the_role_grants_is_allowed(stack: RunningStack) -> None:
    """The worker reads tasks and takes messages from its queues (moto checks batch calls by their own
    names: the translated role allows a batch delete wherever the template allows DeleteMessage)."""
    clients = make_clients(stack.endpoint, session=session_of(credentials(stack.endpoint, WORKER)))
    key = {table_spec(stack.config).partition_key: {"S": "no-such-task"}}
    assert "Item" not in clients.dynamodb.get_item(TableName=stack.config.table_name, Key=key)
    spec = queue_specs(stack.config)[0]
    url = clients.sqs.get_queue_url(QueueName=spec.name)["QueueUrl"]
    clients.sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
    reply = clients.sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": "0", "ReceiptHandle": "nothing"}])
    assert "Failed" in reply or "Successful" in reply


def test_without_credentials_nothing_is_allowed(stack: RunningStack) -> None:
    import boto3

    stranger = boto3.Session(aws_access_key_id="AKIASTRANGER", aws_secret_access_key="x", region_name="us-east-1")
    with pytest.raises(ClientError) as refused:
        make_clients(stack.endpoint, session=stranger).dynamodb.describe_table(TableName=stack.config.table_name)
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] in (400, 403)


def test_sqs_is_served_by_its_own_server_that_knows_the_same_roles_and_sessions(stack: RunningStack) -> None:
    """A component's environment names the stack's SQS server (atf_local.servers); its session, given by STS
    on the first server, is known there with the same grants, and a call outside them is refused by name."""
    import boto3

    env = stack.env(WORKER)
    sqs_endpoint = env["AWS_ENDPOINT_URL_SQS"]
    assert sqs_endpoint != stack.endpoint
    direct = session_of(env).client("sqs", endpoint_url=sqs_endpoint)
    url = direct.get_queue_url(QueueName=queue_specs(stack.config)[0].name)["QueueUrl"]
    direct.receive_message(QueueUrl=url, WaitTimeSeconds=0)  # granted
    with pytest.raises(ClientError) as refused:
        direct.send_message(QueueUrl=url, MessageBody="{}")
    message = refused.value.response["Error"]["Message"]
    assert "assumed-role/atf-local-worker/" in message and "sqs:SendMessage" in message
    stranger = boto3.Session(aws_access_key_id="AKIASTRANGER", aws_secret_access_key="x", region_name="us-east-1")
    with pytest.raises(ClientError) as unknown:
        stranger.client("sqs", endpoint_url=sqs_endpoint).get_queue_url(QueueName=queue_specs(stack.config)[0].name)
    assert unknown.value.response["ResponseMetadata"]["HTTPStatusCode"] in (400, 403)
