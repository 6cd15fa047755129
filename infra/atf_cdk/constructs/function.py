"""The framework's Lambda functions, built one way: the core layer, a role of their own, an
encrypted log group, X-Ray tracing, and the environment's configuration.

The configuration is a file in the function's code (CONFIG_FILE, named by ATF_CONFIG_FILE
relative to the code's directory), not an environment variable: Lambda allows 4 KB of
those in all, a few dozen lambdas' worth. StackConfig.from_env() reads it once per container.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, Duration, ILocalBundling, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from atf_cdk.builders import log_group
from atf_cdk.constructs.layer import ARCHITECTURE, RUNTIME, compile_for_lambda
from atf_cdk.nag import acknowledge
from atf_cdk.sources import functions_source
from atf_core.config import CONFIG_ENV, CONFIG_FILE_ENV, StackConfig
from atf_core.telemetry import METRICS_NAMESPACE_ENV, SERVICE_NAME_ENV

FUNCTIONS_SOURCE = functions_source()
# Beside the `functions` package at the root of the code, where Lambda sets LAMBDA_TASK_ROOT.
CONFIG_FILE = "atf-config.json"
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")


@jsii.implements(ILocalBundling)
class CopyPackage:
    """Keeps the `functions.<name>` package path, so the handler's absolute imports work as in the tests,
    and writes the configuration beside it."""

    def __init__(self, source: Path, name: str, config: str) -> None:
        self._source = source
        self._name = name
        self._config = config

    def try_bundle(self, output_dir: str, options: Any) -> bool:
        target = Path(output_dir) / "functions"
        shutil.copytree(self._source / self._name, target / self._name, ignore=_IGNORE)
        shutil.copy2(self._source / "__init__.py", target / "__init__.py")
        (Path(output_dir) / CONFIG_FILE).write_text(self._config)
        compile_for_lambda(target, "/var/task/functions")
        return True


def function_code(name: str, config: StackConfig, source: Path = FUNCTIONS_SOURCE) -> lambda_.Code:
    text = config.to_env()
    return lambda_.Code.from_asset(
        str(source),
        exclude=["**/__pycache__"],
        # The hash of what is bundled, configuration included: a new configuration is new code.
        asset_hash_type=AssetHashType.OUTPUT,
        bundling=BundlingOptions(
            image=DockerImage.from_registry("public.ecr.aws/docker/library/busybox"),
            command=[
                "sh",
                "-c",
                f"mkdir -p /asset-output/functions && cp -r __init__.py {name} /asset-output/functions/"
                f' && printf %s "${CONFIG_ENV}" > /asset-output/{CONFIG_FILE}',
            ],
            environment={CONFIG_ENV: text},
            local=CopyPackage(source, name, text),
        ),
    )


# Lambda allows 4 KB of environment variables in all.
ENVIRONMENT_LIMIT_BYTES = 4096


def function_environment(name: str, config: StackConfig) -> dict[str, str]:
    environment = {
        CONFIG_FILE_ENV: CONFIG_FILE,
        SERVICE_NAME_ENV: f"atf-{name}",
        METRICS_NAMESPACE_ENV: config.metrics_namespace,
    }
    size = sum(len(k.encode()) + len(v.encode()) for k, v in environment.items())
    if size > ENVIRONMENT_LIMIT_BYTES:
        raise ValueError(f"the {name} function's environment would take {size} bytes, over Lambda's 4096")
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
            code=function_code(props.name, props.config),
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
            environment=function_environment(props.name, props.config),
        )
        self._acknowledge()

    def _acknowledge(self) -> None:
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "X-Ray's PutTraceSegments and PutTelemetryRecords have no resource-level permissions; "
            "CDK adds them for active tracing and nothing else gets a wildcard",
        )
        acknowledge(
            self.function,
            "AwsSolutions-L1",
            f"The runtime is {RUNTIME.name}, the Python the test suite runs on, so the deployed code is the tested "
            "code; it moves to a newer runtime together with the tests",
        )
