"""This repository's environments: infra/environments/<env>.json, read into the construct's props.

Each file holds the framework's StackConfig plus how to run it on AWS; `cdk deploy -c env=<env>`
picks one (atf_cdk.app). The StackConfig part is handed unchanged to every Lambda function (a
file in its code, ATF_CONFIG_FILE) and worker host (ATF_CONFIG), so a value means the same
thing to the code and to the infrastructure built around it. A team's own app may read its
settings the same way or build atf_cdk.AtfProps in Python.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from aws_cdk import aws_iam as iam
from pydantic import Field, model_validator

from atf_cdk.account import ACCOUNT_STACK_NAME
from atf_cdk.environment import AtfProps, check_props
from atf_cdk.options import ApiSettings, ConsumerSettings, NetworkSettings, Strict
from atf_cdk.service import Scaling, SecretRef, WorkerService, fargate_size_error
from atf_core.config import StackConfig

ENVIRONMENTS_DIR = Path(__file__).resolve().parent.parent / "environments"
ENV_NAME_PATTERN = r"^[a-z][a-z0-9-]{0,20}$"


class SecretSettings(Strict):
    secrets_manager: str | None = None
    ssm: str | None = None
    field: str | None = None
    kms_key: str | None = Field(default=None, description="The customer-managed KMS key's ARN, if it has one.")


class WorkerSettings(Strict):
    """A worker service (atf_cdk.service.WorkerService) as a file gives it."""

    lambdas: list[str] | None = Field(default=None, min_length=1, description="Default: the service's own name.")
    image: str | None = Field(
        default=None,
        description=(
            "A container image: 'repository:tag' names an ECR repository in the deploying account "
            "(atf-workers, the account stack's, or your own); a full reference (registry/host/repo:tag or "
            "@digest) is pulled from that registry. Without one the service runs no task until one is given."
        ),
    )
    command: list[str] | None = Field(
        default=None,
        description=(
            "Overrides the image's CMD. Not needed to pick the lambdas: the service sets ATF_LAMBDA to them, "
            "which `atf worker module:lambdas` serves by default (--only overrides it)."
        ),
    )
    environment: dict[str, str] = Field(default_factory=dict)
    secrets: dict[str, SecretSettings] = Field(default_factory=dict)
    managed_policies: list[str] = Field(default_factory=list, description="ARNs or AWS-managed policy names.")
    policy_statements: list[dict[str, Any]] = Field(default_factory=list, description="IAM statements, as JSON.")
    cpu: Literal[256, 512, 1024, 2048, 4096, 8192, 16384] = 512
    memory_mib: int = Field(default=1024, ge=512, le=122880)
    architecture: Literal["x86_64", "arm64"] = "x86_64"
    min_tasks: int = Field(default=1, ge=0, le=1000, description="0: no task while nothing is queued or due.")
    max_tasks: int = Field(default=10, ge=0, le=1000)
    backlog_per_task: int = Field(default=50, ge=1, description="Queued + in flight + due soon, per running task.")
    acknowledgements: dict[str, str] = Field(default_factory=dict, description="cdk-nag rule -> reason.")

    @model_validator(mode="after")
    def _fargate_size(self) -> WorkerSettings:
        # Fargate accepts only some cpu/memory pairs; failing here beats a failed deployment.
        size_error = fargate_size_error(self.cpu, self.memory_mib)
        if size_error:
            raise ValueError(size_error)
        if self.min_tasks > self.max_tasks:
            raise ValueError(f"min_tasks ({self.min_tasks}) exceeds max_tasks ({self.max_tasks})")
        return self

    def service(self, name: str) -> WorkerService:
        return WorkerService(
            name=name,
            lambdas=self.lambdas or [name],
            image=self.image,
            command=self.command,
            environment=self.environment,
            secrets={var: SecretRef(**ref.model_dump()) for var, ref in self.secrets.items()},
            policy_statements=[iam.PolicyStatement.from_json(statement) for statement in self.policy_statements],
            managed_policies=self.managed_policies,
            cpu=self.cpu,
            memory_mib=self.memory_mib,
            architecture=self.architecture,
            scaling=Scaling(min_tasks=self.min_tasks, max_tasks=self.max_tasks, backlog_per_task=self.backlog_per_task),
            acknowledgements=self.acknowledgements,
        )


class EnvironmentSettings(Strict):
    """Everything `cdk deploy -c env=<name>` needs for one environment."""

    environment: str = Field(pattern=ENV_NAME_PATTERN)
    account: str | None = Field(default=None, pattern=r"^\d{12}$")
    region: str | None = Field(default=None, pattern=r"^[a-z]{2}(-[a-z]+)+-\d$")
    config: StackConfig
    workers: dict[str, WorkerSettings]
    consumer: ConsumerSettings = Field(default_factory=ConsumerSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    network: NetworkSettings = Field(default_factory=NetworkSettings)
    retain_data: bool = Field(default=True, description="Keep the table and keys when the stack is deleted.")
    log_retention_days: int = Field(default=30, ge=1)
    start_lag_objective_ms: int = Field(default=5000, ge=1)
    alarm_emails: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> EnvironmentSettings:
        check_props(self.props())
        # Queue, table and stack names all derive from these, so two environments
        # deployed to one account can never take over each other's resources.
        name = self.config.name
        if name == ACCOUNT_STACK_NAME:
            raise ValueError(f"config.name {name!r} is the account stack's; choose another")
        if name != self.environment and not name.endswith(f"-{self.environment}"):
            raise ValueError(f"config.name ({name!r}) must be {self.environment!r} or end with '-{self.environment}'")
        if not self.config.table_name.startswith(name):
            raise ValueError(f"config.table_name ({self.config.table_name!r}) must start with config.name ({name!r})")
        zones = self.network.availability_zones or []
        if self.region and any(not zone.startswith(self.region) for zone in zones):
            raise ValueError(f"network.availability_zones {zones} are not all in {self.region}")
        for email in self.alarm_emails:
            if not re.match(r"^[^@\s]+@[^@\s]+\.[^@\s]+$", email):
                raise ValueError(f"alarm_emails: {email!r} is not an address")
        return self

    @property
    def stack_name(self) -> str:
        return self.config.name

    def services(self) -> list[WorkerService]:
        return [settings.service(name) for name, settings in self.workers.items()]

    def props(self) -> AtfProps:
        return AtfProps(
            config=self.config,
            workers=self.services(),
            stage=self.environment,
            consumer=self.consumer,
            api=self.api,
            network=self.network,
            retain_data=self.retain_data,
            log_retention_days=self.log_retention_days,
            start_lag_objective_ms=self.start_lag_objective_ms,
            alarm_emails=self.alarm_emails,
        )


def available_environments(directory: Path = ENVIRONMENTS_DIR) -> list[str]:
    return sorted(path.stem for path in directory.glob("*.json"))


def load_environment(name: str, directory: Path = ENVIRONMENTS_DIR) -> EnvironmentSettings:
    path = directory / f"{name}.json"
    if not path.is_file():
        raise SystemExit(f"no environment {name!r}: choose one of {available_environments(directory)} with -c env=NAME")
    settings = EnvironmentSettings.model_validate(json.loads(path.read_text()))
    if settings.environment != name:
        raise SystemExit(f"{path} declares environment {settings.environment!r}, not {name!r}")
    return settings
