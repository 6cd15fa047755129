"""AtfEnvironment: the one construct a team's CDK app uses to deploy the framework.

It takes the stack configuration (atf_core.config.StackConfig: lambdas, priorities, limits,
timeouts) and a list of worker services (atf_cdk.service.WorkerService), and builds the task
table, the store consumer and the frontend API (Lambda functions on the core layer), a nested
stack per worker service (its lambdas' queues, its ECS service scaled on its backlog, their
alarms), and the alarm topic and dashboard. Place it in a stack of your own, or use
atf_cdk.stack.AtfStack, a stack holding one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from aws_cdk import Duration
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct

from atf_cdk.builders import allow_logs_service, encryption_key
from atf_cdk.constructs.consumer import StoreConsumer, consumer_timeout, reserved_concurrency
from atf_cdk.constructs.frontend import ApiProps, FrontendApi
from atf_cdk.constructs.function import FunctionProps
from atf_cdk.constructs.layer import CoreLayer
from atf_cdk.constructs.observability import Observability, ObservabilityProps
from atf_cdk.constructs.queues import TaskQueue, grant_consumer
from atf_cdk.constructs.table import TaskTable
from atf_cdk.constructs.workers import WorkerNetwork
from atf_cdk.options import ApiSettings, ConsumerSettings, NetworkSettings
from atf_cdk.service import WorkerService
from atf_cdk.service_stack import EnvironmentParts, ServiceStack
from atf_core import sizing
from atf_core.access import Kind, grant_patterns
from atf_core.config import StackConfig

FRONTEND_TIMEOUT = Duration.seconds(29)  # API Gateway's own integration limit
# grant_use / grant_operate on every lambda (the same as naming none).
ALL_LAMBDAS = "*"


@dataclass(frozen=True)
class AtfProps:
    """`stage` names the API's stage (e.g. the environment: dev, prod). `vpc` (and `subnets` in it) puts
    the worker hosts in a VPC of the team's instead of the one the construct builds (`network`)."""

    config: StackConfig
    workers: Sequence[WorkerService]
    stage: str = "v1"
    consumer: ConsumerSettings = field(default_factory=ConsumerSettings)
    api: ApiSettings = field(default_factory=ApiSettings)
    network: NetworkSettings = field(default_factory=NetworkSettings)
    vpc: ec2.IVpc | None = None
    subnets: ec2.SubnetSelection | None = None
    retain_data: bool = True
    log_retention_days: int = 30
    start_lag_objective_ms: int = 5000
    alarm_emails: Sequence[str] = ()

    def __post_init__(self) -> None:
        check_props(self)

    @property
    def consumer_groups(self) -> int:
        """consumer.groups, or as many as the lambdas' planned rates need at the consumer's memory."""
        if self.consumer.groups is not None:
            return self.consumer.groups
        return sizing.consumer_groups_for(self.config.planned_rate, self.consumer.memory_mib)


def check_props(props: AtfProps) -> None:
    """Mistakes refused before anything is synthesized, each naming the field at fault."""
    served: dict[str, str] = {}
    for service in props.workers:
        for name in service.lambdas:
            if name in served:
                raise ValueError(f"workers: lambda {name!r} is served by both {served[name]!r} and {service.name!r}")
            served[name] = service.name
    missing = sorted(set(props.config.lambdas) - set(served))
    unknown = sorted(set(served) - set(props.config.lambdas))
    if missing or unknown:
        raise ValueError(f"workers must serve exactly the configured lambdas (missing {missing}, unknown {unknown})")
    names = [service.name for service in props.workers]
    if len(set(names)) != len(names):
        raise ValueError(f"workers: two services share a name in {names}")
    config = props.config
    most_shards = max((config.shards_of(name) for name in config.lambdas), default=config.shards)
    groups = props.consumer_groups
    if groups > most_shards and props.consumer.groups is not None:
        raise ValueError(f"consumer.groups ({groups}) exceeds the most shards any lambda has ({most_shards})")
    if groups > most_shards:
        raise ValueError(
            f"consumer.memory_mib: {config.planned_rate:g} tasks/s need {groups} consumer groups at"
            f" {props.consumer.memory_mib} MiB, more than the {most_shards} shards a group polls at least one of:"
            f" give the consumer {sizing.LAMBDA_MB_PER_VCPU} MiB (a full vCPU) or set consumer.groups"
        )
    if groups > sizing.most_consumer_groups():
        raise ValueError(
            f"consumer.groups: {groups} groups reserve {reserved_concurrency(groups)} Lambda executions, more than"
            f" an account's default concurrency leaves ({sizing.most_consumer_groups()} groups): spread the lambdas"
            " over more environments, or raise the quota and set consumer.groups"
        )
    if props.subnets is not None and props.vpc is None:
        raise ValueError("subnets: name them together with the vpc they are in")


