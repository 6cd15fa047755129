"""The frontend Lambda: the REST API under /v1, behind API Gateway with IAM (SigV4) auth.

Routes only translate HTTP to atf_core calls: validation is the schema's
pydantic models (through Powertools' OpenAPI validation), decisions are
Scheduling's, Gating's and Stats'. Changes to waiting tasks, dead letters, schedules and chains have
their routes in routers of their own, included here.
"""

from __future__ import annotations

import warnings
from typing import Annotated, Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from atf_core.access import route
from atf_core.api import BatchRequest, BatchResult, GateList, GateRequest, ScheduledTask
from atf_core.schema import Gate, ScheduleRequest, Task, decode_json
from atf_core.stats import LambdaStats
from atf_core.telemetry import metrics_namespace
from functions.frontend import (
    chains,
    dead_letters,
    errors,
    lambda_chains,
    lambda_gates,
    lambda_schedules,
    lambda_tasks,
    schedules,
    task_changes,
)
from functions.frontend.bodies import write_body
from functions.frontend.openapi_doc import JSON, document, error_responses, ok
from functions.frontend.params import Collection, LambdaName, TaskId
from functions.frontend.services import services
from functions.frontend.spanning import require_each
from functions.frontend.submit import schedule_batch_of, schedule_one

# Reads and refused requests emit no metric; Powertools would warn about each of them.
warnings.filterwarnings("ignore", message="No application metrics to publish")
logger = Logger(service="atf-frontend")
metrics = Metrics(namespace=metrics_namespace(), service="frontend")
tracer = Tracer(service="atf-frontend")
# Bodies read as strict JSON: Python's reader takes NaN and the infinities, which JSON has no words for.
app = APIGatewayRestResolver(enable_validation=True, serializer=write_body, json_body_deserializer=decode_json)
errors.install(app, logger)


@app.post(
    "/v1/tasks",
    summary="Schedule a task",
    responses={
        **ok(201, "Scheduled", ScheduledTask),
        **ok(200, "An earlier request with this key made it", ScheduledTask),
        **error_responses(400, 409, 415),
    },
)
def schedule_task(request: Annotated[ScheduleRequest, Body()]) -> Response[ScheduledTask]:
    return schedule_one(request)


@app.post(
    "/v1/tasks/batch",
    summary="Schedule up to 100 tasks of any lambdas the caller may use, with a result for each",
    responses={**ok(200, "One result per task, in order", BatchResult), **error_responses(400, 409, 415)},
)
def schedule_tasks(batch: Annotated[BatchRequest, Body()]) -> BatchResult:
    items = [(f"tasks[{i}].lambda", task.lambda_) for i, task in enumerate(batch.tasks)]
    require_each(route("POST", "/v1/tasks/batch"), app.current_event, items)
    return schedule_batch_of(batch)


@app.get(
    "/v1/tasks/<task_id>",
    summary="A task's record: status, attempts, timestamps, last error",
    responses={**ok(200, "The task", Task), **error_responses(400, 404)},
)
def get_task(task_id: TaskId) -> Task:
    return services().scheduling.get(task_id)


@app.delete(
    "/v1/tasks/<task_id>",
    summary="Cancel a task that has not started",
    responses={**ok(200, "Cancelled (or already was)", Task), **error_responses(400, 404, 409)},
)
def cancel_task(task_id: TaskId) -> Task:
    return services().scheduling.cancel(task_id)


@app.get("/v1/gates", summary="The gates in force", responses={**ok(200, "Gates", GateList), **error_responses()})
def list_gates() -> GateList:
    return GateList(gates=list(services().gating.view().gates))


@app.put(
    "/v1/gates/<lambda_name>",
    summary="Pause or drop a lambda",
    responses={**ok(200, "The gate in force", Gate), **error_responses(400, 409, 415)},
)
def gate_lambda(lambda_name: LambdaName, gate: Annotated[GateRequest, Body()]) -> Gate:
    return services().gating.set(lambda_name, None, gate.action, gate.until, gate.reason)


@app.put(
    "/v1/gates/<lambda_name>/<collection>",
    summary="Pause or drop one collection of a lambda",
    responses={**ok(200, "The gate in force", Gate), **error_responses(400, 409, 415)},
)
def gate_collection(lambda_name: LambdaName, collection: Collection, gate: Annotated[GateRequest, Body()]) -> Gate:
    return services().gating.set(lambda_name, collection, gate.action, gate.until, gate.reason)


@app.delete(
    "/v1/gates/<lambda_name>",
    summary="Lift a lambda's gate",
    responses={204: {"description": "Lifted"}, **error_responses(400, 404)},
)
def lift_lambda_gate(lambda_name: LambdaName) -> Response[None]:
    services().gating.lift(lambda_name, None)
    return Response(status_code=204)


@app.delete(
    "/v1/gates/<lambda_name>/<collection>",
    summary="Lift a collection's gate",
    responses={204: {"description": "Lifted"}, **error_responses(400, 404)},
)
def lift_collection_gate(lambda_name: LambdaName, collection: Collection) -> Response[None]:
    services().gating.lift(lambda_name, collection)
    return Response(status_code=204)


@app.get(
    "/v1/lambdas/<lambda_name>/stats",
    summary="Counts by state and priority, the oldest due task, start-lag, dead letters, schedules and limits",
    responses={**ok(200, "Statistics of the live tasks", LambdaStats), **error_responses(400)},
)
def lambda_stats(lambda_name: LambdaName) -> LambdaStats:
    return services().stats.of(lambda_name)


for router in (
    task_changes.router,
    dead_letters.router,
    schedules.router,
    chains.router,
    lambda_tasks.router,
    lambda_gates.router,
    lambda_schedules.router,
    lambda_chains.router,
):
    app.include_router(router)


@app.get("/v1/openapi.json", summary="This document", include_in_schema=False)
def openapi() -> Response[dict[str, Any]]:
    return Response(status_code=200, content_type=JSON, body=document(app))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(errors.media_type_lowercased(event), context)
