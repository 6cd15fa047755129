"""Metric names, shared by the components that emit them and the dashboard that shows them.

Every component emits CloudWatch EMF through Powertools Metrics under one
namespace, with the lambda and priority as dimensions where they apply.
"""

NAMESPACE = "ATF"


class Metric:
    SCHEDULED = "Scheduled"
    ENQUEUED = "Enqueued"
    REQUEUED = "Requeued"
    STARTED = "Started"
    SUCCEEDED = "Succeeded"
    RETRIABLE_FAILURES = "RetriableFailures"
    FATAL_FAILURES = "FatalFailures"
    DROPPED = "Dropped"
    EXHAUSTED = "Exhausted"
    START_LAG_MS = "StartLagMs"
    EXECUTION_MS = "ExecutionMs"
    CONSUMER_LOOP_SECONDS = "ConsumerLoopSeconds"
    TASKS_PER_LOOP = "TasksPerLoop"
    THROTTLES = "Throttles"
    CONSUMER_ERRORS = "ConsumerErrors"


class Dimension:
    LAMBDA = "lambda"
    PRIORITY = "priority"
