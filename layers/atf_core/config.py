"""Configuration of one deployed (or local) framework: names, shards, timeouts, lambdas.

The same model is read by the Lambda functions (from a file in their code,
named by ATF_CONFIG_FILE: Lambda's 4 KB of environment would cap the number of
lambdas), the worker hosts (ATF_CONFIG, inline JSON), the local stack and the
CDK app, so a value means one thing everywhere.
"""

from __future__ import annotations

import json
import math
import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from atf_core import sizing
from atf_core.aws import HEARTBEAT_CALL_BUDGET_S
from atf_core.errors import UnknownLambda
from atf_core.schema import COLLECTION_PATTERN, NAME_PATTERN, JsonInt, JsonNumber, TimeoutSeconds
from atf_core.telemetry import namespace_of

CONFIG_ENV = "ATF_CONFIG"
CONFIG_FILE_ENV = "ATF_CONFIG_FILE"
# Where Lambda unpacks a function's code; a relative ATF_CONFIG_FILE is taken from there.
TASK_ROOT_ENV = "LAMBDA_TASK_ROOT"
# Heartbeats that may fail in a row before an executor ends itself.
MISSES_ALLOWED = 3
# Index shards per (lambda, priority): each is one query per poll, so the bound keeps a poll's queries few.
MOST_SHARDS = 1024
# Queues one (lambda, priority) may be split over: each is a receive loop on every worker host.
MOST_QUEUE_PARTS = 16
PRIORITY_PATTERN = r"^[a-z][a-z0-9_-]{0,19}$"
SQS_QUEUE_NAME_MAX = 80
# A debounced burst's quiet period and maximum delay: a day at most (a task is scheduled at most a year ahead,
# but a burst held longer than a day is a schedule, not a debounce).
MOST_DEBOUNCE_S = 86_400


class Limits(BaseModel):
    """Caps enforced across all worker hosts through the store."""

    model_config = ConfigDict(extra="forbid")

    max_starts_per_second: JsonNumber | None = Field(default=None, gt=0, le=10_000, allow_inf_nan=False)
    max_running: JsonInt | None = Field(default=None, ge=1, le=10_000)

    @property
    def caps_nothing(self) -> bool:
        return self.max_starts_per_second is None and self.max_running is None


class OverRate(StrEnum):
    """What becomes of a keyed task over its key's max_starts_per_second."""

    THROTTLE = "throttle"  # it waits for a later window (no attempt used)
    RATE_LIMIT = "rate_limit"  # it ends dropped, with the reason


class Debounce(BaseModel):
    """A burst of tasks with one flow key runs once, with the last payload, once the key has been quiet for
    quiet_seconds, and never later than max_delay_seconds after the burst's first task (atf_core.debounce)."""

    model_config = ConfigDict(extra="forbid")

    quiet_seconds: float = Field(gt=0, le=MOST_DEBOUNCE_S, description="How long the key must be quiet.")
    max_delay_seconds: float = Field(
        gt=0, le=MOST_DEBOUNCE_S, description="The latest a burst runs, after its first task (>= quiet_seconds)."
    )

    @field_validator("max_delay_seconds")
    @classmethod
    def _not_below_quiet(cls, value: float, info: ValidationInfo) -> float:
        quiet = info.data.get("quiet_seconds")
        if quiet is not None and value < quiet:
            raise ValueError(f"max_delay_seconds must be at least quiet_seconds ({quiet})")
        return value


