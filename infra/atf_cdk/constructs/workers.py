"""Worker hosts: per worker service (atf_cdk.service.WorkerService), an ECS Fargate service running the
owner's image, scaled on its backlog (constructs/scaling.py).

Each service's task role reaches only its own lambdas' queues, plus what the owner grants it for
their callbacks (policy statements, managed policies) and the secrets it names. On the table it
may get, batch-get and update items; IAM cannot narrow that further to the
lambda's own tasks (task ids are random, so dynamodb:LeadingKeys has nothing to
match, and no condition key sees an item's attributes), so the fencing of every
transition in atf_core's store is what keeps a host to the tasks it claimed.

Each host's container is health-checked (HEALTH_CHECK): ECS replaces a host whose receivers or
executor pools are dead for good while its process lives on.

A service without an image yet is deployed all the same, at 0 tasks, its task
definition naming a tag of the account's repository that no build has: the stack
deploys before any image is pushed, and naming the image later starts the hosts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from aws_cdk import Annotations, Duration, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from atf_cdk.account import WORKER_REPOSITORY
from atf_cdk.builders import log_group
from atf_cdk.constructs.queues import TaskQueues
from atf_cdk.constructs.scaling import BacklogScaling, ServiceView, worker_log_group_name
from atf_cdk.constructs.table import TaskTable
from atf_cdk.nag import acknowledge
from atf_cdk.options import NetworkSettings
from atf_cdk.service import SecretRef, WorkerService
from atf_core.config import CONFIG_ENV, StackConfig
from atf_core.telemetry import METRICS_NAMESPACE_ENV, SERVICE_NAME_ENV
from atf_core.vocabulary import LAMBDA_ENV

# Fargate's longest: a stopping host gets SIGTERM, stops taking tasks, and has
# this long to finish the ones it holds before SIGKILL.
STOP_TIMEOUT = Duration.seconds(120)
# The probe of a host's health (atf_sdk.worker.health): the report the host rewrites every 2 s, read with no AWS
# call; unhealthy once a receiver or an executor pool is dead for good, and ECS then replaces the task. The image's
# HEALTHCHECK says the same (examples/*Dockerfile). `python -m` over `atf worker-health`: a third of the CPU a
# probe costs. The start period covers a host's start: its table and queues reached, then up to 60 s
# (atf_sdk.worker.host.READY_WAIT_S) for its executors to connect before it writes its first report.
HEALTH_PROBE = ["python", "-m", "atf_sdk.worker.health"]
HEALTH_CHECK = ecs.HealthCheck(
    command=["CMD", *HEALTH_PROBE],
    interval=Duration.seconds(30),
    timeout=Duration.seconds(10),
    retries=3,
    start_period=Duration.seconds(90),
)
# The `service` dimension Powertools puts on the hosts' metrics, as the consumer's and the
# frontend's are "consumer" and "frontend"; the start-lag alarms name it.
WORKER_SERVICE = "worker"
_ECR_URI = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/"
    r"(?P<repository>[a-z0-9._/-]+?)(?::(?P<tag>[\w.-]+))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)
_ARCHITECTURES = {"x86_64": ecs.CpuArchitecture.X86_64, "arm64": ecs.CpuArchitecture.ARM64}
# The task definition of a service that has no image yet: never pulled, as it runs no task.
NO_IMAGE = f"{WORKER_REPOSITORY}:no-image-yet"
# ECS refuses a task definition over 64 KiB; ATF_CONFIG is nearly all of it.
TASK_DEFINITION_LIMIT_BYTES = 65536


def _is_registry_reference(image: str) -> bool:
    first = image.split("/", 1)[0]
    return "/" in image and ("." in first or ":" in first or first == "localhost")


def container_image(scope: Construct, id: str, image: str) -> ecs.ContainerImage:
    """An ECR image (in this account by repository name, or by full URI) with pull rights
    granted to the execution role; any other registry reference pulled as is."""
    match = _ECR_URI.match(image)
    if match:
        stack = Stack.of(scope)
        arn = f"arn:{stack.partition}:ecr:{match['region']}:{match['account']}:repository/{match['repository']}"
        repository = ecr.Repository.from_repository_attributes(
            scope, id, repository_arn=arn, repository_name=match["repository"]
        )
        return ecs.ContainerImage.from_ecr_repository(repository, match["digest"] or match["tag"] or "latest")
    if _is_registry_reference(image):
        return ecs.ContainerImage.from_registry(image)
    name, _, tag = image.partition(":")
    repository = ecr.Repository.from_repository_name(scope, id, name)
    return ecs.ContainerImage.from_ecr_repository(repository, tag or "latest")


def host_environment(
    config: StackConfig, lambdas: Sequence[str], region: str, own: dict[str, str] | None = None
) -> dict[str, str]:
    """What a worker host reads, and the owner's own variables. The configuration goes inline: a
    container's environment is bounded only by the task definition's 64 KiB, and the owner's image has
    no file of ours to read."""
    environment = {
        **(own or {}),
        # boto3 in the host finds its region here rather than guessing.
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        CONFIG_ENV: config.to_env(),
        SERVICE_NAME_ENV: WORKER_SERVICE,
        METRICS_NAMESPACE_ENV: config.metrics_namespace,
        # The lambdas this service is for (comma-separated): `atf worker module:lambdas` serves these by
        # default, the only ones its task role reaches; `--only` in the command overrides them.
        LAMBDA_ENV: ",".join(lambdas),
    }
    size = sum(len(k.encode()) + len(v.encode()) for k, v in environment.items())
    # Leave room for the rest of the task definition (names, ARNs, command, logging).
    if size > TASK_DEFINITION_LIMIT_BYTES - 8192:
        raise ValueError(
            f"the {','.join(lambdas)} worker's environment would take {size} bytes, too close to ECS's "
            f"{TASK_DEFINITION_LIMIT_BYTES}-byte task definition: the configuration is too large"
        )
    return environment


class WorkerNetwork(Construct):
    """Where the hosts run: the team's VPC and subnets when given, else private subnets with a way out
    (the owners' callbacks may call anything), flow logs, and free gateway endpoints so DynamoDB traffic
    skips the NAT. Then the cluster and the hosts' security group."""

    def __init__(self, scope: Construct, id: str, *, cluster_name: str, network: NetworkSettings, log_key: kms.IKey,
                 log_retention_days: int, retain_logs: bool, vpc: ec2.IVpc | None = None,
                 subnets: ec2.SubnetSelection | None = None) -> None:  # fmt: skip
        super().__init__(scope, id)
        self.cluster_name = cluster_name  # the name itself, for metrics read in other stacks
        if vpc is None:
            self.vpc: ec2.IVpc = self._vpc(network, log_key, log_retention_days, retain_logs)
            self.subnets = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        else:
            self.vpc = vpc
            self.subnets = subnets or ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        self.cluster = ecs.Cluster(
            self,
            "Cluster",
            vpc=self.vpc,
            cluster_name=cluster_name,
            # Its RunningTaskCount is what the services scale per task on.
            container_insights_v2=ecs.ContainerInsights.ENABLED,
        )
        self.security_group = ec2.SecurityGroup(
            self,
            "WorkerSecurityGroup",
            vpc=self.vpc,
            description="Worker hosts: no inbound traffic; outbound to AWS APIs and what the callbacks call",
            allow_all_outbound=True,
        )

    def _vpc(self, network: NetworkSettings, log_key: kms.IKey, days: int, retain: bool) -> ec2.Vpc:
        flow_logs = log_group(self, "FlowLogs", key=log_key, days=days, retain=retain)
        return ec2.Vpc(
            self,
            "Vpc",
            availability_zones=network.availability_zones,
            max_azs=None if network.availability_zones else network.zone_count,
            nat_gateways=network.nat_gateways,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                ec2.SubnetConfiguration(name="workers", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=20),
            ],
            gateway_endpoints={
                "DynamoDb": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.DYNAMODB),
                "S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3),
            },
            # Rejected traffic only: accepted flows would log every SQS long poll.
            flow_logs={
                "Rejected": ec2.FlowLogOptions(
                    destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs),
                    traffic_type=ec2.FlowLogTrafficType.REJECT,
                )
            },
        )


