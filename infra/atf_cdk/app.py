"""This repository's CDK app, one user of the construct: builds the environment chosen with
`-c env=<name>` (infra/environments/<name>.json), with cdk-nag watching: the account's stack
(atf-account) and the environment's, which depends on it."""

from __future__ import annotations

from aws_cdk import App, Environment

from atf_cdk import nag
from atf_cdk.account import AccountStack
from atf_cdk.settings import EnvironmentSettings, available_environments, load_environment
from atf_cdk.stack import AtfStack

ENV_CONTEXT = "env"


def environment_stack(app: App, settings: EnvironmentSettings) -> AtfStack:
    return AtfStack(
        app,
        settings.stack_name,
        settings.props(),
        env=Environment(account=settings.account, region=settings.region),
        description=f"Async task framework, environment {settings.environment}",
    )


def build(app: App) -> AtfStack:
    name = app.node.try_get_context(ENV_CONTEXT)
    if not name:
        raise SystemExit(f"choose an environment with -c {ENV_CONTEXT}=NAME, one of {available_environments()}")
    settings = load_environment(str(name))
    account = AccountStack(app, account=settings.account, region=settings.region)
    stack = environment_stack(app, settings)
    # The stage logs through the account's CloudWatch role, and the services pull from its repository.
    stack.add_stack_dependency(account, "API Gateway's logging role and the worker image repository")
    nag.check(app)
    return stack
