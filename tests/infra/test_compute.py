"""The frontend API, the consumer and its ticks, the core layer, and the worker hosts."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from atf_cdk.constructs.frontend import frontend_routes
from atf_cdk.constructs.function import CONFIG_FILE
from atf_cdk.constructs.workers import HEALTH_PROBE, NO_IMAGE
from aws_cdk.assertions import Match

from atf_core.access import WITH_BODY
from atf_core.config import CONFIG_ENV, CONFIG_FILE_ENV, TASK_ROOT_ENV, StackConfig
from atf_local.gateway_checks import KNOWN_ROUTES
from atf_sdk.worker.host import READY_WAIT_S
from tests.infra.conftest import ROOT, Synthesized


def _function(synth: Synthesized, name: str) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (k, v["Properties"])
        for k, v in synth.resources("AWS::Lambda::Function").items()
        if v["Properties"].get("FunctionName") == f"{synth.settings.config.name}-{name}"
    ]
    return found


def function_config(synth: Synthesized, name: str, monkeypatch: pytest.MonkeyPatch) -> StackConfig:
    """The configuration as the deployed function reads it: its environment as the template sets it,
    and LAMBDA_TASK_ROOT where Lambda unpacks its code (here, the bundled asset)."""
    _, props = _function(synth, name)
    asset = synth.outdir / ("asset." + props["Code"]["S3Key"].removesuffix(".zip"))
    with monkeypatch.context() as patched:
        for variable in (CONFIG_ENV, CONFIG_FILE_ENV):
            patched.delenv(variable, raising=False)
        for variable, value in props["Environment"]["Variables"].items():
            patched.setenv(variable, value)
        patched.setenv(TASK_ROOT_ENV, str(asset))
        return StackConfig.from_env()


def test_functions_run_the_handlers_on_the_core_layer_with_the_environment_config(
    synth: Synthesized, monkeypatch: pytest.MonkeyPatch
) -> None:
    (layer,) = synth.resources("AWS::Lambda::LayerVersion")
    for name in ("consumer", "frontend"):
        _, props = _function(synth, name)
        assert props["Handler"] == f"functions.{name}.handler.lambda_handler"
        assert props["Layers"] == [{"Ref": layer}]
        assert props["TracingConfig"] == {"Mode": "Active"}
        env = props["Environment"]["Variables"]
        assert CONFIG_ENV not in env and env[CONFIG_FILE_ENV] == CONFIG_FILE
        assert function_config(synth, name, monkeypatch) == synth.settings.config
        assert env["POWERTOOLS_METRICS_NAMESPACE"] == f"ATF/{synth.settings.config.name}"
        assert env["POWERTOOLS_SERVICE_NAME"] == f"atf-{name}"


def test_the_lambda_runtime_is_the_python_the_tests_run_on(synth: Synthesized) -> None:
    for name in ("consumer", "frontend"):
        assert _function(synth, name)[1]["Runtime"] == f"python{sys.version_info.major}.{sys.version_info.minor}"


def test_layer_ships_atf_core_under_python(synth: Synthesized) -> None:
    (layer,) = synth.resources("AWS::Lambda::LayerVersion").values()
    asset = "asset." + layer["Properties"]["Content"]["S3Key"].removesuffix(".zip")
    assert (synth.outdir / asset / "python" / "atf_core" / "definitions.py").is_file()
    assert layer["Properties"]["CompatibleRuntimes"] == [_function(synth, "consumer")[1]["Runtime"]]


def _method_paths(synth: Synthesized) -> dict[tuple[str, str], dict[str, Any]]:
    """Each method by (path, verb), its path rebuilt from the resources' parent chain."""
    resources = synth.resources("AWS::ApiGateway::Resource")

    def path_of(ref: dict[str, Any]) -> str:
        if "Ref" not in ref:  # the API's root resource
            return ""
        props = resources[ref["Ref"]]["Properties"]
        return f"{path_of(props['ParentId'])}/{props['PathPart']}"

    return {
        (path_of(m["Properties"]["ResourceId"]), m["Properties"]["HttpMethod"]): m["Properties"]
        for m in synth.resources("AWS::ApiGateway::Method").values()
    }