@dataclass(frozen=True)
class WorkerProps:
    service: WorkerService
    config: StackConfig
    network: WorkerNetwork
    table: TaskTable
    queues: TaskQueues  # the service's lambdas' own
    consumer_groups: int  # the look-ahead metric's emitters (constructs/scaling.py)
    log_key: kms.IKey
    log_retention_days: int
    retain_logs: bool


class WorkerFleet(Construct):
    """The ECS service of one WorkerService: task role, task definition, service and its scaling."""

    def __init__(self, scope: Construct, id: str, props: WorkerProps) -> None:
        super().__init__(scope, id)
        service = props.service
        self.service_name = f"{props.config.name}-{service.name}"
        self.task_role = iam.Role(
            self,
            "TaskRole",
            assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"),
            description=f"Worker hosts of {', '.join(service.lambdas)}: their queues, task items, the owner's grants",
        )
        props.table.grant(self.task_role, "worker")
        props.queues.grant_worker(self.task_role)
        self._owner_grants(service)
        if not service.has_image:
            # Expected on a first deploy (see docs/deploy.md), so said, not warned about.
            Annotations.of(self).add_info(
                f"worker service {service.name} names no image: it runs no task until one is given"
            )
        self.task_definition = self._task_definition(props)
        scaling = service.scaling
        self.service = ecs.FargateService(
            self,
            "Service",
            service_name=self.service_name,
            cluster=props.network.cluster,
            task_definition=self.task_definition,
            desired_count=scaling.min_tasks if service.has_image else 0,
            security_groups=[props.network.security_group],
            vpc_subnets=props.network.subnets,
            assign_public_ip=False,
            # New hosts start before old ones drain, so a deployment never stops the lambda.
            min_healthy_percent=100,
            max_healthy_percent=200,
            circuit_breaker=ecs.DeploymentCircuitBreaker(enable=True, rollback=True),
            enable_execute_command=False,
            propagate_tags=ecs.PropagatedTagSource.SERVICE,
        )
        self.view = ServiceView(
            name=service.name,
            service_name=self.service_name,
            cluster_name=props.network.cluster_name,
            lambdas=list(service.lambdas),
            queue_names=[q.spec.name for q in props.queues.queues],
            consumer_groups=props.consumer_groups,
            metrics_namespace=props.config.metrics_namespace,
            split={
                q.spec.name: props.config.queue_parts_of(q.spec.lambda_name)
                for q in props.queues.queues
                if q.spec.part == 0 and props.config.queue_parts_of(q.spec.lambda_name) > 1
            },
        )
        self.scaling = BacklogScaling(
            self, "Scaling", service=self.service, view=self.view, scaling=scaling if service.has_image else None
        )
        self._acknowledge()

    def _owner_grants(self, service: WorkerService) -> None:
        for statement in service.policy_statements:
            self.task_role.add_to_policy(statement)
        for number, policy in enumerate(service.managed_policies):
            self.task_role.add_managed_policy(_managed_policy(self, f"ManagedPolicy{number}", policy))
        for rule, reason in service.acknowledgements.items():
            acknowledge(self.task_role, rule, reason)

    def _task_definition(self, props: WorkerProps) -> ecs.FargateTaskDefinition:
        service = props.service
        task_definition = ecs.FargateTaskDefinition(
            self,
            "TaskDefinition",
            family=self.service_name,
            cpu=service.cpu,
            memory_limit_mib=service.memory_mib,
            task_role=self.task_role,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=_ARCHITECTURES[service.architecture],
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
        )
        logs = log_group(
            self, "Logs", name=worker_log_group_name(self.service_name), key=props.log_key,
            days=props.log_retention_days, retain=props.retain_logs,
        )  # fmt: skip
        image = service.image or NO_IMAGE
        task_definition.add_container(
            "Worker",
            container_name="worker",
            image=image if isinstance(image, ecs.ContainerImage) else container_image(self, "Image", image),
            command=list(service.command) if service.command is not None else None,
            stop_timeout=STOP_TIMEOUT,
            health_check=HEALTH_CHECK if service.health_check else None,
            logging=ecs.LogDrivers.aws_logs(stream_prefix=service.name, log_group=logs),
            environment=host_environment(
                props.config, service.lambdas, Stack.of(self).region, dict(service.environment)
            ),
            secrets={name: _secret(self, name, ref) for name, ref in service.secrets.items()} or None,
        )
        for statement in _secret_key_grants(service.secrets.values(), Stack.of(self).region):
            task_definition.add_to_execution_role_policy(statement)
        return task_definition

    def _acknowledge(self) -> None:
        acknowledge(
            self.task_definition,
            "AwsSolutions-ECS2",
            "The variables are the environment's non-secret configuration (table and queue names, timeouts) and "
            "the owner's non-secret settings; secrets go through the service's secrets (Secrets Manager or SSM), "
            "and AWS access comes from the task role",
        )
        acknowledge(
            self.task_definition,
            "AwsSolutions-IAM5[Resource::*]",
            "The execution role's ecr:GetAuthorizationToken has no resource-level permissions; "
            "image pulls themselves are granted on the one repository",
        )