class AtfEnvironment(Construct):
    def __init__(self, scope: Construct, id: str, props: AtfProps) -> None:
        super().__init__(scope, id)
        self.props = props
        config = props.config
        retain = props.retain_data
        # Task data (table, queues) and operational data (logs, alarm notices) under
        # separate keys, so the services that write logs and alarms never get the data key.
        self.data_key = encryption_key(self, "DataKey", purpose="task table and queues", retain=retain)
        self.ops_key = encryption_key(self, "OpsKey", purpose="logs and alarm notifications", retain=retain)
        allow_logs_service(self.ops_key)

        self.table = TaskTable(self, "Tasks", config=config, key=self.data_key, retain=retain)
        self.layer = CoreLayer(self, "Core")
        self.consumer = self._consumer()
        self.frontend = self._frontend()
        self.network = self._network()
        self.observability = self._observability()
        self.services = self._services()
        grant_consumer(self.consumer, self.consumer.handler.role, self.queues, self.data_key)
        self.observability.add_dashboard(
            [alarm for stack in self.services.values() for group in stack.alarms for alarm in group.alarms],
            [stack.worker.view for stack in self.services.values()],
        )

    def grant_transactional_schedule(self, grantee: iam.IGrantable) -> None:
        """Let a team's role (its service's) schedule tasks inside its own DynamoDB transactions (atf_sdk.transaction).
        The role must be in this environment's account; the transaction runs in its region (docs/transactions.md)."""
        self.table.grant_transactional_schedule(grantee)

    def grant_use(self, grantee: iam.IGrantable, *lambda_names: str) -> iam.Grant:
        """Let a role schedule tasks of these lambdas, read them, their statistics and dead letters through the
        API (no names, or ALL_LAMBDAS: every lambda, and the routes that name none). docs/api.md lists the routes."""
        return self._grant_invoke("use", grantee, lambda_names)

    def grant_operate(self, grantee: iam.IGrantable, *lambda_names: str) -> iam.Grant:
        """Let a role steer these lambdas through the API: gates, cancel, change and bulk changes, redrive and
        discard, periodic schedules, chains (no names, or ALL_LAMBDAS: every lambda, and the routes that name
        none). It does not include use: grant both for a team that schedules and steers."""
        return self._grant_invoke("operate", grantee, lambda_names)

    def _grant_invoke(self, kind: Kind, grantee: iam.IGrantable, lambda_names: Sequence[str]) -> iam.Grant:
        known = self.props.config.lambdas
        unknown = sorted(set(lambda_names) - set(known) - {ALL_LAMBDAS})
        if unknown:
            raise ValueError(f"grant_{kind}: no lambda {', '.join(map(repr, unknown))} in this environment's config")
        every = not lambda_names or ALL_LAMBDAS in lambda_names
        return self.frontend.grant_invoke(grantee, grant_patterns(kind, known if every else lambda_names, every))

    @property
    def queues(self) -> list[TaskQueue]:
        return [queue for stack in self.services.values() for queue in stack.queues.queues]

    def _consumer(self) -> StoreConsumer:
        settings = self.props.consumer
        groups = self.props.consumer_groups
        reserved = reserved_concurrency(groups) if settings.reserve_concurrency else None
        timeout = consumer_timeout(self.props.config.poll_interval)
        return StoreConsumer(
            self,
            "Consumer",
            function=self._function("consumer", settings.memory_mib, timeout, reserved),
            groups=groups,
            table=self.table,
        )

    def _frontend(self) -> FrontendApi:
        props = self.props
        return FrontendApi(
            self,
            "Frontend",
            function=self._function("frontend", props.api.memory_mib, FRONTEND_TIMEOUT, None),
            api=ApiProps(
                stage=props.stage,
                throttle_rate=props.api.throttle_rate,
                throttle_burst=props.api.throttle_burst,
                log_key=self.ops_key,
                log_retention_days=props.log_retention_days,
                retain_logs=props.retain_data,
            ),
            table=self.table,
        )

    def _observability(self) -> Observability:
        return Observability(
            self,
            "Observability",
            ObservabilityProps(
                config=self.props.config,
                table=self.table,
                consumer=self.consumer.function,
                frontend=self.frontend.function,
                consumer_groups=self.props.consumer_groups,
                objective_ms=self.props.start_lag_objective_ms,
                alarm_key=self.ops_key,
                alarm_emails=list(self.props.alarm_emails),
            ),
        )

    def _function(self, name: str, memory: int, timeout: Duration, reserved: int | None) -> FunctionProps:
        return FunctionProps(
            name=name,
            config=self.props.config,
            layer=self.layer.layer,
            log_key=self.ops_key,
            log_retention_days=self.props.log_retention_days,
            retain_logs=self.props.retain_data,
            memory_mib=memory,
            timeout=timeout,
            reserved_concurrency=reserved,
            # The consumer's ticks are not worth retrying: the next one comes within a minute.
            max_event_age=Duration.minutes(1) if name == "consumer" else None,
            retry_attempts=0 if name == "consumer" else None,
        )

    def _network(self) -> WorkerNetwork:
        props = self.props
        return WorkerNetwork(
            self,
            "Workers",
            cluster_name=f"{props.config.name}-workers",
            network=props.network,
            log_key=self.ops_key,
            log_retention_days=props.log_retention_days,
            retain_logs=props.retain_data,
            vpc=props.vpc,
            subnets=props.subnets,
        )

    def _services(self) -> dict[str, ServiceStack]:
        props = self.props
        parts = EnvironmentParts(
            config=props.config,
            table=self.table,
            data_key=self.data_key,
            ops_key=self.ops_key,
            network=self.network,
            topic=self.observability.topic,
            objective_ms=props.start_lag_objective_ms,
            log_retention_days=props.log_retention_days,
            retain=props.retain_data,
            consumer_groups=props.consumer_groups,
        )
        return {
            service.name: ServiceStack(self, f"Worker-{service.name}", service=service, env=parts)
            for service in props.workers
        }
