"""One environment's deploy settings: the framework's StackConfig plus how to run it on AWS.

Each infra/environments/<env>.json holds one of these; `cdk deploy -c env=<env>`
picks it. The StackConfig part is handed unchanged to every Lambda function (a
file in its code, ATF_CONFIG_FILE) and worker host (ATF_CONFIG), so a value means
the same thing to the code and to the infrastructure built around it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from atf_core.config import StackConfig
from atf_infra.account import ACCOUNT_STACK_NAME

ENVIRONMENTS_DIR = Path(__file__).resolve().parent.parent / "environments"
ENV_NAME_PATTERN = r"^[a-z][a-z0-9-]{0,20}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WorkerSettings(_Strict):
    """The owner's worker host for one lambda: an ECS Fargate service."""

    image: str | None = Field(
        default=None,
        description=(
            "A container image: 'repository:tag' names an ECR repository in the deploying account "
            "(atf-workers, the account stack's, or your own); a full reference (registry/host/repo:tag or "
            "@digest) is pulled from that registry. Without one the service runs no task until one is given."
        ),
    )
    command: list[str] | None = Field(default=None, description="Overrides the image's CMD.")
    desired_count: int = Field(default=1, ge=0, le=1000, description="Tasks to run once there is an image.")
    cpu: Literal[256, 512, 1024, 2048, 4096, 8192, 16384] = 512
    memory_mib: int = Field(default=1024, ge=512, le=122880)
    architecture: Literal["x86_64", "arm64"] = "x86_64"

    @property
    def running_count(self) -> int:
        """No image, no task: a service may be deployed before its image is pushed."""
        return self.desired_count if self.image else 0

    @model_validator(mode="after")
    def _fargate_size(self) -> WorkerSettings:
        # Fargate accepts only some cpu/memory pairs; failing here beats a failed deployment.
        low, high = _FARGATE_MEMORY[self.cpu]
        if not low <= self.memory_mib <= high:
            raise ValueError(f"Fargate cpu {self.cpu} takes memory_mib between {low} and {high}")
        return self


_FARGATE_MEMORY = {
    256: (512, 2048),
    512: (1024, 4096),
    1024: (2048, 8192),
    2048: (4096, 16384),
    4096: (8192, 30720),
    8192: (16384, 61440),
    16384: (32768, 122880),
}


class ConsumerSettings(_Strict):
    groups: int = Field(
        default=1, ge=1, le=64, description="Consumers per tick; group i polls shards with shard % groups == i."
    )
    memory_mib: int = Field(default=512, ge=128, le=10240)
    reserve_concurrency: bool = Field(
        default=True,
        description=(
            "Reserve 2 x groups concurrent executions (the account's quota must leave 100 unreserved, "
            "which a new account's lower quota does not: dev turns this off)."
        ),
    )


class ApiSettings(_Strict):
    throttle_rate: float = Field(default=1000, gt=0, description="Steady requests per second for the stage.")
    throttle_burst: int = Field(default=2000, ge=1)
    memory_mib: int = Field(default=512, ge=128, le=10240)


class NetworkSettings(_Strict):
    availability_zones: list[str] | None = Field(
        default=None,
        min_length=1,
        description="Zones to spread the workers over; without them a stack that names no account gets two.",
    )
    nat_gateways: int = Field(default=1, ge=1, le=6, description="Worker hosts reach the internet through these.")

    @property
    def zone_count(self) -> int:
        # CDK can look zones up only with an account and network access at synth time,
        # which the tests do not have; an environment-agnostic stack gets two.
        return len(self.availability_zones) if self.availability_zones else 2

    @model_validator(mode="after")
    def _nat_per_zone_at_most(self) -> NetworkSettings:
        if self.nat_gateways > self.zone_count:
            raise ValueError(f"nat_gateways ({self.nat_gateways}) exceeds the {self.zone_count} availability zones")
        return self


class EnvironmentSettings(_Strict):
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
        missing = sorted(set(self.config.lambdas) - set(self.workers))
        unknown = sorted(set(self.workers) - set(self.config.lambdas))
        if missing or unknown:
            raise ValueError(f"workers must name exactly the configured lambdas (missing {missing}, unknown {unknown})")
        most_shards = max((self.config.shards_of(name) for name in self.config.lambdas), default=self.config.shards)
        if self.consumer.groups > most_shards:
            raise ValueError(
                f"consumer.groups ({self.consumer.groups}) exceeds the most shards any lambda has ({most_shards})"
            )
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
