"""Builds the app for the environment chosen with `-c env=<name>`, with cdk-nag watching: the
account's stack (atf-account) and the environment's, which depends on it."""

from __future__ import annotations

from aws_cdk import App

from atf_infra import nag
from atf_infra.account import AccountStack
from atf_infra.settings import available_environments, load_environment
from atf_infra.stack import AtfStack

ENV_CONTEXT = "env"


def build(app: App) -> AtfStack:
    name = app.node.try_get_context(ENV_CONTEXT)
    if not name:
        raise SystemExit(f"choose an environment with -c {ENV_CONTEXT}=NAME, one of {available_environments()}")
    settings = load_environment(str(name))
    account = AccountStack(app, account=settings.account, region=settings.region)
    stack = AtfStack(app, settings)
    # The stage logs through the account's CloudWatch role, and the services pull from its repository.
    stack.add_stack_dependency(account, "API Gateway's logging role and the worker image repository")
    nag.check(app)
    return stack
