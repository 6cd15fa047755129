"""Everything one worker service adds to an environment, in a nested stack of its own: the queues of
the lambdas it serves, its ECS service and scaling, and those lambdas' alarms.

CloudFormation takes at most 500 resources in a stack, and a lambda brings some twenty
(a queue, a dead-letter queue, two queue policies and two alarms per priority; a service,
its task definition, two roles and their policies, a log group, its scaling): in one stack,
a few dozen lambdas would be the ceiling. A nested stack per service (one per lambda in this
repository's environments) keeps the environment's own stack the same size however many
there are, and adding one adds a stack without touching the others' resources.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import NestedStack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from atf_cdk.constructs.observability import LambdaAlarms
from atf_cdk.constructs.queues import TaskQueues
from atf_cdk.constructs.table import TaskTable
from atf_cdk.constructs.workers import WorkerFleet, WorkerNetwork, WorkerProps
from atf_cdk.service import WorkerService
from atf_core.config import StackConfig
from atf_core.definitions import queue_specs


@dataclass(frozen=True)
class EnvironmentParts:
    """What every worker service's stack uses from the environment's."""

    config: StackConfig
    table: TaskTable
    data_key: kms.IKey
    ops_key: kms.IKey
    network: WorkerNetwork
    topic: sns.ITopic
    objective_ms: int
    log_retention_days: int
    retain: bool
    consumer_groups: int


class ServiceStack(NestedStack):
    def __init__(self, scope: Construct, id: str, *, service: WorkerService, env: EnvironmentParts) -> None:
        lambdas = ", ".join(service.lambdas)
        super().__init__(scope, id, description=f"{env.config.name}: worker service {service.name} ({lambdas})")
        specs = [spec for spec in queue_specs(env.config) if spec.lambda_name in service.lambdas]
        self.queues = TaskQueues(self, "Queues", specs=specs, key=env.data_key)
        self.worker = WorkerFleet(
            self,
            "Worker",
            WorkerProps(
                service=service,
                config=env.config,
                network=env.network,
                table=env.table,
                queues=self.queues,
                consumer_groups=env.consumer_groups,
                log_key=env.ops_key,
                log_retention_days=env.log_retention_days,
                retain_logs=env.retain,
            ),
        )
        self.alarms = [
            LambdaAlarms(
                self,
                f"Alarms-{name}" if len(service.lambdas) > 1 else "Alarms",
                lambda_name=name,
                priorities=env.config.lambdas[name].priorities,
                queues=[q for q in self.queues.queues if q.spec.lambda_name == name],
                objective_ms=env.objective_ms,
                topic=env.topic,
                namespace=env.config.metrics_namespace,
            )
            for name in service.lambdas
        ]
