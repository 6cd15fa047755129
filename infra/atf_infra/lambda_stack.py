"""Everything one lambda adds to an environment, in a nested stack of its own: its queues, its
worker service and its alarms.

CloudFormation takes at most 500 resources in a stack, and a lambda brings some twenty
(a queue, a dead-letter queue, two queue policies and two alarms per priority; a service,
its task definition, two roles and their policies, a log group): in one stack, a few
dozen lambdas would be the ceiling. A nested stack per lambda keeps the environment's
own stack the same size however many lambdas there are, and adding a lambda adds a stack
without touching the others' resources.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import NestedStack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from atf_core.config import StackConfig
from atf_core.definitions import queue_specs
from atf_infra.constructs.observability import LambdaAlarms
from atf_infra.constructs.queues import TaskQueues
from atf_infra.constructs.table import TaskTable
from atf_infra.constructs.workers import WorkerNetwork, WorkerProps, WorkerService
from atf_infra.settings import WorkerSettings


@dataclass(frozen=True)
class EnvironmentParts:
    """What every lambda's stack uses from the environment's."""

    config: StackConfig
    table: TaskTable
    data_key: kms.IKey
    ops_key: kms.IKey
    network: WorkerNetwork
    topic: sns.ITopic
    objective_ms: int
    log_retention_days: int
    retain: bool


class LambdaStack(NestedStack):
    def __init__(self, scope: Construct, id: str, *, lambda_name: str, worker: WorkerSettings, env: EnvironmentParts):
        super().__init__(scope, id, description=f"{env.config.name}: lambda {lambda_name}, its queues and hosts")
        specs = [spec for spec in queue_specs(env.config) if spec.lambda_name == lambda_name]
        self.queues = TaskQueues(self, "Queues", specs=specs, key=env.data_key)
        self.worker = WorkerService(
            self,
            "Worker",
            WorkerProps(
                lambda_name=lambda_name,
                settings=worker,
                config=env.config,
                network=env.network,
                table=env.table,
                queues=self.queues,
                log_key=env.ops_key,
                log_retention_days=env.log_retention_days,
                retain_logs=env.retain,
            ),
        )
        self.alarms = LambdaAlarms(
            self,
            "Alarms",
            lambda_name=lambda_name,
            priorities=env.config.lambdas[lambda_name].priorities,
            queues=self.queues.queues,
            objective_ms=env.objective_ms,
            topic=env.topic,
        )
