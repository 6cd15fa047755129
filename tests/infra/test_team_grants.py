"""A team's role, given `grant_use` / `grant_operate` by the construct, may execute-api:Invoke exactly the routes
of its kind for its lambdas on this environment's API stage (atf_core.access: tests/unit/test_access.py shows
those patterns never reach another lambda's routes nor the other kind's); an unknown lambda fails the synth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from atf_cdk import ALL_LAMBDAS
from atf_cdk.app import environment_stack
from atf_cdk.settings import load_environment
from aws_cdk import App, Stack
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from atf_core.access import grant_patterns
from atf_local.iam.template import cdk_context
from tests.infra.conftest import ENVIRONMENTS

Rendered = dict[str, list[str]]


@pytest.fixture(scope="module")
def granted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Rendered, list[str], str]:
    """Each role's execute-api resources, rendered as text; the stack's lambdas; the API's logical id."""
    env = ENVIRONMENTS[0]
    app = App(context=cdk_context(env), outdir=str(Path(tmp_path_factory.mktemp("cdk-team-grants"))))
    stack = environment_stack(app, load_environment(env))
    lambdas = sorted(stack.atf.props.config.lambdas)
    roles = {
        "users": _role(stack, "Users"),
        "operators": _role(stack, "Operators"),
        "everyone": _role(stack, "Everyone"),
        "all": _role(stack, "AllOperators"),
    }
    stack.atf.grant_use(roles["users"], lambdas[0])
    stack.atf.grant_operate(roles["operators"], *lambdas[:2])
    stack.atf.grant_use(roles["everyone"])
    stack.atf.grant_operate(roles["all"], ALL_LAMBDAS)
    template = Template.from_stack(stack)
    (api,) = template.find_resources("AWS::ApiGateway::RestApi")
    rendered = {name: _invoke_resources(template, stack, role) for name, role in roles.items()}
    return rendered, lambdas, api


def test_use_on_one_lambda_is_its_use_routes_only(granted: tuple[Rendered, list[str], str]) -> None:
    rendered, lambdas, api = granted
    assert _routes(rendered["users"], api) == _expected("use", lambdas[:1], every=False)
    assert any(r.endswith(f"/POST/v1/lambdas/{lambdas[0]}/tasks") for r in rendered["users"])


def test_operate_on_two_lambdas_is_their_operate_routes(granted: tuple[Rendered, list[str], str]) -> None:
    rendered, lambdas, api = granted
    assert _routes(rendered["operators"], api) == _expected("operate", lambdas[:2], every=False)
    assert not any("/v1/tasks" in r or "/v1/gates/" in r for r in rendered["operators"]), "no all-lambdas route"


def test_no_name_or_all_lambdas_names_every_lambda_and_adds_the_all_lambdas_routes(
    granted: tuple[Rendered, list[str], str],
) -> None:
    rendered, lambdas, api = granted
    assert _routes(rendered["everyone"], api) == _expected("use", lambdas, every=True)
    assert _routes(rendered["all"], api) == _expected("operate", lambdas, every=True)
    assert any(r.endswith("/GET/v1/tasks/*") for r in rendered["everyone"])
    assert not any("/v1/lambdas/*" in r for r in rendered["everyone"] + rendered["all"]), "a lambda as a wildcard"


def test_an_unknown_lambda_is_refused_at_synth_naming_it(tmp_path: Path) -> None:
    env = ENVIRONMENTS[0]
    stack = environment_stack(App(context=cdk_context(env), outdir=str(tmp_path)), load_environment(env))
    with pytest.raises(ValueError, match="grant_operate: no lambda 'no_such_lambda'"):
        stack.atf.grant_operate(_role(stack, "Team"), "no_such_lambda")


def _role(stack: Stack, name: str) -> iam.Role:
    return iam.Role(stack, name, assumed_by=iam.AccountRootPrincipal())


def _invoke_resources(template: Template, stack: Stack, role: iam.Role) -> list[str]:
    role_ref = {"Ref": stack.get_logical_id(role.node.default_child)}  # type: ignore[arg-type]
    # A long list of routes overflows the role's inline policy into managed ones: CDK splits it.
    policies = [
        p
        for kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
        for p in template.find_resources(kind).values()
        if role_ref in p["Properties"].get("Roles", [])
    ]
    statements = [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]]
    assert all(s["Action"] == "execute-api:Invoke" and s["Effect"] == "Allow" for s in statements), statements
    return [_text(r) for s in statements for r in _listed(s["Resource"])]


def _routes(resources: list[str], api: str) -> set[tuple[str, str]]:
    """(method, path) of each ARN, after checking it is this API's stage: arn:...:{api}/{stage}/{METHOD}/path."""
    found = set()
    for resource in resources:
        head, _, tail = resource.partition(f":{{{api}}}/")
        assert head.startswith("arn:{AWS::Partition}:execute-api:{AWS::Region}:{AWS::AccountId}"), resource
        stage, method, path = tail.split("/", 2)
        assert stage.startswith("{") and method.isupper(), resource
        found.add((method, f"/{path}"))
    return found


def _expected(kind: str, lambdas: list[str], every: bool) -> set[tuple[str, str]]:
    return set(grant_patterns(kind, lambdas, every))  # type: ignore[arg-type]


def _text(value: Any) -> str:
    """A CloudFormation string as text, each reference written {name}."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return "{" + value["Ref"] + "}"
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_text(p) for p in parts)
    raise AssertionError(f"unexpected {value}")


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
