"""The framework's Lambda functions, built one way: the core layer, a role of their own, an
encrypted log group, X-Ray tracing, and the environment's configuration."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import BundlingOptions, DockerImage, Duration, ILocalBundling, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from atf_core.config import StackConfig
from atf_core.telemetry import NAMESPACE
from atf_infra.builders import log_group
from atf_infra.constructs.layer import ARCHITECTURE, REPO_ROOT, RUNTIME
from atf_infra.nag import acknowledge

FUNCTIONS_SOURCE = REPO_ROOT / "functions"
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")


@jsii.implements(ILocalBundling)
class CopyPackage:
    """Keeps the `functions.<name>` package path, so the handler's absolute imports work as in the tests."""

    def __init__(self, source: Path, name: str) -> None:
        self._source = source
        self._name = name

    def try_bundle(self, output_dir: str, options: Any) -> bool:
        target = Path(output_dir) / "functions"
        shutil.copytree(self._source / self._name, target / self._name, ignore=_IGNORE)
        shutil.copy2(self._source / "__init__.py", target / "__init__.py")
        return True


def function_code(name: str, source: Path = FUNCTIONS_SOURCE) -> lambda_.Code:
    return lambda_.Code.from_asset(
        str(source),
        exclude=["**/__pycache__"],
        bundling=BundlingOptions(
            image=DockerImage.from_registry("public.ecr.aws/docker/library/busybox"),
            command=[
                "sh",
                "-c",
                f"mkdir -p /asset-output/functions && cp -r __init__.py {name} /asset-output/functions/",
            ],
            local=CopyPackage(source, name),
        ),
    )


# Lambda allows 4 KB of environment variables in all; ATF_CONFIG is nearly all of it.
ENVIRONMENT_LIMIT_BYTES = 4096


def function_environment(config: StackConfig, name: str) -> dict[str, str]:
    environment = {
        "ATF_CONFIG": config.to_env(),
        "POWERTOOLS_SERVICE_NAME": f"atf-{name}",
        "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
    }
    size = sum(len(k.encode()) + len(v.encode()) for k, v in environment.items())
    if size > ENVIRONMENT_LIMIT_BYTES:
        raise ValueError(
            f"the {name} function's environment would take {size} bytes, over Lambda's {ENVIRONMENT_LIMIT_BYTES}: "
            "too many lambdas for ATF_CONFIG inline"
        )
    return environment


@dataclass(frozen=True)
class FunctionProps:
    name: str  # the package under functions/
    config: StackConfig
    layer: lambda_.ILayerVersion
    log_key: kms.IKey
    log_retention_days: int
    retain_logs: bool
    memory_mib: int
    timeout: Duration
    reserved_concurrency: int | None = None
    max_event_age: Duration | None = None
    retry_attempts: int | None = None


class AtfFunction(Construct):
    def __init__(self, scope: Construct, id: str, props: FunctionProps) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        function_name = f"{props.config.name}-{props.name}"
        logs = log_group(
            self,
            "Logs",
            name=f"/aws/lambda/{function_name}",
            key=props.log_key,
            days=props.log_retention_days,
            retain=props.retain_logs,
        )
        # A role of its own instead of AWSLambdaBasicExecutionRole: it may write to its
        # own log group and nowhere else.
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        logs.grant_write(self.role)
        self.function = lambda_.Function(
            self,
            "Function",
            function_name=function_name,
            description=f"{stack.stack_name}: {props.name}",
            code=function_code(props.name),
            handler=f"functions.{props.name}.handler.lambda_handler",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            layers=[props.layer],
            role=self.role,
            log_group=logs,
            memory_size=props.memory_mib,
            timeout=props.timeout,
            tracing=lambda_.Tracing.ACTIVE,
            reserved_concurrent_executions=props.reserved_concurrency,
            max_event_age=props.max_event_age,
            retry_attempts=props.retry_attempts,
            environment=function_environment(props.config, props.name),
        )
        self._acknowledge()

    def _acknowledge(self) -> None:
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "X-Ray's PutTraceSegments and PutTelemetryRecords have no resource-level permissions; "
            "CDK adds them for active tracing and nothing else gets a wildcard",
        )
