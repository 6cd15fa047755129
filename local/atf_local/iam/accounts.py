"""Who may do what on the embedded AWS: an operator (the harness: provisioning, tests, the console)
and a role per component, whose credentials each component's process runs with.

moto enforces IAM once its request count passes settings.INITIAL_NO_AUTH_ACTION_COUNT (read from the
environment when moto is imported; the in-process server reads the module attribute on every request,
so the stack sets that). Only IAM users and assumed roles can call it then: the operator is an IAM user
whose access key is the local stack's dummy credentials (atf_local.environment.DUMMY_CREDENTIALS), so
whatever ran as the harness before still does; each component assumes its role through STS.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import boto3

from atf_local.environment import DUMMY_CREDENTIALS
from atf_local.iam.roles import ACCOUNT, REGION, Statement

OPERATOR_USER = "atf-local-operator"
ROLE_PREFIX = "atf-local-"
SESSION_S = 12 * 3600  # AssumeRole's longest; moto does not expire a session anyway
ADMIN = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
logger = logging.getLogger(__name__)
_lock = threading.Lock()


def operator_session() -> boto3.Session:
    """The harness's session: provisioning, the tests' own reads, the console."""
    return boto3.Session(
        aws_access_key_id=DUMMY_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=DUMMY_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region_name=REGION,
    )


def role_arn(component: str) -> str:
    return f"arn:aws:iam::{ACCOUNT}:role/{ROLE_PREFIX}{component}"


def enforce(endpoint: str, policies: dict[str, list[Statement]], mirrors: tuple[str, ...] = ()) -> Callable[[], None]:
    """Create the operator and the components' roles on the in-process server, then turn enforcement on;
    put the same roles on each of `mirrors` (servers of other processes that enforce_here() ran in) and
    register there every session STS gives here. Returns what turns it off again (other in-process moto
    users of this process expect it off)."""
    from moto import settings

    with _lock:
        previous = settings.INITIAL_NO_AUTH_ACTION_COUNT
        enforce_here()
        _MIRRORS.extend(mirrors)
        _mirror_sessions()
    for server in (endpoint, *mirrors):
        iam = operator_session().client("iam", endpoint_url=server)
        for component, statements in policies.items():
            _put_role(iam, component, statements)

    def restore() -> None:
        settings.INITIAL_NO_AUTH_ACTION_COUNT = previous
        with _lock:
            for server in mirrors:
                _MIRRORS.remove(server)

    return restore


def add_role(endpoint: str, name: str, statements: list[Statement]) -> None:
    """A role of the caller's own beside the components' (a team's service that schedules tasks in its
    transactions, say), holding `statements` as moto must be given them (atf_local.iam.roles.translate);
    `credentials(endpoint, name)` then assumes it."""
    _put_role(operator_session().client("iam", endpoint_url=endpoint), name, statements)


def add_user(endpoint: str, name: str, statements: list[Statement]) -> dict[str, str]:
    """An IAM user holding `statements` (an inline policy) with a fresh access key: a person or a team's
    script calling the API. Returns the key as the environment variables boto3 reads (`session_of`
    makes a session of them)."""
    iam = operator_session().client("iam", endpoint_url=endpoint)
    with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
        iam.create_user(UserName=name)
    document = {"Version": "2012-10-17", "Statement": statements or [_NOTHING]}
    iam.put_user_policy(UserName=name, PolicyName="grants", PolicyDocument=json.dumps(document))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return {
        "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
    }


def session_of(environment: dict[str, str]) -> boto3.Session:
    """A session of credentials given as environment variables (a user's key, or a role's session)."""
    return boto3.Session(
        aws_access_key_id=environment["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=environment["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=environment.get("AWS_SESSION_TOKEN"),
        region_name=REGION,
    )


def enforce_here() -> None:
    """This process's moto: the operator, IAM enforced from the next request on, refusals named, and the
    IAM calls moto lacks served (atf_local.iam.simulate)."""
    from moto import settings
    from moto.core.authorization import ActionAuthenticatorMixin

    from atf_local.iam.simulate import serve_simulation

    serve_simulation()
    _create_operator()
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    ActionAuthenticatorMixin.request_count = 0
    _name_denials()


# The servers of other processes each session STS gives in this one is registered on (atf_local.servers).
_MIRRORS: list[str] = []


def _mirror_sessions() -> None:
    """After moto's STS hands out a session in this process, register it on every mirror (idempotent)."""
    from moto.sts.models import STSBackend

    original = STSBackend.assume_role
    if getattr(original, "_atf_mirrored", False):
        return

    def assume_role(self: Any, *args: Any, **kwargs: Any) -> Any:
        role = original(self, *args, **kwargs)
        session = {
            "role_arn": role.role_arn,
            "session_name": role.session_name,
            "access_key_id": role.access_key_id,
            "secret_access_key": role.secret_access_key,
            "session_token": role.session_token,
        }
        for server in list(_MIRRORS):
            _post_session(server, session)
        return role

    assume_role._atf_mirrored = True  # type: ignore[attr-defined]
    STSBackend.assume_role = assume_role  # type: ignore[method-assign]


def _post_session(server: str, session: dict[str, str]) -> None:
    from urllib.request import Request, urlopen

    from atf_local.servers import SESSIONS_PATH

    request = Request(server + SESSIONS_PATH, data=json.dumps([session]).encode(), method="POST")
    with urlopen(request, timeout=10) as answer:  # the stack's own loopback server
        answer.read()


