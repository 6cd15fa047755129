"""Small shared builders, so every key, log group and queue is made secure the same way."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}

# What a principal needs on a customer-managed key to read, and to write, data
# that DynamoDB or SQS encrypts with it: CDK's grantRead/grantWrite lists without
# their wildcards (nobody here re-encrypts or asks for a data key without plaintext).
KEY_DECRYPT = ("kms:Decrypt", "kms:DescribeKey")
KEY_ENCRYPT_DECRYPT = ("kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey")
# The data key is only ever used through these services, never directly.
KEY_SERVICES = ("dynamodb", "sqs")


def retention(days: int) -> logs.RetentionDays:
    """CloudWatch Logs accepts only some retention periods: the longest allowed one not above `days`."""
    allowed = max(d for d in _RETENTION if d <= max(days, 1))
    return _RETENTION[allowed]


def removal(retain: bool) -> RemovalPolicy:
    return RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY


def encryption_key(scope: Construct, id: str, *, purpose: str, retain: bool) -> kms.Key:
    return kms.Key(
        scope,
        id,
        description=f"{Stack.of(scope).stack_name}: {purpose}",
        enable_key_rotation=True,
        removal_policy=removal(retain),
        pending_window=Duration.days(30) if retain else Duration.days(7),
    )


def allow_logs_service(key: kms.Key) -> None:
    """CloudWatch Logs encrypts a log group with a key only if the key policy lets it, and
    only for this account's log groups."""
    stack = Stack.of(key)
    log_groups = f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:log-group:*"
    key.add_to_resource_policy(
        iam.PolicyStatement(
            principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
            actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
            resources=["*"],
            conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn": log_groups}},
        )
    )


def log_group(
    scope: Construct, id: str, *, key: kms.IKey, days: int, retain: bool, name: str | None = None
) -> logs.LogGroup:
    return logs.LogGroup(
        scope,
        id,
        log_group_name=name,
        encryption_key=key,
        retention=retention(days),
        removal_policy=removal(retain),
    )


def secure_queue(
    scope: Construct,
    id: str,
    *,
    name: str,
    key: kms.IKey,
    retention_s: int,
    visibility_timeout_s: int = 30,
    dead_letter: sqs.DeadLetterQueue | None = None,
) -> sqs.Queue:
    """An SQS queue encrypted with the key and refusing anything but TLS."""
    return sqs.Queue(
        scope,
        id,
        queue_name=name,
        encryption=sqs.QueueEncryption.KMS,
        encryption_master_key=key,
        # One data key serves five minutes of messages, not one KMS call each.
        data_key_reuse=Duration.minutes(5),
        enforce_ssl=True,
        retention_period=Duration.seconds(retention_s),
        visibility_timeout=Duration.seconds(visibility_timeout_s),
        dead_letter_queue=dead_letter,
    )


def grant_key(key: kms.IKey, grantee: iam.IGrantable, *, write: bool, services: tuple[str, ...] = KEY_SERVICES) -> None:
    """Use of the data key, and only by way of DynamoDB or SQS (or those of them named) acting for the grantee."""
    region = Stack.of(key).region
    iam.Grant.add_to_principal(
        grantee=grantee,
        actions=list(KEY_ENCRYPT_DECRYPT if write else KEY_DECRYPT),
        resource_arns=[key.key_arn],
        conditions={"StringEquals": {"kms:ViaService": [f"{service}.{region}.amazonaws.com" for service in services]}},
    )
