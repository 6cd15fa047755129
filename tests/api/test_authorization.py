"""The local API authenticates and authorizes as API Gateway's AWS_IAM does: signatures verified against
the embedded AWS's keys, execute-api:Invoke decided by the caller's IAM policies; a refusal is a 403 that
never reaches the frontend, so nothing is written."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
import urllib3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from atf_core.errors import AccessDenied, MissingAuthentication
from atf_local.api_server import ApiServer
from atf_local.gateway_auth import Refusal, authenticate, execute_api_arn
from atf_local.iam.accounts import add_role, add_user, credentials, operator_session, session_of
from atf_local.iam.principals import Principal, lookup_at
from atf_local.stack import LocalStack, free_port
from atf_sdk.cli import main
from atf_sdk.client import AtfClient, RetryPolicy
from functions.frontend.handler import lambda_handler
from tests.api.conftest import Raw

GOOD = {"lambda": "work", "payload": {"n": 1}}
API = "arn:aws:execute-api:us-east-1:123456789012:local"
READ_WORK = [{"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": f"{API}/*/GET/v1/lambdas/work/*"}]
INVALID_SIGNATURE = "The request signature we calculated does not match the signature you provided"


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _keys(environment: dict[str, str]) -> Credentials:
    return Credentials(
        environment["AWS_ACCESS_KEY_ID"], environment["AWS_SECRET_ACCESS_KEY"], environment.get("AWS_SESSION_TOKEN")
    )


def _client(stack: LocalStack, environment: dict[str, str]) -> AtfClient:
    retry = RetryPolicy(attempts=2, base_s=0.01)
    return AtfClient(stack.api_url, region="us-east-1", session=session_of(environment), retry=retry)


def test_a_wrong_secret_is_refused_as_api_gateway_refuses_it_and_nothing_is_written(
    raw: Raw, item_count: Callable[[], int]
) -> None:
    before = item_count()
    reply = raw("POST", "/v1/tasks", GOOD, credentials=Credentials("local", "not-the-secret"))
    assert reply.status == 403
    assert reply.body["message"].startswith(INVALID_SIGNATURE) and "code" not in reply.body
    assert reply.headers["x-amzn-ErrorType"] == "InvalidSignatureException"
    assert item_count() == before


def test_the_sdk_raises_missing_authentication_for_a_bad_signature_and_does_not_retry(stack: LocalStack) -> None:
    wrong = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "wrong"}
    with pytest.raises(MissingAuthentication, match=INVALID_SIGNATURE) as refused:
        _client(stack, wrong).schedule("work", payload={"n": 1})
    assert not isinstance(refused.value, AccessDenied)


def test_an_unknown_key_is_refused(raw: Raw, item_count: Callable[[], int]) -> None:
    before = item_count()
    reply = raw("POST", "/v1/tasks", GOOD, credentials=Credentials("AKIANOBODYKNOWS00000", "x"))
    assert (reply.status, reply.body) == (403, {"message": "The security token included in the request is invalid."})
    assert reply.headers["x-amzn-ErrorType"] == "UnrecognizedClientException"
    assert item_count() == before


def test_a_session_key_needs_its_token_and_an_expired_session_is_refused(stack: LocalStack, raw: Raw) -> None:
    role = _name("reader")
    add_role(stack.endpoint, role, READ_WORK)
    session = credentials(stack.endpoint, role)
    keys = _keys(session)
    assert raw("GET", "/v1/lambdas/work/stats", credentials=keys).status == 200
    without_token = Credentials(keys.access_key, keys.secret_key)
    reply = raw("GET", "/v1/lambdas/work/stats", credentials=without_token)
    assert (reply.status, reply.body["message"]) == (403, "The security token included in the request is invalid.")
    forged = Credentials(keys.access_key, keys.secret_key, "a-token-sts-never-gave")
    assert raw("GET", "/v1/lambdas/work/stats", credentials=forged).status == 403
    from moto.sts.models import sts_backends

    (given,) = [s for s in sts_backends["123456789012"]["aws"].assumed_roles if s.access_key_id == keys.access_key]
    given.expiration = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=1)
    reply = raw("GET", "/v1/lambdas/work/stats", credentials=keys)
    assert (reply.status, reply.body["message"]) == (403, "The security token included in the request is expired")
    assert reply.headers["x-amzn-ErrorType"] == "ExpiredTokenException"


def _signed(stack: LocalStack, method: str, path: str, body: bytes, url: str | None = None) -> AWSRequest:
    request = AWSRequest(method=method, url=(url or stack.api_url) + path, data=body)
    request.headers["Content-Type"] = "application/json"
    SigV4Auth(Credentials("local", "local"), "execute-api", "us-east-1").add_auth(request)
    return request


def test_the_body_the_host_and_the_query_are_signed(stack: LocalStack, item_count: Callable[[], int]) -> None:
    pool = urllib3.PoolManager()
    before = item_count()
    signed = _signed(stack, "POST", "/v1/tasks", json.dumps(GOOD).encode())
    other_body = json.dumps({**GOOD, "payload": {"n": 2}}).encode()
    sent = pool.request("POST", stack.api_url + "/v1/tasks", body=other_body, headers=dict(signed.headers.items()))
    assert sent.status == 403 and json.loads(sent.data)["message"].startswith(INVALID_SIGNATURE)
    elsewhere = _signed(stack, "POST", "/v1/tasks", json.dumps(GOOD).encode(), url=f"http://127.0.0.1:{free_port()}")
    sent = pool.request("POST", stack.api_url + "/v1/tasks", body=json.dumps(GOOD), headers=dict(elsewhere.headers))
    assert sent.status == 403 and json.loads(sent.data)["message"].startswith(INVALID_SIGNATURE)
    query = _signed(stack, "GET", "/v1/lambdas/work/stats?x=1", b"")
    sent = pool.request("GET", stack.api_url + "/v1/lambdas/work/stats?x=2", headers=dict(query.headers.items()))
    assert sent.status == 403
    assert item_count() == before


def test_a_signature_more_than_five_minutes_away_from_now_is_refused(stack: LocalStack) -> None:
    signed = _signed(stack, "GET", "/v1/lambdas/work/stats", b"")
    signed.headers["Host"] = stack.api_url.removeprefix("http://")  # as the HTTP client sends it
    target = "/v1/lambdas/work/stats"

    def at(now: datetime) -> Principal | Refusal:
        return authenticate("GET", target, signed.headers, b"", now=now)

    assert isinstance(at(datetime.now(UTC) + timedelta(minutes=4)), Principal)
    assert isinstance(at(datetime.now(UTC) - timedelta(minutes=4)), Principal)
    late = at(datetime.now(UTC) + timedelta(minutes=6))
    assert isinstance(late, Refusal) and late.message.startswith("Signature expired: ")
    early = at(datetime.now(UTC) - timedelta(minutes=6))
    assert isinstance(early, Refusal) and early.message.startswith("Signature not yet current: ")


@pytest.fixture(params=["user", "role"])
def reader(request: pytest.FixtureRequest, stack: LocalStack) -> dict[str, str]:
    """A principal allowed only GET .../v1/lambdas/work/*: an IAM user's key, or an assumed role's session."""
    name = _name("reader")
    if request.param == "user":
        return add_user(stack.endpoint, name, READ_WORK)
    add_role(stack.endpoint, name, READ_WORK)
    return credentials(stack.endpoint, name)


def test_a_principal_may_do_what_its_policy_allows_and_nothing_else(
    stack: LocalStack, reader: dict[str, str], item_count: Callable[[], int]
) -> None:
    client = _client(stack, reader)
    assert client.stats("work").lambda_ == "work"
    before = item_count()
    with pytest.raises(AccessDenied) as refused:
        client.schedule("work", payload={"n": 1})
    caller = boto3_identity(reader)
    resource = execute_api_arn("POST", "/v1/lambdas/work/tasks")  # the SDK takes the lambda's own route
    assert resource == f"{API}/local/POST/v1/lambdas/work/tasks"
    assert (
        refused.value.message
        == f"User: {caller} is not authorized to perform: execute-api:Invoke on resource: {resource}"
    )
    assert refused.value.status == 403 and refused.value.code == "access_denied"
    with pytest.raises(AccessDenied):
        client.stats("mail")
    assert item_count() == before


def test_an_api_server_in_another_process_asks_the_stack_who_holds_a_key(
    stack: LocalStack, reader: dict[str, str]
) -> None:
    # as the benchmarks' API process does (bench/api_process.py): the same answers through the stack's endpoint
    server = ApiServer(free_port(), lambda_handler, lookup=lookup_at(stack.endpoint)).start()
    try:
        client = AtfClient(server.url, region="us-east-1", session=session_of(reader))
        assert client.stats("work").lambda_ == "work"
        with pytest.raises(AccessDenied):
            client.schedule("work", payload={"n": 1})
        with pytest.raises(MissingAuthentication):
            AtfClient(
                server.url, region="us-east-1", session=session_of({**reader, "AWS_SECRET_ACCESS_KEY": "x"})
            ).stats("work")
    finally:
        server.stop()


def boto3_identity(environment: dict[str, str]) -> str:
    from atf_local.iam.principals import principal_for_key

    principal = principal_for_key(environment["AWS_ACCESS_KEY_ID"])
    assert principal is not None
    return principal.arn


def test_an_explicit_deny_beats_an_allow(stack: LocalStack, item_count: Callable[[], int]) -> None:
    everything = {"Effect": "Allow", "Action": "execute-api:*", "Resource": "*"}
    no_writes = {"Effect": "Deny", "Action": "execute-api:Invoke", "Resource": f"{API}/*/POST/*"}
    client = _client(stack, add_user(stack.endpoint, _name("guarded"), [everything, no_writes]))
    assert client.stats("work").lambda_ == "work"
    before = item_count()
    with pytest.raises(AccessDenied, match=r"POST/v1/lambdas/work/tasks with an explicit deny$"):
        client.schedule("work", payload={"n": 1})
    assert item_count() == before


def test_the_cli_exits_5_naming_the_resource(
    stack: LocalStack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in add_user(stack.endpoint, _name("cli"), READ_WORK).items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exited:
        main(["schedule", "--api-url", stack.api_url, "work"])
    assert exited.value.code == 5
    err = capsys.readouterr().err
    assert err.startswith("atf: access_denied:") and f"{API}/local/POST/v1/lambdas/work/tasks" in err


@pytest.fixture
def recording(stack: LocalStack) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    events: list[dict[str, Any]] = []

    def record(event: dict[str, Any], context: Any) -> dict[str, Any]:
        events.append(event)
        return dict(lambda_handler(event, context))

    server = ApiServer(free_port(), record).start()
    yield server.url, events
    server.stop()


def test_the_function_is_told_who_called_as_api_gateway_tells_it(
    stack: LocalStack, recording: tuple[str, list[dict[str, Any]]]
) -> None:
    url, events = recording
    role = _name("reader")
    add_role(stack.endpoint, role, READ_WORK)
    session = credentials(stack.endpoint, role)
    AtfClient(url, region="us-east-1", session=session_of(session)).stats("work")
    identity = events[-1]["requestContext"]["identity"]
    assert identity["userArn"] == f"arn:aws:sts::123456789012:assumed-role/atf-local-{role}/{role}"
    assert identity["accessKey"] == session["AWS_ACCESS_KEY_ID"]
    assert identity["caller"].endswith(f":{role}") and identity["accountId"] == "123456789012"
    assert events[-1]["requestContext"]["apiId"] == "local" and events[-1]["requestContext"]["stage"] == "local"


def test_iam_simulates_a_principals_policy_with_the_same_evaluator(stack: LocalStack) -> None:
    name = _name("team")
    add_user(stack.endpoint, name, READ_WORK)
    iam = operator_session().client("iam", endpoint_url=stack.endpoint)
    readable, writable = f"{API}/local/GET/v1/lambdas/work/stats", f"{API}/local/POST/v1/tasks"
    answer = iam.simulate_principal_policy(
        PolicySourceArn=f"arn:aws:iam::123456789012:user/{name}",
        ActionNames=["execute-api:Invoke"],
        ResourceArns=[readable, writable],
    )
    (result,) = answer["EvaluationResults"]
    assert (result["EvalActionName"], result["EvalDecision"]) == ("execute-api:Invoke", "implicitDeny")
    decisions = {r["EvalResourceName"]: r["EvalResourceDecision"] for r in result["ResourceSpecificResults"]}
    assert decisions == {readable: "allowed", writable: "implicitDeny"}
    allowed = iam.simulate_principal_policy(
        PolicySourceArn=f"arn:aws:iam::123456789012:user/{name}",
        ActionNames=["execute-api:Invoke"],
        ResourceArns=[readable],
        PolicyInputList=[json.dumps({"Version": "2012-10-17", "Statement": [{**READ_WORK[0], "Effect": "Deny"}]})],
    )["EvaluationResults"][0]
    assert (allowed["EvalResourceName"], allowed["EvalDecision"]) == (readable, "explicitDeny")
    assert allowed["MatchedStatements"] == [{"SourcePolicyId": "PolicyInputList.1", "SourcePolicyType": "none"}]
    with pytest.raises(ClientError, match="NoSuchEntity"):
        iam.simulate_principal_policy(
            PolicySourceArn="arn:aws:iam::123456789012:role/nobody", ActionNames=["execute-api:Invoke"]
        )


def test_the_simulator_is_granted_on_the_simulated_entity_as_on_aws(stack: LocalStack) -> None:
    role = _name("frontend-like")
    may_simulate_users = {
        "Effect": "Allow",
        "Action": "iam:SimulatePrincipalPolicy",
        "Resource": "arn:aws:iam::123456789012:user/*",
    }
    add_role(stack.endpoint, role, [may_simulate_users])
    iam = session_of(credentials(stack.endpoint, role)).client("iam", endpoint_url=stack.endpoint)
    user = _name("team")
    add_user(stack.endpoint, user, READ_WORK)
    answer = iam.simulate_principal_policy(
        PolicySourceArn=f"arn:aws:iam::123456789012:user/{user}", ActionNames=["execute-api:Invoke"]
    )
    assert answer["EvaluationResults"][0]["EvalDecision"] == "implicitDeny"  # READ_WORK does not cover "*"
    with pytest.raises(ClientError, match="AccessDenied"):
        iam.simulate_principal_policy(
            PolicySourceArn=f"arn:aws:iam::123456789012:role/atf-local-{role}", ActionNames=["execute-api:Invoke"]
        )


def test_calling_the_simulator_needs_its_own_grant(stack: LocalStack) -> None:
    name = _name("nosim")
    keys = add_user(stack.endpoint, name, READ_WORK)
    iam = boto3.Session(
        aws_access_key_id=keys["AWS_ACCESS_KEY_ID"], aws_secret_access_key=keys["AWS_SECRET_ACCESS_KEY"]
    ).client("iam", endpoint_url=stack.endpoint, region_name="us-east-1")
    with pytest.raises(ClientError, match="AccessDenied"):
        iam.simulate_principal_policy(
            PolicySourceArn=f"arn:aws:iam::123456789012:user/{name}", ActionNames=["execute-api:Invoke"]
        )


def test_credentials_of_a_component_the_stack_has_not_are_refused_naming_those_it_has(stack: LocalStack) -> None:
    # AWS's AssumeRole refuses a role that does not exist; moto's handed out keys whose every call then failed.
    from atf_local.__main__ import export_line

    with pytest.raises(SystemExit) as refused:
        export_line(stack.endpoint, "worker-wrok")
    message = str(refused.value.code)
    assert message.startswith("atf_local credentials: no component 'worker-wrok' on this stack; its components: ")
    assert all(name in message for name in ("consumer", "frontend", "worker, ", "worker-work"))
    assert "AWS_SESSION_TOKEN=" in export_line(stack.endpoint, "worker-work")
