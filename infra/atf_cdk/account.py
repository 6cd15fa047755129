"""What an account and region hold once, whatever environments they run: the stack `atf-account`.

Two things are account-wide and so cannot belong to an environment's stack, where
two environments would fight over them:

- API Gateway's CloudWatch role (`AWS::ApiGateway::Account`), which every REST API
  in the region uses to write its execution and access logs. An environment's stage
  logs, so this must exist before the first environment is deployed.
- The ECR repository the worker images are pushed to (`atf-workers`), which must
  exist before a worker service pulls from it; one image, tagged, is promoted from
  one environment to the next.

Each environment's stack depends on this one, so `cdk deploy` creates it first. Its
template does not depend on the environment: deployed again from another
environment's context, it changes nothing.
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, Environment, RemovalPolicy, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from constructs import Construct

from atf_cdk.nag import acknowledge

ACCOUNT_STACK_NAME = "atf-account"
WORKER_REPOSITORY = "atf-workers"
# Pushed images nobody tags any more (a tag moved to a newer build) go after this long.
UNTAGGED_IMAGE_DAYS = 14
PUSH_TO_CLOUDWATCH = "service-role/AmazonAPIGatewayPushToCloudWatchLogs"


class AccountStack(Stack):
    def __init__(self, scope: Construct, *, account: str | None, region: str | None) -> None:
        super().__init__(
            scope,
            ACCOUNT_STACK_NAME,
            env=Environment(account=account, region=region),
            description="Async task framework: API Gateway's CloudWatch role and the worker image repository",
        )
        self.api_gateway_role = self._api_gateway_logging()
        self.repository = ecr.Repository(
            self,
            "WorkerImages",
            repository_name=WORKER_REPOSITORY,
            image_scan_on_push=True,
            # A tag names one build for good: a deployment that names it gets what was tested.
            image_tag_mutability=ecr.TagMutability.IMMUTABLE,
            lifecycle_rules=[
                ecr.LifecycleRule(
                    description="Untagged images are no deployment's",
                    tag_status=ecr.TagStatus.UNTAGGED,
                    max_image_age=Duration.days(UNTAGGED_IMAGE_DAYS),
                )
            ],
            # The images serve every environment of the account: deleting this stack keeps them.
            removal_policy=RemovalPolicy.RETAIN,
        )
        CfnOutput(
            self,
            "WorkerRepositoryUri",
            value=self.repository.repository_uri,
            description="Push worker images here, then name them in workers.<lambda>.image as atf-workers:<tag>",
        )

    def _api_gateway_logging(self) -> iam.Role:
        role = iam.Role(
            self,
            "ApiGatewayCloudWatchRole",
            assumed_by=iam.ServicePrincipal("apigateway.amazonaws.com"),
            description="API Gateway writes the execution and access logs of the account's REST APIs with this role",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(PUSH_TO_CLOUDWATCH)],
        )
        # Kept when the stack goes: other REST APIs in the account may log through it too.
        role.apply_removal_policy(RemovalPolicy.RETAIN)
        account = apigw.CfnAccount(self, "ApiGatewayAccount", cloud_watch_role_arn=role.role_arn)
        account.node.add_dependency(role)
        acknowledge(
            role,
            f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{PUSH_TO_CLOUDWATCH}]",
            "API Gateway's account-wide logging role needs exactly this AWS-maintained policy to write execution logs",
        )
        return role