def test_the_api_serves_exactly_the_frontends_routes(synth: Synthesized) -> None:
    expected = {(path, verb) for path, verbs in frontend_routes().items() for verb in verbs}
    assert set(_method_paths(synth)) == expected
    assert ("/v1/tasks", "POST") in expected and ("/v1/openapi.json", "GET") in expected
    # and the local API server refuses the rest as this API does
    assert {(path, verb) for verb, path in KNOWN_ROUTES} == expected
    with_model = {verb for (_, verb), props in _method_paths(synth).items() if props.get("RequestModels")}
    assert with_model == set(WITH_BODY)


def test_every_method_needs_iam_auth_and_is_validated(synth: Synthesized) -> None:
    (validator,) = synth.resources("AWS::ApiGateway::RequestValidator").values()
    assert validator["Properties"]["ValidateRequestBody"] and validator["Properties"]["ValidateRequestParameters"]
    for (path, verb), props in _method_paths(synth).items():
        assert props["AuthorizationType"] == "AWS_IAM"
        assert "RequestValidatorId" in props
        assert props["Integration"]["Type"] == "AWS_PROXY"
        parameters = {f"method.request.path.{p[1:-1]}": True for p in path.split("/") if p.startswith("{")}
        assert props.get("RequestParameters", {}) == parameters
        if verb in ("POST", "PUT"):
            assert "application/json" in props["RequestModels"]


def test_the_frontend_is_invoked_by_the_apis_stage_under_one_statement_of_its_resource_policy(
    synth: Synthesized,
) -> None:
    # A statement per method (LambdaIntegration's default) took the policy over Lambda's 20 KB: deploys failed
    (function_id,) = [k for k in synth.resources("AWS::Lambda::Function") if k.startswith("FrontendHandler")]
    function_arn = {"Fn::GetAtt": [function_id, "Arn"]}
    invokes = [
        p["Properties"]
        for p in synth.resources("AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"] == function_arn
    ]
    assert len(invokes) == 1 and invokes[0]["Principal"] == "apigateway.amazonaws.com"
    (stage_id,) = synth.resources("AWS::ApiGateway::Stage")
    assert invokes[0]["SourceArn"]["Fn::Join"][1][-3:] == ["/", {"Ref": stage_id}, "/*/*"], "the stage, not test-invoke"
    for props in _method_paths(synth).values():
        assert props["Integration"]["IntegrationHttpMethod"] == "POST"
        assert function_arn in props["Integration"]["Uri"]["Fn::Join"][1]


def test_gateway_refusals_speak_the_frontends_error_codes(synth: Synthesized) -> None:
    bodies = {
        r["Properties"]["ResponseType"]: json.loads(
            r["Properties"]["ResponseTemplates"]["application/json"].replace("$context.error.messageString", '"m"')
        )
        for r in synth.resources("AWS::ApiGateway::GatewayResponse").values()
    }
    assert bodies["BAD_REQUEST_BODY"] == {"code": "invalid_input", "message": "m", "field": "body"}
    assert bodies["MISSING_AUTHENTICATION_TOKEN"]["code"] == "missing_authentication"
    assert bodies["ACCESS_DENIED"]["code"] == "access_denied"  # an IAM refusal: the SDK's AccessDenied
    assert bodies["THROTTLED"]["code"] == "throttled"


def test_stage_logs_access_throttles_and_traces(synth: Synthesized) -> None:
    api = synth.settings.api
    synth.template.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "StageName": synth.settings.environment,
            "TracingEnabled": True,
            "AccessLogSetting": {"DestinationArn": Match.any_value(), "Format": Match.string_like_regexp("requestId")},
            "MethodSettings": [
                Match.object_like(
                    {
                        "DataTraceEnabled": False,
                        "LoggingLevel": "ERROR",
                        "ThrottlingRateLimit": api.throttle_rate,
                        "ThrottlingBurstLimit": api.throttle_burst,
                    }
                )
            ],
        },
    )


def test_consumer_ticks_every_minute_once_per_group(synth: Synthesized) -> None:
    groups = synth.settings.props().consumer_groups
    consumer_id, props = _function(synth, "consumer")
    assert 60 < props["Timeout"] <= 70
    reserved = 2 * groups if synth.settings.consumer.reserve_concurrency else None
    assert props.get("ReservedConcurrentExecutions") == reserved
    inputs = []
    for rule in synth.resources("AWS::Events::Rule").values():
        assert rule["Properties"]["ScheduleExpression"] == "rate(1 minute)"
        assert len(rule["Properties"]["Targets"]) <= 5
        for target in rule["Properties"]["Targets"]:
            assert target["Arn"] == {"Fn::GetAtt": [consumer_id, "Arn"]}
            assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 60, "MaximumRetryAttempts": 0}
            inputs.append(json.loads(target["Input"]))
    assert sorted(inputs, key=lambda i: i["group"]["index"]) == [
        {"group": {"index": i, "of": groups}} for i in range(groups)
    ]


