"""The assumptions `atf cost` makes, alone in a module: the verb's options default to them, and the CLI builds
every verb's options for every command, so importing them must not load the rest of atf_local.cost (the core's
models, boto3, moto)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Estimate:
    """Assumptions for what the embedded run cannot see."""

    payload_bytes: int = 200
    batch: int = 10  # tasks per scenario: 10 fills every SQS batch
    rate: float = 100.0  # tasks/s, to spread fixed costs
    tasks_per_request: int = 1  # API requests carry 1 task, or up to 100 with the batch route
    frontend_ms: float = 25.0  # assumed frontend Lambda duration per request
    frontend_mb: int = 512
    consumer_mb: int = 512
    consumer_groups: int = 1
    task_seconds: float = 60.0  # the heartbeating scenario's callback
