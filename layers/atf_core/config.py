"""Configuration of one deployed (or local) framework: names, shards, timeouts, lambdas.

The same model is read by the Lambda functions (from a file in their code,
named by ATF_CONFIG_FILE: Lambda's 4 KB of environment would cap the number of
lambdas), the worker hosts (ATF_CONFIG, inline JSON), the local stack and the
CDK app, so a value means one thing everywhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from atf_core.aws import HEARTBEAT_CALL_BUDGET_S
from atf_core.errors import UnknownLambda
from atf_core.schema import NAME_PATTERN, TimeoutSeconds

CONFIG_ENV = "ATF_CONFIG"
CONFIG_FILE_ENV = "ATF_CONFIG_FILE"
# The lambdas (comma-separated) a worker host serves by default; the CDK app sets it on each worker service.
LAMBDA_ENV = "ATF_LAMBDA"
# Where Lambda unpacks a function's code; a relative ATF_CONFIG_FILE is taken from there.
TASK_ROOT_ENV = "LAMBDA_TASK_ROOT"
# Heartbeats that may fail in a row before an executor ends itself.
MISSES_ALLOWED = 3


class Limits(BaseModel):
    """Caps enforced across all worker hosts through the store."""

    model_config = ConfigDict(extra="forbid")

    max_starts_per_second: float | None = Field(default=None, gt=0, le=10_000)
    max_running: int | None = Field(default=None, ge=1, le=10_000)


class LambdaSpec(BaseModel):
    """A callback type: its priorities (highest first) and scheduling budget."""

    model_config = ConfigDict(extra="forbid")

    priorities: list[str] = Field(default_factory=lambda: ["high", "normal", "low"], min_length=1)
    default_priority: str = "normal"
    max_attempts: int = Field(default=5, ge=1, le=100)
    shards: int | None = Field(default=None, ge=1, le=256, description="Index shards per priority.")
    dead_letter: bool = Field(default=True, description="Failed tasks wait as dead letters instead of ending.")
    limits: Limits = Field(default_factory=Limits, description="For the whole lambda.")
    collection_limits: dict[str, Limits] = Field(default_factory=dict, description="Per collection.")
    timeout_seconds: TimeoutSeconds | None = Field(
        default=None, description="An attempt's time limit, unless its task sets its own; none: no limit."
    )

    def time_limit(self, task_timeout: float | None) -> float | None:
        """The time limit of an attempt: its task's own, else this lambda's (None: no limit)."""
        return task_timeout if task_timeout is not None else self.timeout_seconds

    @model_validator(mode="after")
    def _default_is_declared(self) -> LambdaSpec:
        if self.default_priority not in self.priorities:
            raise ValueError(f"default_priority {self.default_priority!r} is not in {self.priorities}")
        if len(set(self.priorities)) != len(self.priorities):
            raise ValueError("priorities must be distinct")
        return self


class Timeouts(BaseModel):
    """ATF's timeouts, in seconds.

    The heartbeat timeout must exceed the lease floor: an executor whose
    heartbeats fail kills itself before the consumer may hand its task to
    someone else.
    """

    model_config = ConfigDict(extra="forbid")

    enqueue: float = Field(default=120.0, gt=0)
    claim: float = Field(default=30.0, gt=0)
    heartbeat_interval: float = Field(default=5.0, gt=0)
    heartbeat: float = Field(default=30.0, gt=0)
    backoff_base: float = Field(default=2.0, gt=0)
    backoff_max: float = Field(default=300.0, gt=0)

    @property
    def call_budget(self) -> float:
        return HEARTBEAT_CALL_BUDGET_S

    @property
    def lease_floor(self) -> float:
        """How long an executor can go without a successful heartbeat before it kills itself: the misses
        allowed in a row, and the longest the last of them can take. The consumer re-enqueues a running
        task only once it has watched its stamp stay unchanged this long (atf_core.consumer.deadlines)."""
        return MISSES_ALLOWED * self.heartbeat_interval + self.call_budget

    @model_validator(mode="after")
    def _leases_outlast_self_termination(self) -> Timeouts:
        if self.heartbeat <= self.lease_floor:
            raise ValueError(
                f"timeouts.heartbeat ({self.heartbeat}s) must exceed {MISSES_ALLOWED} x heartbeat_interval "
                f"+ the heartbeat call's retry budget ({self.call_budget}s) = {self.lease_floor}s"
            )
        if self.claim < self.heartbeat:
            raise ValueError("timeouts.claim must be at least timeouts.heartbeat")
        return self


class StackConfig(BaseModel):
    """One environment of the framework."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="atf", pattern=r"^[a-z][a-z0-9-]{0,20}$")
    table_name: str = "atf-tasks"
    shards: int = Field(default=4, ge=1, le=256, description="Default index shards per (lambda, priority).")
    poll_interval: float = Field(default=1.0, gt=0)
    lookahead: float = Field(default=1.0, ge=0, description="Enqueue tasks this early; workers hold them.")
    due_soon_window: float = Field(
        default=300.0,
        ge=0,
        le=3600,
        description=(
            "Seconds ahead the consumer counts waiting tasks (TasksDueSoon), which worker services scale out ahead"
            " of; 0 counts nothing."
        ),
    )
    max_in_flight_per_queue: int = Field(default=200, ge=10)
    enqueue_per_poll: int = Field(
        default=50, ge=10, description="Most tasks one queue gets per pass: a backlog cannot hold up other queues."
    )
    record_enqueued: bool = Field(
        default=False,
        description=(
            "Write status enqueued when the consumer sends a task (ATF's literal table): one more write unit a task"
            " and a conditional write per task in the consumer. Off, the claim is the first write after scheduling."
        ),
    )
    page_size: int = Field(default=200, ge=10, le=1000)
    retention_days: int = Field(default=30, ge=1)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    lambdas: dict[str, LambdaSpec] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _lambda_names(self) -> StackConfig:
        import re

        for name in self.lambdas:
            if not re.match(NAME_PATTERN, name):
                raise ValueError(f"lambda name {name!r} must match {NAME_PATTERN}")
        return self

    def lambda_named(self, name: str) -> LambdaSpec:
        """The lambda of that name; UnknownLambda, naming the field and the lambdas there are, if none."""
        spec = self.lambdas.get(name)
        if spec is None:
            raise UnknownLambda(f"unknown lambda {name!r}; known: {sorted(self.lambdas)}", "lambda")
        return spec

    def shards_of(self, lambda_name: str) -> int:
        return self.lambdas[lambda_name].shards or self.shards

    def to_env(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_env(cls) -> StackConfig:
        """The configuration handed to a process: inline JSON, or a file path (relative ones from
        LAMBDA_TASK_ROOT where it is set, as on Lambda, else from the working directory)."""
        inline = os.environ.get(CONFIG_ENV)
        if inline:
            return cls.model_validate_json(inline)
        path = os.environ.get(CONFIG_FILE_ENV)
        if path:
            return cls.from_file(Path(os.environ.get(TASK_ROOT_ENV, ".")) / path)
        raise RuntimeError(f"set {CONFIG_ENV} (JSON) or {CONFIG_FILE_ENV} (a path)")

    @classmethod
    def from_file(cls, path: Path) -> StackConfig:
        return cls.model_validate(json.loads(path.read_text()))
