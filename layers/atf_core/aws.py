"""boto3 clients, built once per process and passed to whoever needs them.

Only the endpoint and credentials differ between the local stack and AWS:
ATF_AWS_ENDPOINT (or an explicit endpoint_url) points every client at moto's
server; without it boto3 resolves the real service endpoints.
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


def make_clients(
    endpoint_url: str | None = None,
    region: str | None = None,
    session: boto3.Session | None = None,
    config: Config | None = None,
) -> AwsClients:
    endpoint = endpoint_url or os.environ.get(ENDPOINT_ENV) or None
    session = session or boto3.Session(region_name=region or _default_region())
    base = config or RETRY_CONFIG
    kwargs: dict[str, Any] = {"endpoint_url": endpoint}
    return AwsClients(
        dynamodb=session.client("dynamodb", config=base, **kwargs),
        sqs=session.client("sqs", config=base, **kwargs),
        sqs_long_poll=session.client("sqs", config=base.merge(Config(read_timeout=25)), **kwargs),
        dynamodb_heartbeat=session.client("dynamodb", config=HEARTBEAT_CONFIG, **kwargs),
    )


def _default_region() -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
