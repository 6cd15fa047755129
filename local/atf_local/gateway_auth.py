"""API Gateway's AWS_IAM authorization, as the local API server applies it to every request.

Authentication: the request's SigV4 signature is recomputed with botocore's signer from the secret the
embedded AWS holds for its access key (an IAM user's key or an STS session, atf_local.iam.principals),
over what the caller signed: method, path, query, the signed headers (the host and port among them) and
the body. Refused, as API Gateway refuses them: no signature, an unknown key, a session's key without
its token (or a user's key with one), an expired session, a signature dated more than 5 minutes away
from now, a credential scoped to another region or service, a signature that does not match.

Authorization: the caller's identity policies must allow `execute-api:Invoke` on the request's ARN,
arn:aws:execute-api:{region}:{account}:{api id}/{stage}/{METHOD}/{path}, by IAM's rules
(atf_local.iam.evaluate).

A refusal answers 403 with API Gateway's message; where the deployed API reshapes a refusal
(atf_core.errors.GATEWAY_REFUSALS: its GatewayResponses), the body is reshaped the same way here.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from botocore.auth import SIGV4_TIMESTAMP, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from atf_core.errors import GATEWAY_REFUSALS
from atf_local.iam.evaluate import EXPLICIT_DENY, evaluate
from atf_local.iam.principals import Principal, principal_for_key
from atf_local.iam.roles import ACCOUNT, REGION

SERVICE = "execute-api"
ACTION = "execute-api:Invoke"
API_ID = "local"
STAGE = "local"
SCHEME = "AWS4-HMAC-SHA256"
MAX_SKEW = timedelta(minutes=5)  # API Gateway's, either way
_PARAMETER = re.compile(r"(Credential|SignedHeaders|Signature)=([^,\s]*)")
_INVALID_TOKEN = "The security token included in the request is invalid."
_EXPIRED_TOKEN = "The security token included in the request is expired"
MISSING = "Missing Authentication Token"


class Headers(Protocol):
    """A request's headers, looked up without regard to case (http.client's message, urllib3's dict)."""

    def get(self, name: str, default: Any = None, /) -> Any: ...


@dataclass(frozen=True)
class Refusal:
    """What API Gateway answers instead of calling the function."""

    response_type: str  # the gateway response type (MISSING_AUTHENTICATION_TOKEN, ACCESS_DENIED, ...)
    error_type: str  # its x-amzn-ErrorType header
    message: str
    status: int = 403

    def body(self) -> dict[str, Any]:
        """The body the deployed API answers: reshaped by its GatewayResponse where it has one."""
        reshaped = GATEWAY_REFUSALS.get(self.response_type)
        if reshaped is None:
            return {"message": self.message}
        error, field = reshaped
        return {"code": error.code, "message": self.message, "field": field}


def execute_api_arn(method: str, path: str) -> str:
    """The resource IAM authorizes a request of the local API as."""
    return f"arn:aws:{SERVICE}:{REGION}:{ACCOUNT}:{API_ID}/{STAGE}/{method.upper()}/{path.lstrip('/')}"


KeyLookup = Callable[[str], Principal | None]


def authenticate(
    method: str,
    target: str,
    headers: Headers,
    body: bytes,
    now: datetime | None = None,
    lookup: KeyLookup = principal_for_key,
) -> Principal | Refusal:
    """The caller whose key signed this request, or why API Gateway would refuse it. `lookup`: who holds
    an access key (the embedded AWS's backends, in the process that runs them)."""
    authorization = headers.get("Authorization") or ""
    if not authorization.startswith(SCHEME + " "):
        return Refusal("MISSING_AUTHENTICATION_TOKEN", "MissingAuthenticationTokenException", MISSING)
    fields = dict(_PARAMETER.findall(authorization))
    for name in ("Credential", "SignedHeaders", "Signature"):
        if not fields.get(name):
            return _incomplete(f"Authorization header requires '{name}' parameter. Authorization={authorization}")
    scope = fields["Credential"].split("/")
    if len(scope) != 5 or scope[4] != "aws4_request":
        return _incomplete(f"Credential should be scoped to a valid region, not ''. Credential={fields['Credential']}")
    key_id, day, region, service, _ = scope
    if service != SERVICE:
        return _invalid(f"Credential should be scoped to correct service: '{SERVICE}'. ")
    if region != REGION:
        return _invalid(f"Credential should be scoped to a valid region, not '{region}'. ")
    principal = lookup(key_id)
    token = headers.get("X-Amz-Security-Token")
    if principal is None or token != principal.session_token:
        return Refusal("DEFAULT_4XX", "UnrecognizedClientException", _INVALID_TOKEN)
    now = now or datetime.now(UTC)
    if principal.expires is not None and principal.expires.replace(tzinfo=UTC) <= now:
        return Refusal("EXPIRED_TOKEN", "ExpiredTokenException", _EXPIRED_TOKEN)
    stamp = headers.get("X-Amz-Date") or ""
    refused = _check_time(stamp, day, now)
    if refused is not None:
        return refused
    return _check_signature(method, target, headers, body, fields, principal, stamp)


