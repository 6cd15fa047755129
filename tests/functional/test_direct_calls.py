"""The embedded AWS answers DynamoDB's and SQS's calls straight from moto's response classes exactly as moto's
own server app answers them.

The same calls, made by boto3 clients, go once to moto's server app (its dispatcher and Flask apps) and once
to atf_local.direct_calls in front of it, each time on moto's backends reset and its random identifiers seeded
alike; status, headers and body must be the same call by call, failures included, and only the calls the
direct path does not take may reach the app behind it.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ClientError
from werkzeug.test import EnvironBuilder

from atf_local.direct_calls import direct_calls
from atf_local.environment import DUMMY_CREDENTIALS
from atf_local.servers import moto_dispatcher

App = Callable[[dict[str, Any], Any], Iterable[bytes]]
Answer = tuple[str, list[tuple[str, str]], bytes]
ENDPOINT = "http://127.0.0.1:4566"
TABLE, QUEUE = "direct-calls", "direct-calls"
SESSION = {
    "aws_access_key_id": DUMMY_CREDENTIALS["AWS_ACCESS_KEY_ID"],
    "aws_secret_access_key": DUMMY_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    "region_name": "us-east-1",
}
# What differs between two runs of the same calls whatever serves them: the moment a table was made
MOMENT = re.compile(rb'"CreationDateTime": [0-9.]+')


class Recorder:
    """A WSGI app's answers to the requests boto3 clients hand it in place of sending them."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.answers: list[Answer | str] = []

    def send(self, request: Any, **_: Any) -> AWSResponse:
        body = request.body if isinstance(request.body, bytes) else (request.body or "").encode()
        headers = {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        path = urlsplit(request.url).path
        environ = EnvironBuilder(path=path, base_url=ENDPOINT, method=request.method, headers=headers, data=body)
        environ = environ.get_environ()
        started: list[Any] = []
        try:
            content = b"".join(self.app(environ, lambda status, headers, *_: started.extend([status, headers])))
        except Exception as error:  # what each app raises is compared
            self.answers.append(type(error).__name__)
            raise
        status, headers = started
        compared = headers
        if MOMENT.search(content):  # the body's length and checksum cover that moment too
            compared = [(k, f"<{k}>" if k in ("x-amz-crc32", "Content-Length") else v) for k, v in headers]
        self.answers.append((status, sorted(compared), MOMENT.sub(b"<moment>", content)))
        # boto3 reads the answer as sent: botocore (1.34's legacy retry mode) checks DynamoDB's x-amz-crc32
        return AWSResponse(request.url, int(status.split()[0]), dict(headers), _Raw(content))


class _Raw(io.BytesIO):
    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.read()


def run_calls(app: App) -> list[Answer | str]:
    from moto.backends import get_backend
    from moto.moto_api._internal import mock_random

    for service in ("dynamodb", "sqs"):
        get_backend(service).reset()  # type: ignore[no-untyped-call]
    mock_random.seed(7)
    recorder = Recorder(app)
    session = boto3.Session(**SESSION)
    no_retries = Config(retries={"total_max_attempts": 1})
    for service, calls in (("dynamodb", dynamodb_calls), ("sqs", sqs_calls)):
        client = session.client(service, endpoint_url=ENDPOINT, config=no_retries)  # type: ignore[call-overload]
        client.meta.events.register("before-send", recorder.send)
        for call in calls(client):
            with contextlib.suppress(ClientError):  # a refusal's answer was recorded
                call()
    return recorder.answers


def dynamodb_calls(db: Any) -> list[Callable[[], object]]:
    key, item = {"id": {"S": "a"}}, {"id": {"S": "a"}, "n": {"N": "1"}, "tags": {"SS": ["x", "y"]}}
    check = {
        "TableName": TABLE,
        "Key": key,
        "ConditionExpression": "n = :no",
        "ExpressionAttributeValues": {":no": {"N": "0"}},
    }
    return [
        lambda: db.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        ),
        lambda: db.put_item(TableName=TABLE, Item=item),
        lambda: db.put_item(  # refused: the item exists, and the refusal carries it
            TableName=TABLE,
            Item=item,
            ConditionExpression="attribute_not_exists(id)",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        ),
        lambda: db.get_item(TableName=TABLE, Key=key, ConsistentRead=True),
        lambda: db.update_item(
            TableName=TABLE,
            Key=key,
            UpdateExpression="SET n = n + :one",
            ConditionExpression="n = :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
            ReturnValues="ALL_NEW",
        ),
        lambda: db.update_item(  # refused: n is not 9
            TableName=TABLE,
            Key=key,
            UpdateExpression="SET n = :v",
            ConditionExpression="n = :v",
            ExpressionAttributeValues={":v": {"N": "9"}},
        ),
        lambda: db.query(
            TableName=TABLE, KeyConditionExpression="id = :a", ExpressionAttributeValues={":a": item["id"]}
        ),
        lambda: db.batch_get_item(RequestItems={TABLE: {"Keys": [key, {"id": {"S": "missing"}}]}}),
        lambda: db.transact_write_items(TransactItems=[{"ConditionCheck": check}]),  # cancelled: n is not 0
        lambda: db.scan(TableName=TABLE, Select="COUNT"),
        lambda: db.put_item(TableName=TABLE, Item={"id": {"N": "1"}}),  # the key's type is wrong
        lambda: db.get_item(TableName="no-such-table", Key=key),
        lambda: db.delete_item(TableName=TABLE, Key=key, ReturnValues="ALL_OLD"),
        lambda: db.describe_table(TableName=TABLE),
    ]


