#!/usr/bin/env python3
"""Acme's CDK app: the framework's construct (atf-cdk) with Acme's lambdas and worker image.

    pip install -e '.[deploy]'        # atf-cdk and the CDK, beside this project
    cdk deploy -c stage=prod          # from this directory (cdk.json names this file)

Everything the callbacks need is given here: the image built from this project's Dockerfile, the
bucket they write to (environment, and an IAM statement on it), the webhook token (a Secrets
Manager secret, read by ECS when a host starts), and how far each service may scale.
"""

from __future__ import annotations

from pathlib import Path

# atf_cdk first: it keeps jsii's banner about Node versions quiet before aws_cdk loads.
from atf_cdk import AtfProps, AtfStack, Scaling, SecretRef, WorkerService, nag
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam

from atf_core.config import StackConfig

PROJECT = Path(__file__).resolve().parent.parent
BUCKET = "acme-thumbnails"


def workers(image: ecs.ContainerImage) -> list[WorkerService]:
    return [
        WorkerService(
            name="resize",
            lambdas=["resize"],
            image=image,
            environment={"THUMBNAIL_BUCKET": BUCKET},
            policy_statements=[
                iam.PolicyStatement(actions=["s3:PutObject"], resources=[f"arn:aws:s3:::{BUCKET}/thumbs/*"])
            ],
            acknowledgements={
                f"AwsSolutions-IAM5[Resource::arn:aws:s3:::{BUCKET}/thumbs/*]": (
                    "Each image gets its own object under thumbs/, so the grant names the prefix, not each key"
                )
            },
            cpu=1024,
            memory_mib=2048,
            # None while nothing is queued or due; up to 20 hosts for a burst.
            scaling=Scaling(min_tasks=0, max_tasks=20, backlog_per_task=100),
        ),
        WorkerService(
            name="notify",
            lambdas=["notify"],
            image=image,
            secrets={"WEBHOOK_TOKEN": SecretRef(secrets_manager="acme/webhook", field="token")},
            scaling=Scaling(min_tasks=1, max_tasks=4),
        ),
    ]


def team_roles(stack: AtfStack) -> None:
    """Who may call the API for which lambda: the web app schedules and reads resizes and notifications;
    the thumbnails on-call also steers resizes (pause, cancel, redrive), and nothing of notify's."""
    account = iam.AccountRootPrincipal()
    web = iam.Role(stack, "WebApp", assumed_by=account, description="Acme's web app: schedules thumbnails")
    stack.atf.grant_use(web, "resize", "notify")
    oncall = iam.Role(stack, "ThumbnailsOnCall", assumed_by=account, description="Thumbnails on-call engineers")
    stack.atf.grant_use(oncall, "resize")
    stack.atf.grant_operate(oncall, "resize")


def build(app: App) -> AtfStack:
    stage = app.node.try_get_context("stage") or "prod"
    image = ecs.ContainerImage.from_asset(str(PROJECT), exclude=["cdk.out", "deploy", ".venv", "**/__pycache__"])
    props = AtfProps(
        config=StackConfig.from_file(PROJECT / "stack.json"),
        workers=workers(image),
        stage=stage,
        alarm_emails=["oncall@acme.example"],
    )
    stack = AtfStack(app, f"thumbs-{stage}", props, env=Environment(region="eu-west-1"))
    team_roles(stack)
    nag.check(app)
    return stack


def main() -> Stack:
    app = App()
    stack = build(app)
    app.synth()
    return stack


if __name__ == "__main__":
    main()