def test_a_worker_service_per_lambda_with_its_image_and_a_draining_stop(synth: Synthesized) -> None:
    config = synth.settings.config
    services = {s["Properties"]["ServiceName"]: s["Properties"] for s in synth.resources("AWS::ECS::Service").values()}
    assert set(services) == {f"{config.name}-{name}" for name in synth.settings.workers}
    tasks = {t["Properties"]["Family"]: t["Properties"] for t in synth.resources("AWS::ECS::TaskDefinition").values()}
    for name, worker in synth.settings.workers.items():
        service = services[f"{config.name}-{name}"]
        assert service["DesiredCount"] == (worker.min_tasks if worker.image else 0)
        assert service["LaunchType"] == "FARGATE"
        assert service["NetworkConfiguration"]["AwsvpcConfiguration"]["AssignPublicIp"] == "DISABLED"
        task = tasks[f"{config.name}-{name}"]
        assert (task["Cpu"], task["Memory"]) == (str(worker.cpu), str(worker.memory_mib))
        (container,) = task["ContainerDefinitions"]
        assert container["StopTimeout"] == 120
        assert container.get("Command") == worker.command
        env = {e["Name"]: e["Value"] for e in container["Environment"]}
        assert StackConfig.model_validate_json(env["ATF_CONFIG"]) == config
        # The image's `atf worker module:lambdas` serves the lambdas the service names here.
        assert env["ATF_LAMBDA"] == ",".join(worker.lambdas or [name])
        repository, _, tag = (worker.image or NO_IMAGE).partition(":")
        assert tag in json.dumps(container["Image"]) and repository in json.dumps(container["Image"])


def dockerfile_health_check(path: Path) -> dict[str, Any]:
    """A Dockerfile's HEALTHCHECK as a task definition's container states it."""
    [line] = re.findall(r"^HEALTHCHECK (.*)$", path.read_text(), re.MULTILINE)
    options = dict(re.findall(r"--([a-z-]+)=(\d+)s?", line))
    command = json.loads(line.split(" CMD ", 1)[1])
    return {
        "Command": ["CMD", *command],
        "Interval": int(options["interval"]),
        "Timeout": int(options["timeout"]),
        "Retries": int(options["retries"]),
        "StartPeriod": int(options["start-period"]),
    }


def test_every_worker_container_is_health_checked_by_the_hosts_probe(synth: Synthesized) -> None:
    tasks = [t["Properties"] for t in synth.resources("AWS::ECS::TaskDefinition").values()]
    assert len(tasks) == len(synth.settings.workers)
    for task in tasks:
        (container,) = task["ContainerDefinitions"]
        check = container["HealthCheck"]
        # The probe of atf_sdk.worker.health, as the sample image's HEALTHCHECK runs it
        assert check == {
            "Command": ["CMD", "python", "-m", "atf_sdk.worker.health"],
            "Interval": 30,
            "Timeout": 10,
            "Retries": 3,
            "StartPeriod": 90,
        }
        assert check == dockerfile_health_check(ROOT / "examples" / "worker.Dockerfile")
    # Sized to the host: its first report comes after its wait for its executors (and its reach of AWS)
    assert check["StartPeriod"] >= READY_WAIT_S + 20
    assert check["Command"][1:] == HEALTH_PROBE


def test_cluster_has_container_insights_and_the_vpc_flow_logs(synth: Synthesized) -> None:
    synth.template.has_resource_properties(
        "AWS::ECS::Cluster",
        {
            "ClusterSettings": Match.array_with(
                [{"Name": "containerInsights", "Value": Match.string_like_regexp("enabled")}]
            )
        },
    )
    synth.template.resource_count_is("AWS::EC2::FlowLog", 1)
    synth.template.resource_count_is("AWS::EC2::NatGateway", synth.settings.network.nat_gateways)
