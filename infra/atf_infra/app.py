"""Builds the app for the environment chosen with `-c env=<name>`, with cdk-nag watching."""

from __future__ import annotations

from aws_cdk import App

from atf_infra import nag
from atf_infra.settings import available_environments, load_environment
from atf_infra.stack import AtfStack

ENV_CONTEXT = "env"


def build(app: App) -> AtfStack:
    name = app.node.try_get_context(ENV_CONTEXT)
    if not name:
        raise SystemExit(f"choose an environment with -c {ENV_CONTEXT}=NAME, one of {available_environments()}")
    stack = AtfStack(app, load_environment(str(name)))
    nag.check(app)
    return stack
