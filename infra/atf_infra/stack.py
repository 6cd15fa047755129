"""One environment of the framework: the stack `cdk deploy -c env=<name>` creates, with a nested
stack per lambda (lambda_stack.py) and, before it, the account's own stack (account.py)."""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, Environment, Stack, Tags
from constructs import Construct

from atf_core.definitions import queue_specs
from atf_infra.builders import allow_logs_service, encryption_key
from atf_infra.constructs.consumer import StoreConsumer, consumer_timeout, reserved_concurrency
from atf_infra.constructs.frontend import ApiProps, FrontendApi
from atf_infra.constructs.function import FunctionProps
from atf_infra.constructs.layer import CoreLayer
from atf_infra.constructs.observability import Observability, ObservabilityProps
from atf_infra.constructs.queues import TaskQueue, grant_consumer
from atf_infra.constructs.table import TaskTable
from atf_infra.constructs.workers import WorkerNetwork
from atf_infra.lambda_stack import EnvironmentParts, LambdaStack
from atf_infra.settings import EnvironmentSettings

FRONTEND_TIMEOUT = Duration.seconds(29)  # API Gateway's own integration limit


class AtfStack(Stack):
    def __init__(self, scope: Construct, settings: EnvironmentSettings) -> None:
        super().__init__(
            scope,
            settings.stack_name,
            env=Environment(account=settings.account, region=settings.region),
            description=f"Async task framework, environment {settings.environment}",
            termination_protection=settings.retain_data,
        )
        Tags.of(self).add("atf:environment", settings.environment)
        self.settings = settings
        config = settings.config
        retain = settings.retain_data
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
        self.lambdas = self._lambdas()
        grant_consumer(self.consumer, self.consumer.handler.role, self.queues, self.data_key)
        self.observability.add_dashboard(
            [alarm for stack in self.lambdas.values() for alarm in stack.alarms.alarms], queue_specs(config)
        )
        self._outputs()

    @property
    def queues(self) -> list[TaskQueue]:
        return [queue for stack in self.lambdas.values() for queue in stack.queues.queues]

    def _consumer(self) -> StoreConsumer:
        settings = self.settings.consumer
        reserved = reserved_concurrency(settings.groups) if settings.reserve_concurrency else None
        timeout = consumer_timeout(self.settings.config.poll_interval)
        return StoreConsumer(
            self,
            "Consumer",
            function=self._function("consumer", settings.memory_mib, timeout, reserved),
            groups=settings.groups,
            table=self.table,
        )

    def _frontend(self) -> FrontendApi:
        settings = self.settings
        return FrontendApi(
            self,
            "Frontend",
            function=self._function("frontend", settings.api.memory_mib, FRONTEND_TIMEOUT, None),
            api=ApiProps(
                stage=settings.environment,
                throttle_rate=settings.api.throttle_rate,
                throttle_burst=settings.api.throttle_burst,
                log_key=self.ops_key,
                log_retention_days=settings.log_retention_days,
                retain_logs=settings.retain_data,
            ),
            table=self.table,
        )

    def _observability(self) -> Observability:
        return Observability(
            self,
            "Observability",
            ObservabilityProps(
                config=self.settings.config,
                table=self.table,
                consumer=self.consumer.function,
                frontend=self.frontend.function,
                objective_ms=self.settings.start_lag_objective_ms,
                alarm_key=self.ops_key,
                alarm_emails=list(self.settings.alarm_emails),
            ),
        )

    def _function(self, name: str, memory: int, timeout: Duration, reserved: int | None) -> FunctionProps:
        return FunctionProps(
            name=name,
            config=self.settings.config,
            layer=self.layer.layer,
            log_key=self.ops_key,
            log_retention_days=self.settings.log_retention_days,
            retain_logs=self.settings.retain_data,
            memory_mib=memory,
            timeout=timeout,
            reserved_concurrency=reserved,
            # The consumer's ticks are not worth retrying: the next one comes within a minute.
            max_event_age=Duration.minutes(1) if name == "consumer" else None,
            retry_attempts=0 if name == "consumer" else None,
        )

    def _network(self) -> WorkerNetwork:
        settings = self.settings
        return WorkerNetwork(
            self,
            "Workers",
            cluster_name=f"{settings.config.name}-workers",
            network=settings.network,
            log_key=self.ops_key,
            log_retention_days=settings.log_retention_days,
            retain_logs=settings.retain_data,
        )

    def _lambdas(self) -> dict[str, LambdaStack]:
        settings = self.settings
        parts = EnvironmentParts(
            config=settings.config,
            table=self.table,
            data_key=self.data_key,
            ops_key=self.ops_key,
            network=self.network,
            topic=self.observability.topic,
            objective_ms=settings.start_lag_objective_ms,
            log_retention_days=settings.log_retention_days,
            retain=settings.retain_data,
        )
        return {
            name: LambdaStack(self, f"Lambda-{name}", lambda_name=name, worker=worker, env=parts)
            for name, worker in settings.workers.items()
        }

    def _outputs(self) -> None:
        dashboard = self.observability.dashboard.dashboard_name
        CfnOutput(self, "ApiUrl", value=self.frontend.url, description="Base URL of the frontend API (SigV4-signed)")
        CfnOutput(self, "TableName", value=self.table.table.table_name, description="The task table")
        CfnOutput(
            self,
            "DashboardUrl",
            value=f"https://{self.region}.console.aws.amazon.com/cloudwatch/home?region={self.region}"
            f"#dashboards/dashboard/{dashboard}",
            description="The environment's CloudWatch dashboard",
        )
        CfnOutput(self, "AlarmTopicArn", value=self.observability.topic.topic_arn, description="Alarm notifications")
        CfnOutput(
            self,
            "WorkerCluster",
            value=self.network.cluster.cluster_name,
            description="ECS cluster of the worker hosts",
        )
