"""examples/team-project, a team's own repository: its CDK app imports the construct and synthesizes
clean (cdk-nag, cfn-lint), with the team's image, environment, secret, IAM and scaling; and a team
may put the hosts in a VPC of its own."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import cfnlint.api
import pytest
from atf_cdk import AtfProps, AtfStack, SecretRef, WorkerService, nag
from atf_cdk.constructs.layer import BUNDLING_CONTEXT
from aws_cdk import App, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from atf_core.config import StackConfig
from tests.docs.markdown import blocks
from tests.infra.conftest import ROOT, Synthesized, flatten
from tests.infra.linting import lint_file
from tests.infra.test_checks import CFN_LINT_IGNORED
from tests.infra.test_compute import dockerfile_health_check

PROJECT = ROOT / "examples" / "team-project"


def _team_app() -> ModuleType:
    spec = importlib.util.spec_from_file_location("team_deploy_app", PROJECT / "deploy" / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    outdir = tmp_path_factory.mktemp("cdk-team")
    context = {**json.loads((PROJECT / "cdk.json").read_text())["context"], BUNDLING_CONTEXT: "source"}
    app = App(context=context, outdir=str(outdir))
    stack = _team_app().build(app)
    app.synth()
    return Synthesized(None, app, stack, outdir, Template.from_json(flatten(outdir, stack)))  # type: ignore[arg-type]


def _container(team: Synthesized, service: str) -> dict[str, Any]:
    (task,) = [
        t["Properties"] for t in team.resources("AWS::ECS::TaskDefinition").values()
        if t["Properties"]["Family"] == f"thumbs-prod-{service}"
    ]  # fmt: skip
    (container,) = task["ContainerDefinitions"]
    return container  # type: ignore[no-any-return]


def test_the_team_app_is_nag_and_cfn_lint_clean(team: Synthesized) -> None:
    plugins = team.validation_report["pluginReports"]
    assert [(p["pluginName"], p["conclusion"], p["violations"]) for p in plugins] == [("AwsSolutions", "success", [])]
    config = cfnlint.api.ManualArgs(regions=["eu-west-1"], ignore_checks=list(CFN_LINT_IGNORED))
    for path in team.template_paths:
        assert [str(m) for m in lint_file(path, config)] == [], path.name


def test_the_image_is_built_from_the_teams_dockerfile(team: Synthesized) -> None:
    manifest = json.loads(next(team.outdir.glob("thumbs-prod*.assets.json")).read_text())
    (image,) = manifest["dockerImages"].values()
    staged = team.outdir / image["source"]["directory"]
    assert (staged / "Dockerfile").read_text() == (PROJECT / "Dockerfile").read_text()
    assert (staged / "src" / "thumbnails" / "lambdas.py").is_file()
    assert not (staged / "deploy").exists()  # the CDK app is not in the image
    assert image["destinations"], "pushed to the bootstrap repository on deploy"
    assert "ImageUri" not in json.dumps(_container(team, "resize")) and _container(team, "resize")["Image"]


def test_the_teams_dockerfile_installs_packages_not_the_frameworks_tree() -> None:
    text = (PROJECT / "Dockerfile").read_text()
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert re.search(rf"^FROM \S+/python:{re.escape(running)}-slim$", text, re.MULTILINE), "the Python the tests run"
    copied = re.findall(r"^COPY (\S+)", text, re.MULTILINE)
    assert copied == ["wheels/", "pyproject.toml", "src/"]
    project = tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("atf-sdk[worker]") for d in project["dependencies"])
    assert re.search(r'^CMD \["atf", "worker", "thumbnails\.lambdas:lambdas"\]$', text, re.MULTILINE)


def test_the_teams_image_and_its_services_check_the_hosts_health_alike(team: Synthesized) -> None:
    for service in ("resize", "notify"):
        assert _container(team, service)["HealthCheck"] == dockerfile_health_check(PROJECT / "Dockerfile")


def test_the_callbacks_get_their_environment_secret_and_permissions(team: Synthesized) -> None:
    resize = {e["Name"]: e["Value"] for e in _container(team, "resize")["Environment"]}
    assert resize["THUMBNAIL_BUCKET"] == "acme-thumbnails" and resize["ATF_LAMBDA"] == "resize"
    (secret,) = _container(team, "notify")["Secrets"]
    assert secret["Name"] == "WEBHOOK_TOKEN" and ":token::" in json.dumps(secret["ValueFrom"])
    policies = json.dumps([p["Properties"] for p in team.resources("AWS::IAM::Policy").values()])
    assert '"s3:PutObject"' in policies and "arn:aws:s3:::acme-thumbnails/thumbs/*" in policies


def test_resize_scales_from_zero_to_twenty(team: Synthesized) -> None:
    bounds = sorted(
        (t["Properties"]["MinCapacity"], t["Properties"]["MaxCapacity"])
        for t in team.resources("AWS::ApplicationAutoScaling::ScalableTarget").values()
    )
    assert bounds == [(0, 20), (1, 4)]


def test_the_hosts_may_run_in_the_teams_own_vpc_and_subnets_and_without_the_probe(tmp_path: Path) -> None:
    """A team's own network; and an image that cannot run the health probe turns the container check off."""
    app = App(context={BUNDLING_CONTEXT: "source"}, outdir=str(tmp_path))
    network = Stack(app, "Network")
    vpc = ec2.Vpc(network, "Vpc", max_azs=2, nat_gateways=1, flow_logs={"All": ec2.FlowLogOptions()})
    config = StackConfig.from_file(PROJECT / "stack.json")
    props = AtfProps(
        config=config,
        workers=[
            WorkerService(name="all", lambdas=["resize", "notify"], image="acme/thumbnails:1", health_check=False)
        ],
        vpc=vpc,
        subnets=ec2.SubnetSelection(subnet_group_name="Private"),
    )
    stack = AtfStack(app, "thumbs-prod", props)
    nag.check(app)
    app.synth()
    template = flatten(tmp_path, stack)
    types = {r["Type"] for r in template["Resources"].values()}
    assert "AWS::EC2::VPC" not in types and "AWS::EC2::FlowLog" not in types
    (service,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::ECS::Service"]
    subnets = json.dumps(service["Properties"]["NetworkConfiguration"]["AwsvpcConfiguration"]["Subnets"])
    assert "PrivateSubnet" in subnets and "PublicSubnet" not in subnets
    (task,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::ECS::TaskDefinition"]
    (container,) = task["Properties"]["ContainerDefinitions"]
    assert "HealthCheck" not in container


def test_a_lambda_served_twice_or_not_at_all_is_refused() -> None:
    config = StackConfig.from_file(PROJECT / "stack.json")
    with pytest.raises(ValueError, match="'resize' is served by both 'a' and 'b'"):
        AtfProps(
            config=config,
            workers=[
                WorkerService(name="a", lambdas=["resize"]),
                WorkerService(name="b", lambdas=["resize", "notify"]),
            ],
        )
    with pytest.raises(ValueError, match=r"missing \['notify'\]"):
        AtfProps(config=config, workers=[WorkerService(name="a", lambdas=["resize"])])
    with pytest.raises(ValueError, match="which the framework sets itself"):
        WorkerService(name="a", lambdas=["resize"], environment={"ATF_CONFIG": "{}"})


def test_the_readmes_deploy_block_synthesizes_the_project(tmp_path: Path) -> None:
    """README's "Deploy with the construct" block, which the doc test cannot run (the layer's pip needs the
    index), run as its reader would: `python` in the project's directory."""
    (block,) = [b for b in blocks(ROOT / "README.md", ROOT) if b.language == "python" and "AtfStack(" in b.text]
    assert block.skip is not None and "test_team_project.py" in block.skip
    project = shutil.copytree(PROJECT, tmp_path / "project", ignore=shutil.ignore_patterns("cdk.out", "wheels"))
    outdir = tmp_path / "cdk.out"
    env = {
        **os.environ,
        "CDK_OUTDIR": str(outdir),  # where App() writes, as the cdk CLI would tell it
        "CDK_CONTEXT_JSON": json.dumps({BUNDLING_CONTEXT: "source"}),
        "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
    }
    run = subprocess.run(
        [sys.executable, "-"], input=block.text, cwd=project, env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    resources = json.loads((outdir / "thumbs-prod.template.json").read_text())["Resources"]
    nested = [r for r in resources.values() if r["Type"] == "AWS::CloudFormation::Stack"]
    assert len(nested) == 2  # one per worker service
    services = {}
    for path in outdir.glob("thumbsprod*.nested.template.json"):
        for resource in json.loads(path.read_text())["Resources"].values():
            if resource["Type"] == "AWS::ECS::TaskDefinition":
                (container,) = resource["Properties"]["ContainerDefinitions"]
                variables = {e["Name"]: e["Value"] for e in container["Environment"]}
                services[variables["ATF_LAMBDA"]] = container
    assert sorted(services) == ["notify", "resize"]
    assert [s["Name"] for s in services["notify"]["Secrets"]] == ["WEBHOOK_TOKEN"]


def test_the_teams_roles_may_invoke_their_lambdas_routes_only(team: Synthesized) -> None:
    granted: dict[str, str] = {}
    for policy in team.resources("AWS::IAM::Policy").values():
        for role in policy["Properties"].get("Roles", []):
            granted[role["Ref"]] = granted.get(role["Ref"], "") + json.dumps(policy["Properties"]["PolicyDocument"])
    (web,) = [text for role, text in granted.items() if role.startswith("WebApp")]
    (oncall,) = [text for role, text in granted.items() if role.startswith("ThumbnailsOnCall")]
    assert "/POST/v1/lambdas/notify/tasks" in web and "/PUT/v1/lambdas/resize/gates" not in web
    assert "/PUT/v1/lambdas/resize/gates" in oncall and "/v1/lambdas/notify/" not in oncall


SECRET_KEY = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
PARAMETER_KEY = "arn:aws:kms:eu-west-1:111122223333:key/0987dcba-09fe-87dc-65ba-ab0987654321"


def test_a_secret_under_a_customer_managed_key_lets_the_execution_role_decrypt_it(tmp_path: Path) -> None:
    """ECS reads a service's secrets with the execution role as the task starts: a secret or parameter encrypted
    under the team's own key needs kms:Decrypt on that key too, or the task never starts."""
    # Given a service whose secrets are each encrypted under a key of the team's, and one under AWS's own
    app = App(context={BUNDLING_CONTEXT: "source"}, outdir=str(tmp_path))
    secrets = {
        "DB_PASSWORD": SecretRef(secrets_manager="acme/db", field="password", kms_key=SECRET_KEY),
        "API_TOKEN": SecretRef(ssm="/acme/api-token", kms_key=PARAMETER_KEY),
        "PLAIN": SecretRef(secrets_manager="acme/plain"),
    }
    workers = [WorkerService(name="all", lambdas=["resize", "notify"], image="acme/thumbnails:1", secrets=secrets)]
    stack = AtfStack(
        app, "thumbs-prod", AtfProps(config=StackConfig.from_file(PROJECT / "stack.json"), workers=workers)
    )
    # When it is synthesized
    app.synth()
    template = flatten(tmp_path, stack)
    # Then the execution role may decrypt with each key, and read each secret
    (task,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::ECS::TaskDefinition"]
    execution_role = task["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0]
    statements = [
        statement
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": execution_role} in r["Properties"]["Roles"]
        for statement in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    decrypting = {json.dumps(s["Resource"]) for s in statements if "kms:Decrypt" in json.dumps(s["Action"])}
    assert {json.dumps(SECRET_KEY), json.dumps(PARAMETER_KEY)} <= decrypting
    granted = json.dumps(statements)
    assert ":secret:acme/db-??????" in granted and ":secret:acme/plain-??????" in granted
    assert ":parameter/acme/api-token" in granted
    (container,) = task["Properties"]["ContainerDefinitions"]
    assert sorted(s["Name"] for s in container["Secrets"]) == ["API_TOKEN", "DB_PASSWORD", "PLAIN"]


@pytest.mark.parametrize("key", ["alias/acme", "arn:aws:kms:eu-west-1:111122223333:alias/acme", "1234abcd"])
def test_a_secrets_key_must_be_a_key_arn(key: str) -> None:
    with pytest.raises(ValueError, match="kms_key must be a key's ARN"):
        SecretRef(secrets_manager="acme/db", kms_key=key)