def accept_sessions(sessions: list[dict[str, str]]) -> None:
    """Register sessions another process's STS gave, with their keys, on this process's moto."""
    from moto.sts.models import sts_backends

    backend = sts_backends[ACCOUNT]["aws"]
    for given in sessions:
        role = backend.assume_role(
            region_name=REGION,
            role_session_name=given["session_name"],
            role_arn=given["role_arn"],
            policy="",
            duration=SESSION_S,
            external_id="",
        )
        role.access_key.access_key_id = role.access_key_id = given["access_key_id"]
        role.access_key.secret_access_key = role.secret_access_key = given["secret_access_key"]
        role.session_token = given["session_token"]


class UnknownComponent(LookupError):
    """No role of that component on the stack: AWS's AssumeRole refuses a role that does not exist, moto's
    hands out credentials whose every call then fails."""


@functools.cache
def credentials(endpoint: str, component: str) -> dict[str, str]:
    """A session of `component`'s role, as the environment variables boto3 reads (one per process)."""
    operator = operator_session()
    iam = operator.client("iam", endpoint_url=endpoint)
    try:
        iam.get_role(RoleName=f"{ROLE_PREFIX}{component}")
    except iam.exceptions.NoSuchEntityException:
        roles = iam.list_roles()["Roles"]  # the stack's few: one per component
        known = sorted(r["RoleName"].removeprefix(ROLE_PREFIX) for r in roles if r["RoleName"].startswith(ROLE_PREFIX))
        listed = ", ".join(known)
        raise UnknownComponent(f"no component {component!r} on this stack; its components: {listed}") from None
    sts = operator.client("sts", endpoint_url=endpoint)
    found = sts.assume_role(RoleArn=role_arn(component), RoleSessionName=component, DurationSeconds=SESSION_S)
    given = found["Credentials"]
    return {
        "AWS_ACCESS_KEY_ID": given["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": given["SecretAccessKey"],
        "AWS_SESSION_TOKEN": given["SessionToken"],
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
    }


def _create_operator() -> None:
    # Straight into moto's IAM: its API would make up the access key, and the harness's is fixed.
    from moto.iam.models import iam_backends

    backend = iam_backends[ACCOUNT]["aws"]
    if any(user.name == OPERATOR_USER for user in backend.list_users("/", None, None)):
        return
    backend.create_user(region_name=REGION, user_name=OPERATOR_USER)
    backend.put_user_policy(OPERATOR_USER, "admin", json.dumps(ADMIN))
    key = backend.create_access_key(OPERATOR_USER)
    key.access_key_id = DUMMY_CREDENTIALS["AWS_ACCESS_KEY_ID"]
    key.secret_access_key = DUMMY_CREDENTIALS["AWS_SECRET_ACCESS_KEY"]


def operator_trust() -> dict[str, Any]:
    """A trust policy letting the local operator assume the role. AWS's trust policies name the service that
    assumes the role (lambda.amazonaws.com, ecs-tasks); locally the operator assumes it on its behalf."""
    principal = {"AWS": f"arn:aws:iam::{ACCOUNT}:user/{OPERATOR_USER}"}
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": principal}],
    }


def _put_role(iam: Any, component: str, statements: list[Statement]) -> None:
    trust = operator_trust()
    name = f"{ROLE_PREFIX}{component}"
    with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
        iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))
    document = {"Version": "2012-10-17", "Statement": statements or [_NOTHING]}
    iam.put_role_policy(RoleName=name, PolicyName="template", PolicyDocument=json.dumps(document))


# A role the template grants nothing still needs a document: one that allows nothing real.
_NOTHING = {"Effect": "Allow", "Action": "none:None", "Resource": "*"}


def _name_denials() -> None:
    """moto's refusal names the caller and the action; AWS's names the resource too, and so does this
    (from the request: moto checks DynamoDB against "*"). Each refusal is logged by the server as well."""
    from moto.core.exceptions import AccessDeniedError, JsonRESTError, _RESTError
    from moto.iam.access_control import IAMRequestBase

    original = IAMRequestBase.check_action_permitted
    if getattr(original, "_atf_named", False):
        return

    class XmlDenial(AccessDeniedError):
        def __init__(self, message: str) -> None:
            _RESTError.__init__(self, "AccessDenied", message)

    class JsonDenial(JsonRESTError):
        code = 403

    def check(self: Any, resource: str) -> None:
        try:
            original(self, resource)
        except AccessDeniedError:
            named = resource if resource != "*" else _requested_resource(self)
            message = f"User: {self._access_key.arn} is not authorized to perform: {self._action} on resource: {named}"
            logger.warning("IAM denied: %s", message)
            # AWS answers a JSON-protocol call (DynamoDB, SQS) in JSON; moto's answer is XML, which a
            # JSON client cannot read the error code from.
            json_protocol = "X-Amz-Target" in self._headers or "x-amz-target" in self._headers
            raise (JsonDenial("AccessDeniedException", message) if json_protocol else XmlDenial(message)) from None

    check._atf_named = True  # type: ignore[attr-defined]
    IAMRequestBase.check_action_permitted = check  # type: ignore[method-assign]


def _requested_resource(request: Any) -> str:
    """The table or queue a request names."""
    try:
        body = json.loads(request._body or b"{}")
    except ValueError:
        body = {}
    data = {**(request._data or {}), **(body if isinstance(body, dict) else {})}
    if "TableName" in data:
        return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{data['TableName']}"
    if "RequestItems" in data:
        tables = ", ".join(f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{t}" for t in data["RequestItems"])
        return tables
    for key in ("QueueUrl", "QueueName"):
        if key in data:
            return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{str(data[key]).rsplit('/', 1)[-1]}"
    return "*"