def _managed_policy(scope: Construct, id: str, policy: iam.IManagedPolicy | str) -> iam.IManagedPolicy:
    if not isinstance(policy, str):
        return policy
    if policy.startswith("arn:"):
        return iam.ManagedPolicy.from_managed_policy_arn(scope, id, policy)
    return iam.ManagedPolicy.from_aws_managed_policy_name(policy)


def _secret_key_grants(secrets: Iterable[SecretRef | ecs.Secret], region: str) -> list[iam.PolicyStatement]:
    """kms:Decrypt on each customer-managed key the secrets name, through the services that hold them only: ECS
    reads the secrets with the execution role as the task starts, and without it the task does not start."""
    services_by_key: dict[str, set[str]] = {}
    for ref in secrets:
        if isinstance(ref, SecretRef) and ref.kms_key:
            service = "secretsmanager" if ref.secrets_manager is not None else "ssm"
            services_by_key.setdefault(ref.kms_key, set()).add(f"{service}.{region}.amazonaws.com")
    return [
        iam.PolicyStatement(
            actions=["kms:Decrypt"],
            resources=[key],
            conditions={"StringEquals": {"kms:ViaService": sorted(services)}},
        )
        for key, services in sorted(services_by_key.items())
    ]


def _secret(scope: Construct, variable: str, ref: SecretRef | ecs.Secret) -> ecs.Secret:
    if isinstance(ref, ecs.Secret):
        return ref
    id = f"Secret-{variable}"
    if ref.ssm is not None:
        parameter = ssm.StringParameter.from_secure_string_parameter_attributes(scope, id, parameter_name=ref.ssm)
        return ecs.Secret.from_ssm_parameter(parameter)
    assert ref.secrets_manager is not None
    if ref.secrets_manager.startswith("arn:"):
        secret = secretsmanager.Secret.from_secret_complete_arn(scope, id, ref.secrets_manager)
    else:
        secret = secretsmanager.Secret.from_secret_name_v2(scope, id, ref.secrets_manager)
    return ecs.Secret.from_secrets_manager(secret, ref.field)
