"""A worker service as a team declares it: which lambdas it serves, from which image, with what.

`WorkerService` is the props of one ECS Fargate service of worker hosts (atf_cdk.constructs.workers
builds it). Everything a team's callbacks need reaches them through it: the image (your Dockerfile
through `ecs.ContainerImage.from_asset`, or a registry reference), environment variables, secrets
(Secrets Manager or SSM Parameter Store, read by ECS at start and never written into the template),
IAM statements and managed policies for what the callbacks call, and the size and scaling bounds.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam

from atf_core.config import CONFIG_ENV
from atf_core.telemetry import METRICS_NAMESPACE_ENV, SERVICE_NAME_ENV
from atf_core.vocabulary import LAMBDA_ENV

Architecture = Literal["x86_64", "arm64"]
# The memory sizes (MiB) Fargate accepts for each cpu; any other pair fails RegisterTaskDefinition with "Invalid
# 'cpu' setting for task" as the stack deploys (ECS's task definition reference: 1 GB steps up to 4 vCPU, then
# 4 GB and 8 GB steps).
FARGATE_MEMORY = {
    256: (512, 1024, 2048),
    512: tuple(range(1024, 4096 + 1, 1024)),
    1024: tuple(range(2048, 8192 + 1, 1024)),
    2048: tuple(range(4096, 16384 + 1, 1024)),
    4096: tuple(range(8192, 30720 + 1, 1024)),
    8192: tuple(range(16384, 61440 + 1, 4096)),
    16384: tuple(range(32768, 122880 + 1, 8192)),
}


def fargate_size_error(cpu: int, memory_mib: int) -> str | None:
    """Why Fargate refuses this cpu and memory pair, or None where it takes it."""
    if cpu not in FARGATE_MEMORY:
        return f"cpu must be one of {sorted(FARGATE_MEMORY)}"
    sizes = FARGATE_MEMORY[cpu]
    if memory_mib in sizes:
        return None
    steps = {b - a for a, b in itertools.pairwise(sizes)}
    if len(steps) == 1:
        return f"Fargate cpu {cpu} takes memory_mib from {sizes[0]} to {sizes[-1]} in steps of {steps.pop()}"
    return f"Fargate cpu {cpu} takes memory_mib {', '.join(map(str, sizes))}"


# What the framework sets on every host itself (constructs/workers.host_environment): not the team's to set.
RESERVED_ENVIRONMENT = frozenset(
    {CONFIG_ENV, "AWS_REGION", "AWS_DEFAULT_REGION", SERVICE_NAME_ENV, METRICS_NAMESPACE_ENV, LAMBDA_ENV}
)
SERVICE_NAME_PATTERN = r"^[a-z][a-z0-9-]{0,39}$"
# A key's ARN: IAM grants kms:Decrypt on the key, never on an alias.
KMS_KEY_ARN_PATTERN = r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$"


@dataclass(frozen=True)
class SecretRef:
    """A secret the host reads from an environment variable, resolved by ECS when the task starts.

    Exactly one of `secrets_manager` (a secret's name or full ARN) and `ssm` (a SecureString or String
    parameter's name, e.g. "/team/db-password"); `field` picks one JSON key of a Secrets Manager secret.
    `kms_key`, the ARN of the customer-managed key the secret or parameter is encrypted with: ECS reads it
    with the task's execution role, which then needs kms:Decrypt on that key, or the task does not start
    (ResourceInitializationError). AWS's own keys (aws/secretsmanager, aws/ssm) need none."""

    secrets_manager: str | None = None
    ssm: str | None = None
    field: str | None = None
    kms_key: str | None = None

    def __post_init__(self) -> None:
        if (self.secrets_manager is None) == (self.ssm is None):
            raise ValueError("a secret names exactly one of secrets_manager and ssm")
        if self.field is not None and self.secrets_manager is None:
            raise ValueError("field picks a key of a Secrets Manager secret; an SSM parameter has none")
        if self.kms_key is not None and not re.match(KMS_KEY_ARN_PATTERN, self.kms_key):
            raise ValueError(
                f"kms_key must be a key's ARN (arn:aws:kms:<region>:<account>:key/<id>), not {self.kms_key!r}"
            )


@dataclass(frozen=True)
class Scaling:
    """Tasks between min_tasks (0: none while nothing is due or queued) and max_tasks, tracking
    `backlog_per_task`: the messages queued or in flight, plus the tasks the consumer sees coming due,
    per running task (atf_cdk.constructs.scaling)."""

    min_tasks: int = 1
    max_tasks: int = 10
    backlog_per_task: int = 50

    def __post_init__(self) -> None:
        if not 0 <= self.min_tasks <= self.max_tasks <= 1000:
            raise ValueError(
                f"scaling: need 0 <= min_tasks <= max_tasks <= 1000, not {self.min_tasks}..{self.max_tasks}"
            )
        if self.backlog_per_task < 1:
            raise ValueError("scaling.backlog_per_task must be at least 1")


@dataclass(frozen=True)
class WorkerService:
    """One ECS service of worker hosts, serving `lambdas` (each configured lambda is served by one service).

    `image`: an `ecs.ContainerImage` (e.g. `ContainerImage.from_asset("path/with/Dockerfile")`), or a
    reference: 'repository:tag' in this account's ECR, or a full registry reference. None deploys the
    service at 0 tasks until an image is given. The service sets ATF_LAMBDA to `lambdas` (comma-separated),
    and `atf worker module:lambdas` serves what ATF_LAMBDA names by default, so one image can serve every
    service. `command` overrides the image's CMD (e.g. to pass `--only`, which overrides ATF_LAMBDA)."""

    name: str
    lambdas: Sequence[str]
    image: ecs.ContainerImage | str | None = None
    command: Sequence[str] | None = None
    environment: Mapping[str, str] = field(default_factory=dict)
    secrets: Mapping[str, SecretRef | ecs.Secret] = field(default_factory=dict)
    policy_statements: Sequence[iam.PolicyStatement] = ()
    # Managed policies by object, ARN, or AWS-managed name (e.g. "AmazonS3ReadOnlyAccess").
    managed_policies: Sequence[iam.IManagedPolicy | str] = ()
    cpu: int = 512
    memory_mib: int = 1024
    architecture: Architecture = "x86_64"
    scaling: Scaling = field(default_factory=Scaling)
    # The container health check runs atf-sdk's probe (python -m atf_sdk.worker.health) in the image; False for an
    # image that cannot run it (no python on PATH, a distroless base): ECS then replaces a host only when it exits.
    health_check: bool = True
    # cdk-nag findings the owner's own grants raise, accepted with the reason (rule -> reason), e.g.
    # {"AwsSolutions-IAM5[Resource::arn:aws:s3:::bucket/prefix/*]": "one object per image under the prefix"}
    acknowledgements: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"worker service {self.name!r}"
        if not re.match(SERVICE_NAME_PATTERN, self.name):
            raise ValueError(f"{where}: name must match {SERVICE_NAME_PATTERN}")
        if not self.lambdas or len(set(self.lambdas)) != len(self.lambdas):
            raise ValueError(f"{where}: lambdas must name one lambda or more, each once")
        size_error = fargate_size_error(self.cpu, self.memory_mib)
        if size_error:
            raise ValueError(f"{where}: {size_error}")
        clashes = sorted((set(self.environment) | set(self.secrets)) & RESERVED_ENVIRONMENT)
        if clashes:
            raise ValueError(f"{where}: environment/secrets set {clashes}, which the framework sets itself")
        both = sorted(set(self.environment) & set(self.secrets))
        if both:
            raise ValueError(f"{where}: {both} both in environment and in secrets")

    @property
    def has_image(self) -> bool:
        return self.image is not None