class KeyLimits(Limits):
    """Caps per flow-control key (a task's flow_key), each key apart, across all worker hosts."""

    over_rate: OverRate = Field(
        default=OverRate.THROTTLE,
        description="Over max_starts_per_second: throttle (the task waits) or rate_limit (it ends dropped).",
    )
    singleton: bool = Field(
        default=False,
        description="One task per key at a time: while a task with the key waits or runs, a new one is refused "
        "(flow_key_busy) or, if its request says on_conflict=replace, replaces the waiting one.",
    )
    debounce: Debounce | None = Field(
        default=None,
        description="A burst of tasks with one key runs once, with the last payload, after a quiet period and "
        "never later than a maximum delay. Not with singleton (which refuses or replaces where this merges).",
    )

    @field_validator("debounce")
    @classmethod
    def _not_with_singleton(cls, value: Debounce | None, info: ValidationInfo) -> Debounce | None:
        if value is not None and info.data.get("singleton"):
            raise ValueError("debounce merges a key's burst where singleton refuses or replaces: choose one")
        return value

    @property
    def act_when_scheduled(self) -> bool:
        """Singleton and debounce decide when a task is scheduled, against the key's task before it; the
        other limits act when a task is claimed."""
        return self.singleton or self.debounce is not None

    @model_validator(mode="after")
    def _caps_something(self) -> KeyLimits:
        if self.caps_nothing and self.debounce is None and not self.singleton:
            raise ValueError("key_limits needs max_running, max_starts_per_second, singleton or debounce")
        return self


