"""The environment's options besides its lambdas and worker services: the consumer, the API, the network.

Shared by the construct's props (atf_cdk.environment.AtfProps) and this repository's environment files
(atf_cdk.settings), so an option means the same whichever way it is given.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from atf_core import sizing


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ConsumerSettings(Strict):
    groups: int | None = Field(
        default=None,
        ge=1,
        le=sizing.most_consumer_groups(),
        description=(
            "Consumers per tick; group i polls shards with shard % groups == i. Default: as many as the lambdas'"
            " planned rates need at memory_mib (atf_core.sizing), one if no lambda plans a rate."
        ),
    )
    memory_mib: int = Field(default=512, ge=128, le=10240)
    reserve_concurrency: bool = Field(
        default=True,
        description=(
            "Reserve 2 x groups concurrent executions (the account's quota must leave 100 unreserved, "
            "which a new account's lower quota does not: dev turns this off)."
        ),
    )


class ApiSettings(Strict):
    throttle_rate: float = Field(default=1000, gt=0, description="Steady requests per second for the stage.")
    throttle_burst: int = Field(default=2000, ge=1)
    memory_mib: int = Field(default=512, ge=128, le=10240)


class NetworkSettings(Strict):
    """The VPC the construct builds for the worker hosts when it is given none of the team's own."""

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
