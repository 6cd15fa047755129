"""AtfStack: a stack holding one AtfEnvironment, with the outputs a user needs.

A team's CDK app may use it as is (`AtfStack(app, "team-prod", props, env=...)`) or place an
AtfEnvironment in a stack of its own. This repository's app builds one per environment file
(atf_cdk.app), after the account's stack (account.py).
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack, Tags
from constructs import Construct

from atf_cdk.environment import AtfEnvironment, AtfProps

# The construct's id inside the stack: CDK leaves an id of "Default" out of the logical ids of its
# resources, so they are what they would be were the resources the stack's own.
ENVIRONMENT_ID = "Default"


class AtfStack(Stack):
    def __init__(self, scope: Construct, id: str, props: AtfProps, **stack: Any) -> None:
        stack.setdefault("description", f"Async task framework {props.config.name}")
        stack.setdefault("termination_protection", props.retain_data)
        # CloudFormation takes at most 1 MB of template: written without indentation, an environment of a
        # hundred lambdas (each with its service, queues, alarms and dashboard widgets) and the API's routes
        # for one lambda and for all of them stays well inside it (tests/infra/test_scale.py).
        stack.setdefault("suppress_template_indentation", True)
        super().__init__(scope, id, **stack)
        Tags.of(self).add("atf:environment", props.stage)
        self.atf = AtfEnvironment(self, ENVIRONMENT_ID, props)
        self._outputs()

    @property
    def services(self) -> dict[str, Any]:
        return self.atf.services

    def _outputs(self) -> None:
        atf = self.atf
        dashboard = atf.observability.dashboard.dashboard_name
        CfnOutput(self, "ApiUrl", value=atf.frontend.url, description="Base URL of the frontend API (SigV4-signed)")
        CfnOutput(self, "TableName", value=atf.table.table.table_name, description="The task table")
        CfnOutput(
            self,
            "DashboardUrl",
            value=f"https://{self.region}.console.aws.amazon.com/cloudwatch/home?region={self.region}"
            f"#dashboards/dashboard/{dashboard}",
            description="The environment's CloudWatch dashboard",
        )
        CfnOutput(self, "AlarmTopicArn", value=atf.observability.topic.topic_arn, description="Alarm notifications")
        CfnOutput(
            self,
            "WorkerCluster",
            value=atf.network.cluster.cluster_name,
            description="ECS cluster of the worker hosts",
        )