class LambdaSpec(BaseModel):
    """A callback type: its priorities (highest first) and scheduling budget."""

    model_config = ConfigDict(extra="forbid")

    # Priorities name SQS queues, metrics and CloudFormation resources: the characters all of them accept.
    priorities: list[Annotated[str, Field(pattern=PRIORITY_PATTERN)]] = Field(
        default_factory=lambda: ["high", "normal", "low"], min_length=1
    )
    default_priority: str = "normal"
    max_attempts: int = Field(default=5, ge=1, le=100)
    rate: float | None = Field(
        default=None,
        gt=0,
        le=1_000_000,
        description="Tasks/s this lambda is planned for at peak: sizes its shards, queues and the consumer groups.",
    )
    shards: int | None = Field(
        default=None, ge=1, le=MOST_SHARDS, description="Index shards per priority; default: from rate, or the stack's."
    )
    queue_parts: int | None = Field(
        default=None,
        ge=1,
        le=MOST_QUEUE_PARTS,
        description="Queues each priority is split over; default: from rate (each under half SQS's in-flight cap).",
    )
    dead_letter: bool = Field(default=True, description="Failed tasks wait as dead letters instead of ending.")
    limits: Limits = Field(default_factory=Limits, description="For the whole lambda.")
    collection_limits: dict[Annotated[str, Field(pattern=COLLECTION_PATTERN)], Limits] = Field(
        default_factory=dict, description="Per collection."
    )
    key_limits: KeyLimits | None = Field(
        default=None, description="Per flow-control key (a task's flow_key), each key apart; keyless tasks: none."
    )
    timeout_seconds: TimeoutSeconds | None = Field(
        default=None, description="An attempt's time limit, unless its task sets its own; none: no limit."
    )

    def defaults_left_out(self, priority: str | None, max_attempts: int | None) -> dict[str, str | int | None]:
        """A request's priority and max_attempts, those equal to this lambda's defaults taken as left out (None):
        the task is the same either way, so they make the same request (its fingerprint)."""
        return {
            "priority": None if priority == self.default_priority else priority,
            "max_attempts": None if max_attempts == self.max_attempts else max_attempts,
        }

    def time_limit(self, task_timeout: float | None) -> float | None:
        """The time limit of an attempt: its task's own, else this lambda's (None: no limit)."""
        return task_timeout if task_timeout is not None else self.timeout_seconds

    @model_validator(mode="after")
    def _default_is_declared(self) -> LambdaSpec:
        if self.default_priority not in self.priorities:
            raise ValueError(f"default_priority {self.default_priority!r} is not in {self.priorities}")
        if len(set(self.priorities)) != len(self.priorities):
            raise ValueError("priorities must be distinct")
        if idle := [name for name, limits in self.collection_limits.items() if limits.caps_nothing]:
            raise ValueError(f"collection_limits of {idle} need max_running or max_starts_per_second")
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
    shards: int = Field(default=4, ge=1, le=MOST_SHARDS, description="Default index shards per (lambda, priority).")
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

    @model_validator(mode="after")
    def _rates_fit_the_bounds(self) -> StackConfig:
        for name, spec in self.lambdas.items():
            if spec.rate is None:
                continue
            if spec.shards is None and sizing.shards_for(spec.rate) > MOST_SHARDS:
                raise ValueError(
                    f"lambdas.{name}.rate: {spec.rate:g} tasks/s needs {sizing.shards_for(spec.rate)} shards, more than"
                    f" {MOST_SHARDS}: spread the load over more lambdas"
                )
            parts = sizing.queue_parts_for(spec.rate, self.lookahead, self.poll_interval)
            if spec.queue_parts is None and parts > MOST_QUEUE_PARTS:
                raise ValueError(
                    f"lambdas.{name}.rate: {spec.rate:g} tasks/s needs {parts} queues per priority, more than"
                    f" {MOST_QUEUE_PARTS}: shorten the lookahead or spread the load over more lambdas"
                )
        return self

    @model_validator(mode="after")
    def _queue_names_are_distinct(self) -> StackConfig:
        # Queue names join stack, lambda, priority and split part with "-", which names may contain too:
        # ("a-b", "c") and ("a", "b-c"), or a priority "normal-1" beside a split "normal", would share a queue.
        from atf_core.definitions import queue_specs  # definitions builds on this module

        owners: dict[str, str] = {}
        for spec in queue_specs(self):
            field = f"lambdas.{spec.lambda_name}.priorities"
            for name in (spec.name, spec.dead_letter_name):
                if len(name) > SQS_QUEUE_NAME_MAX:
                    raise ValueError(
                        f"{field}: queue name {name!r} is longer than SQS's {SQS_QUEUE_NAME_MAX} characters"
                    )
                if name in owners:
                    raise ValueError(
                        f"{field}: queue name {name!r} is also {owners[name]}'s: rename a lambda or priority"
                    )
                owners[name] = f"({spec.lambda_name}, {spec.priority}, part {spec.part})"
        return self

    def lambda_named(self, name: str) -> LambdaSpec:
        """The lambda of that name; UnknownLambda, naming the field and the lambdas there are, if none."""
        spec = self.lambdas.get(name)
        if spec is None:
            raise UnknownLambda(f"unknown lambda {name!r}; known: {sorted(self.lambdas)}", "lambda")
        return spec

    def shards_of(self, lambda_name: str) -> int:
        """Set, else enough for the lambda's planned rate (never fewer than the stack's default)."""
        spec = self.lambdas[lambda_name]
        if spec.shards is not None:
            return spec.shards
        return max(self.shards, sizing.shards_for(spec.rate)) if spec.rate is not None else self.shards

    def queue_parts_of(self, lambda_name: str) -> int:
        """Set, else as many as the planned rate needs (one without a rate)."""
        spec = self.lambdas[lambda_name]
        if spec.queue_parts is not None:
            return spec.queue_parts
        return sizing.queue_parts_for(spec.rate, self.lookahead, self.poll_interval) if spec.rate is not None else 1

    def in_flight_cap_of(self, lambda_name: str) -> int:
        """The backpressure bound of each of the lambda's queues: max_in_flight_per_queue, or what its share
        of the planned rate keeps in flight, if more (a fixed bound would cap the rate at bound / seconds)."""
        spec = self.lambdas[lambda_name]
        if spec.rate is None:
            return self.max_in_flight_per_queue
        needed = sizing.in_flight_for(spec.rate, self.lookahead, self.poll_interval) / self.queue_parts_of(lambda_name)
        return max(self.max_in_flight_per_queue, math.ceil(needed))

    @property
    def metrics_namespace(self) -> str:
        """Where this environment's processes emit their metrics and its dashboard and alarms read them."""
        return namespace_of(self.name)

    @property
    def planned_rate(self) -> float:
        """The tasks/s of every lambda with a planned rate, together (0 if none has one)."""
        return sum(spec.rate or 0.0 for spec in self.lambdas.values())

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