def sqs_calls(sqs: Any) -> list[Callable[[], object]]:
    url = f"{ENDPOINT}/123456789012/{QUEUE}"
    return [
        lambda: sqs.create_queue(QueueName=QUEUE, Attributes={"VisibilityTimeout": "30"}),
        lambda: sqs.get_queue_url(QueueName=QUEUE),
        lambda: sqs.send_message(QueueUrl=url, MessageBody='{"task": 1}'),
        lambda: sqs.send_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(3)]
        ),
        lambda: sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0),
        lambda: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"]),
        lambda: sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-handle"),
        lambda: sqs.change_message_visibility_batch(
            QueueUrl=url, Entries=[{"Id": "a", "ReceiptHandle": "not-a-handle", "VisibilityTimeout": 0}]
        ),
        lambda: sqs.get_queue_url(QueueName="no-such-queue"),
        lambda: sqs.delete_queue(QueueUrl=url),
    ]


@pytest.fixture(scope="module")
def moto_app() -> App:
    return moto_dispatcher()


def test_every_call_is_answered_as_motos_server_app_answers_it(moto_app: App) -> None:
    behind: list[str] = []

    def fallback(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        behind.append(str(environ.get("HTTP_X_AMZ_TARGET")))
        return moto_app(environ, start_response)

    # Given the calls answered by moto's own server app
    expected = run_calls(moto_app)
    # When the same calls go to the direct path in front of it
    got = run_calls(direct_calls(fallback))
    # Then each answer is the same, and none of these calls reached the app behind
    assert len(got) == len(expected) == 24
    for number, (answer, wanted) in enumerate(zip(got, expected, strict=True)):
        assert answer == wanted, f"call {number}"
    assert behind == []
    assert sum(a[0].startswith("400") for a in got if isinstance(a, tuple)) == 7  # refusals were compared too


def test_other_calls_go_to_the_app_behind(moto_app: App) -> None:
    behind: list[str] = []

    def fallback(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        behind.append(environ["PATH_INFO"])
        return moto_app(environ, start_response)

    app = direct_calls(fallback)
    # When another service's call is made, and a DynamoDB call is posted to another path than "/"
    session = boto3.Session(**SESSION)
    sts = session.client("sts", endpoint_url=ENDPOINT)
    sts.meta.events.register("before-send", Recorder(app).send)
    assert sts.get_caller_identity()["Account"]
    elsewhere = session.client("dynamodb", endpoint_url=f"{ENDPOINT}/elsewhere")
    elsewhere.meta.events.register("before-send", Recorder(app).send)
    with pytest.raises(ClientError):
        elsewhere.list_tables()
    # Then the app behind answered each
    assert behind == ["/", "/elsewhere"]
