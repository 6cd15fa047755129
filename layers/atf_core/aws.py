"""boto3 clients, built once per process and passed to whoever needs them.

Only the endpoints and credentials differ between the local stack and AWS:
ATF_AWS_ENDPOINT (or an explicit endpoint_url) points every client at moto's
server, and botocore's per-service variables (AWS_ENDPOINT_URL_SQS, ...) name
where that same stack serves one service itself; without them boto3 resolves
the real service endpoints.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

ENDPOINT_ENV = "ATF_AWS_ENDPOINT"
# The error codes with which AWS says "too many requests, slow down": the frontend answers them with
# a 429, and the consumer and the worker hosts count them (Metric.THROTTLES). They are those of the
# list botocore's standard retry mode treats as throttling (botocore.retries.standard) that say so
# alone: not TransactionInProgressException, BandwidthLimitExceeded or PriorRequestNotComplete.
THROTTLING_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "LimitExceededException",
        "SlowDown",
    }
)
# Answers that say the caller's role may not do what it asked (DynamoDB, SQS in its JSON and query
# protocols, and a KMS key the role cannot use): a missing grant, which no retry mends.
# What DynamoDB answers a request it never takes (an item over 400 KB, a malformed expression): a defect
INVALID_REQUEST_CODE = "ValidationException"
AUTHORIZATION_CODES = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "AWS.SimpleQueueService.AccessDenied",
        "UnauthorizedOperation",
        "KMSAccessDeniedException",
        "KMS.AccessDeniedException",
    }
)

# Standard mode retries throttling and 5xx with jittered backoff. Three
# attempts of at most 2 s each bound one call. (botocore's `max_attempts` counts
# the retries after the first attempt, and it rewrites the setting into
# `total_max_attempts` when it builds a client: say the total.)
RETRY_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 3},
    connect_timeout=2,
    read_timeout=2,
    max_pool_connections=32,
)
# A heartbeat gets one quick retry at most: the executor counts misses
# itself, and its lease must outlast three misses plus one call's budget.
HEARTBEAT_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 2},
    connect_timeout=1,
    read_timeout=1,
)


def attempts(config: Config) -> int:
    """How many attempts one call makes at most, the first included."""
    return int(getattr(config, "retries")["total_max_attempts"])  # noqa: B009 - set dynamically by botocore


def retry_budget_s(config: Config) -> float:
    """The longest one call can take: every attempt timing out, plus standard mode's
    backoff between attempts (a jittered 2**n seconds, capped at 20)."""
    tries = attempts(config)
    per_attempt = float(getattr(config, "connect_timeout")) + float(getattr(config, "read_timeout"))  # noqa: B009
    backoff = sum(min(20.0, 2.0**n) for n in range(1, tries))
    return tries * per_attempt + backoff


HEARTBEAT_CALL_BUDGET_S = retry_budget_s(HEARTBEAT_CONFIG)


@dataclass(frozen=True)
class AwsClients:
    dynamodb: DynamoDBClient
    sqs: SQSClient
    sqs_long_poll: SQSClient
    dynamodb_heartbeat: DynamoDBClient
    iam: Any = None  # boto3's IAM client, for a component that asks IAM (make_clients(iam=True)); no stubs


def make_clients(
    endpoint_url: str | None = None,
    region: str | None = None,
    session: boto3.Session | None = None,
    config: Config | None = None,
    iam: bool = False,
) -> AwsClients:
    session = session or boto3.Session(region_name=region or _default_region())
    base = config or RETRY_CONFIG
    dynamodb: dict[str, Any] = {"endpoint_url": service_endpoint("dynamodb", endpoint_url)}
    sqs: dict[str, Any] = {"endpoint_url": service_endpoint("sqs", endpoint_url)}
    return AwsClients(
        dynamodb=session.client("dynamodb", config=base, **dynamodb),
        sqs=session.client("sqs", config=base, **sqs),
        sqs_long_poll=session.client("sqs", config=base.merge(Config(read_timeout=25)), **sqs),
        dynamodb_heartbeat=session.client("dynamodb", config=HEARTBEAT_CONFIG, **dynamodb),
        iam=session.client("iam", config=base, endpoint_url=service_endpoint("iam", endpoint_url)) if iam else None,
    )


def service_endpoint(service: str, endpoint_url: str | None = None) -> str | None:
    """Where `service`'s clients go: `endpoint_url` or ATF_AWS_ENDPOINT, unless the environment names the
    service's own endpoint (botocore's AWS_ENDPOINT_URL_<SERVICE>, which also wins over its global
    AWS_ENDPOINT_URL) for that same stack. An explicit endpoint of another stack keeps all its calls.
    None: botocore resolves it (AWS)."""
    shared = endpoint_url or os.environ.get(ENDPOINT_ENV) or None
    own = os.environ.get(f"AWS_ENDPOINT_URL_{service.upper()}")
    if own and (shared is None or shared == os.environ.get(ENDPOINT_ENV)):
        return own
    return shared


def _default_region() -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
