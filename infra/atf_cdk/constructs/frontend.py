"""The frontend: its Lambda function behind an API Gateway REST API that only signed (IAM) callers reach."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Aws, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from atf_cdk.builders import log_group
from atf_cdk.constructs.function import FUNCTIONS_SOURCE, AtfFunction, FunctionProps
from atf_cdk.constructs.table import TaskTable
from atf_cdk.grants import service_actions
from atf_cdk.nag import acknowledge, rendered
from atf_core.access import DOCUMENT, WITH_BODY
from atf_core.errors import GATEWAY_REFUSALS, AtfError

OPENAPI_DOCUMENT = FUNCTIONS_SOURCE / "frontend" / "openapi.json"
# Served by the frontend but left out of its own document.
UNDOCUMENTED_ROUTES = {DOCUMENT[1]: (DOCUMENT[0],)}
HTTP_METHODS = ("GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH")
# IAM actions whose resource is a role only (reading a session's role by name): granted on roles, not users too.
ROLE_ONLY_ACTIONS = frozenset({"iam:GetRole"})
# API Gateway's own refusals answer in the frontend's error shape, with the codes of
# atf_core.errors, so the SDK raises the same classes whoever refused the request.
ERROR_TEMPLATE = '{"code": "%s", "message": $context.error.messageString, "field": %s}'
GATEWAY_ERRORS: dict[apigw.ResponseType, tuple[type[AtfError], str | None]] = {
    apigw.ResponseType.of(name): refusal for name, refusal in GATEWAY_REFUSALS.items()
}


def frontend_routes(document: Path = OPENAPI_DOCUMENT) -> dict[str, tuple[str, ...]]:
    """The routes the frontend serves, from the OpenAPI document it commits (and tests for drift):
    only these reach the function, anything else is refused before it costs an invocation."""
    paths = json.loads(document.read_text())["paths"]
    # A path item may also hold "parameters", "summary" and the like besides its operations.
    routes = {path: tuple(sorted(m.upper() for m in item if m.upper() in HTTP_METHODS)) for path, item in paths.items()}
    return {**routes, **UNDOCUMENTED_ROUTES}


@dataclass(frozen=True)
class ApiProps:
    stage: str
    throttle_rate: float
    throttle_burst: int
    log_key: kms.IKey
    log_retention_days: int
    retain_logs: bool


class FrontendApi(Construct):
    def __init__(self, scope: Construct, id: str, *, function: FunctionProps, api: ApiProps, table: TaskTable) -> None:
        super().__init__(scope, id)
        self.handler = AtfFunction(self, "Handler", function)
        self.function = self.handler.function
        table.grant(self.function, "frontend")
        self._grant_iam()
        access_logs = log_group(
            self, "AccessLogs", key=api.log_key, days=api.log_retention_days, retain=api.retain_logs
        )
        self.api = apigw.RestApi(
            self,
            "Api",
            rest_api_name=f"{Stack.of(self).stack_name}-api",
            description="Schedules and steers tasks; every method requires SigV4 (IAM) signatures",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            # The logging role is the account's (account.py): two environments must not both set it.
            cloud_watch_role=False,
            deploy_options=apigw.StageOptions(
                stage_name=api.stage,
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True, http_method=True, ip=True, protocol=True, request_time=True,
                    resource_path=True, response_length=True, status=True, user=True,
                ),
                # Errors only, and never request bodies: payloads may hold personal data.
                logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,
                tracing_enabled=True,
                metrics_enabled=True,
                throttling_rate_limit=api.throttle_rate,
                throttling_burst_limit=api.throttle_burst,
            ),
            default_method_options=apigw.MethodOptions(authorization_type=apigw.AuthorizationType.IAM),
        )  # fmt: skip
        # The stack's own ApiUrl output says the same, under a stable name.
        self.api.node.try_remove_child("Endpoint")
        self._add_routes()
        for number, (response_type, (error, field)) in enumerate(GATEWAY_ERRORS.items()):
            self.api.add_gateway_response(
                f"GatewayResponse{number}",
                type=response_type,
                templates={"application/json": ERROR_TEMPLATE % (error.code, json.dumps(field))},
            )
        self._acknowledge()

    def _invoke_integration(self) -> apigw.Integration:
        """The function as every method's proxy integration, with one invoke permission for the API's stage.
        LambdaIntegration adds a permission per method: fifty statements under CloudFormation's long ids come to
        about 21 KB, over the 20 KB a function's resource policy may hold, and the first deploy would fail. Its
        one-statement option allows every stage, the test-invoke one too, and the console's test bypasses IAM."""
        self.function.add_permission(
            "ApiInvoke",
            principal=iam.ServicePrincipal("apigateway.amazonaws.com"),
            source_arn=self.api.arn_for_execute_api("*", "/*", self.api.deployment_stage.stage_name),
        )
        invocations = f"path/2015-03-31/functions/{self.function.function_arn}/invocations"
        return apigw.Integration(
            type=apigw.IntegrationType.AWS_PROXY,
            integration_http_method="POST",
            uri=f"arn:{Aws.PARTITION}:apigateway:{Aws.REGION}:lambda:{invocations}",
        )

    def _add_routes(self) -> None:
        validator = self.api.add_request_validator(
            "Validator", validate_request_body=True, validate_request_parameters=True
        )
        # Only the shape API Gateway can check cheaply; the frontend validates fields itself.
        json_object = self.api.add_model(
            "JsonObject",
            content_type="application/json",
            schema=apigw.JsonSchema(schema=apigw.JsonSchemaVersion.DRAFT4, type=apigw.JsonSchemaType.OBJECT),
        )
        integration = self._invoke_integration()
        for path, methods in frontend_routes().items():
            resource = self.api.root.resource_for_path(path)
            parameters = {
                f"method.request.path.{segment[1:-1]}": True for segment in path.split("/") if segment.startswith("{")
            }
            for method in methods:
                resource.add_method(
                    method,
                    integration,
                    request_validator=validator,
                    request_parameters=parameters or None,
                    request_models={"application/json": json_object} if method in WITH_BODY else None,
                )

    def _grant_iam(self) -> None:
        """What the frontend asks IAM (atf_core.item_access): the policies of the account's users and roles
        that call a route spanning lambdas, simulated (and a session's role read by name, for its path)."""
        stack = Stack.of(self)
        # Written with the partition's token (not format_arn's literal) so that every environment names them alike.
        users, roles = (f"arn:{Aws.PARTITION}:iam::{Aws.ACCOUNT_ID}:{kind}/*" for kind in ("user", "role"))
        arns = [users, roles]
        actions = service_actions("frontend", "iam")
        on_roles = [a for a in actions if a in ROLE_ONLY_ACTIONS]
        on_both = [a for a in actions if a not in ROLE_ONLY_ACTIONS]
        iam.Grant.add_to_principal(grantee=self.function, actions=on_both, resource_arns=arns)
        iam.Grant.add_to_principal(grantee=self.function, actions=on_roles, resource_arns=[roles])
        for arn in arns:
            acknowledge(
                self.handler.role,
                f"AwsSolutions-IAM5[Resource::{rendered(stack, arn)}]",
                "The callers of a batch or chain spanning lambdas are any of the account's users and roles: the "
                "frontend simulates their policies (read-only), and reads a role to learn its path",
            )

    def _acknowledge(self) -> None:
        acknowledge(
            self.api,
            "AwsSolutions-COG4",
            "Callers are services and people with AWS credentials: every method uses IAM (SigV4) authorization, "
            "not a Cognito user pool",
        )
        acknowledge(
            self.api,
            "AwsSolutions-APIG3",
            "Only SigV4-signed requests from principals granted execute-api:Invoke reach the function, and the stage "
            "is throttled; a WAF web ACL can be associated per environment if the API is ever opened wider",
        )

    def grant_invoke(self, grantee: iam.IGrantable, patterns: Sequence[tuple[str, str]]) -> iam.Grant:
        """execute-api:Invoke on exactly these routes of this API's stage ((method, resource path) pairs, as
        atf_core.access.grant_patterns writes them)."""
        stage = self.api.deployment_stage.stage_name
        arns = [self.api.arn_for_execute_api(method, path, stage) for method, path in patterns]
        if isinstance(grantee, Construct):
            for arn in (a for a in arns if "*" in a):
                acknowledge(
                    grantee,
                    f"AwsSolutions-IAM5[Resource::{rendered(Stack.of(self), arn)}]",
                    "One route of the API: the `*` is the task id, collection, schedule or "
                    "chain the path names (atf_core.access shows no such pattern reaches another route)",
                )
        return iam.Grant.add_to_principal(grantee=grantee, actions=["execute-api:Invoke"], resource_arns=arns)

    @property
    def url(self) -> str:
        return self.api.url