def authorize(principal: Principal, method: str, path: str) -> Refusal | None:
    """None where the caller's identity policies allow execute-api:Invoke on the request's ARN."""
    resource = execute_api_arn(method, path)
    decision = evaluate(principal.policies, ACTION, resource)
    if decision.allowed and principal.session_policy is not None:
        decision = evaluate([principal.session_policy], ACTION, resource)  # a session policy only narrows
    if decision.allowed:
        return None
    message = f"User: {principal.arn} is not authorized to perform: {ACTION} on resource: {resource}"
    if decision.decision == EXPLICIT_DENY:
        message += " with an explicit deny"
    return Refusal("ACCESS_DENIED", "AccessDeniedException", message)


def _check_time(stamp: str, day: str, now: datetime) -> Refusal | None:
    try:
        signed_at = datetime.strptime(stamp, SIGV4_TIMESTAMP).replace(tzinfo=UTC)
    except ValueError:
        return _incomplete("Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
    if stamp[:8] != day:
        return _invalid(f"Date in Credential scope does not match the request's date: '{day}' != '{stamp[:8]}'.")
    at = now.strftime(SIGV4_TIMESTAMP)
    if signed_at < now - MAX_SKEW:
        earliest = (now - MAX_SKEW).strftime(SIGV4_TIMESTAMP)
        return _invalid(f"Signature expired: {stamp} is now earlier than {earliest} ({at} - 5 min.)")
    if signed_at > now + MAX_SKEW:
        latest = (now + MAX_SKEW).strftime(SIGV4_TIMESTAMP)
        return _invalid(f"Signature not yet current: {stamp} is still later than {latest} ({at} + 5 min.)")
    return None


def _check_signature(
    method: str,
    target: str,
    headers: Headers,
    body: bytes,
    fields: dict[str, str],
    principal: Principal,
    stamp: str,
) -> Principal | Refusal:
    """The request as its signer saw it (only the headers it signed), signed again by botocore."""
    signed = fields["SignedHeaders"].split(";")
    if "host" not in signed:
        return _invalid("'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.")
    payload_hash = headers.get("X-Amz-Content-SHA256")
    if payload_hash is not None and payload_hash != hashlib.sha256(body).hexdigest():
        return _mismatch()  # a declared body hash that is not the body's: the body is not what was signed
    request = AWSRequest(
        method=method,
        url=f"http://{headers.get('Host', '')}{target}",
        data=body,
        headers={name: headers.get(name, "") for name in signed},
    )
    request.context["timestamp"] = stamp
    credentials = Credentials(principal.access_key_id, principal.secret_access_key, principal.session_token)
    signer = SigV4Auth(credentials, SERVICE, REGION)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if not hmac.compare_digest(expected, fields["Signature"]):
        return _mismatch()
    return principal


def _mismatch() -> Refusal:
    return _invalid(
        "The request signature we calculated does not match the signature you provided. Check your AWS Secret "
        "Access Key and signing method. Consult the service documentation for details."
    )


def _invalid(message: str) -> Refusal:
    return Refusal("INVALID_SIGNATURE", "InvalidSignatureException", message)


def _incomplete(message: str) -> Refusal:
    return Refusal("INVALID_SIGNATURE", "IncompleteSignatureException", message)
