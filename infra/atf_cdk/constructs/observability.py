"""The environment's CloudWatch dashboard and alarms.

The framework's own metrics come from Powertools (EMF) under atf_core.telemetry's
namespace, with `lambda` and `priority` dimensions where they apply. Powertools
adds a `service` dimension of its own, so the graphs find series with SEARCH,
which matches whatever dimensions come along. Alarms cannot use SEARCH: they
name the exact series, and the one on start lag expects the worker hosts'
(`service` = workers.WORKER_SERVICE, which this app also sets as their
POWERTOOLS_SERVICE_NAME).

A lambda's alarms live in its worker service's nested stack, next to its queues
(LambdaAlarms); the topic, the consumer's alarm and the dashboard are the environment's.
Each worker service has a graph of its backlog, the tasks the consumer sees coming due
(the look-ahead its scaling acts on, constructs/scaling.py) and its running tasks. CloudWatch
shows at most 100 alarms in an alarm-status widget and 100 lines in a graph, so
with many lambdas the dashboard has several of each.

Flow keys (a customer id: millions of values) are never a metric dimension, which would bill a metric per
key. The tasks flow keys held back are metrics per lambda, drawn for the whole environment by Metrics
Insights queries (a line per lambda, a fixed size however many lambdas there are), and Logs Insights queries
over the worker services' log groups (at most 50 a query) rank the keys themselves, from the flow_key on the
hosts' log lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from atf_cdk.constructs.queues import TaskQueue
from atf_cdk.constructs.scaling import CONTAINER_INSIGHTS, ServiceView
from atf_cdk.constructs.table import TaskTable
from atf_cdk.constructs.workers import WORKER_SERVICE
from atf_core.config import LambdaSpec, StackConfig
from atf_core.definitions import QueueSpec, queue_specs
from atf_core.limits import KEY_HOLD_METRICS, KeyHold
from atf_core.telemetry import CONSUMER_SERVICE, Dimension, LogKey, LogLine, Metric

T = TypeVar("T")
PERIOD = Duration.minutes(1)
TASK_METRICS = {
    "scheduled": (Metric.SCHEDULED,),
    "started": (Metric.STARTED,),
    "succeeded": (Metric.SUCCEEDED,),
    "failed": (Metric.RETRIABLE_FAILURES, Metric.FATAL_FAILURES),
    "dropped": (Metric.DROPPED,),
}
LAG_PERCENTILES = ("p50", "p95", "p99")
ALARMS_PER_WIDGET = 100
LINES_PER_GRAPH = 100
# Logs Insights reads at most 50 log groups in a query; the keys are ranked on the worker hosts' lines.
LOG_GROUPS_PER_QUERY = 50
TOP_KEYS = 20
TOP_LAMBDAS = 10
BUSIEST_KEYS_QUERY = (
    f'filter message = "{LogLine.TASK_STARTED}" and ispresent({LogKey.FLOW_KEY})',
    f"stats count(*) as started by {LogKey.FLOW_KEY}, lambda",
    "sort started desc",
    f"limit {TOP_KEYS}",
)
HELD_KEYS_QUERY = (
    f'filter message = "{LogLine.HELD_BACK}"',
    f"stats count(*) as tasks by {LogKey.FLOW_KEY}, lambda, {LogKey.HELD_BY}",
    "sort tasks desc",
    f"limit {TOP_KEYS}",
)


def search(namespace: str, metrics: tuple[str, ...], statistic: str, **dimensions: str) -> str:
    names = " OR ".join(f'MetricName="{m}"' for m in metrics)
    terms = " ".join([f'Namespace="{namespace}"', f"({names})", *(f'{k}="{v}"' for k, v in dimensions.items())])
    return f"SEARCH('{terms}', '{statistic}', {int(PERIOD.to_seconds())})"


def summed(namespace: str, label: str, metrics: tuple[str, ...], **dimensions: str) -> cw.MathExpression:
    """One line: the sum of every series of these metrics (across priorities and emitters)."""
    return cw.MathExpression(
        expression=f"SUM({search(namespace, metrics, 'Sum', **dimensions)})",
        label=label,
        period=PERIOD,
        using_metrics={},
    )


def searched(namespace: str, label: str, metric: str, statistic: str, **dimensions: str) -> cw.MathExpression:
    """A line per series found (per priority, for a lambda's metrics)."""
    return cw.MathExpression(
        expression=search(namespace, (metric,), statistic, **dimensions), label=label, period=PERIOD, using_metrics={}
    )


def start_lag_metric(namespace: str, lambda_name: str, priority: str) -> cw.Metric:
    return cw.Metric(
        namespace=namespace,
        metric_name=Metric.START_LAG_MS,
        dimensions_map={Dimension.LAMBDA: lambda_name, Dimension.PRIORITY: priority, "service": WORKER_SERVICE},
        statistic="p95",
        period=PERIOD,
        unit=cw.Unit.MILLISECONDS,
    )


def notify(alarm: cw.Alarm, topic: sns.ITopic) -> cw.Alarm:
    alarm.add_alarm_action(cw_actions.SnsAction(topic))
    alarm.add_ok_action(cw_actions.SnsAction(topic))
    return alarm


class LambdaAlarms(Construct):
    """One lambda's alarms: start lag per priority against the objective, and any dead letter per queue."""

    def __init__(
        self, scope: Construct, id: str, *, lambda_name: str, priorities: list[str], queues: list[TaskQueue],
        objective_ms: int, topic: sns.ITopic, namespace: str,
    ) -> None:  # fmt: skip
        super().__init__(scope, id)
        self._namespace = namespace
        self.alarms = [
            *(self._start_lag(lambda_name, priority, objective_ms) for priority in priorities),
            *(self._dead_letters(q) for q in queues),
        ]
        for alarm in self.alarms:
            notify(alarm, topic)

    def _start_lag(self, name: str, priority: str, objective_ms: int) -> cw.Alarm:
        return start_lag_metric(self._namespace, name, priority).create_alarm(
            self,
            f"StartLag-{name}-{priority}",
            alarm_description=(
                f"Start lag p95 of {name}/{priority} above the {objective_ms} ms objective for 3 of the last 5 minutes"
            ),
            threshold=objective_ms,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=5,
            datapoints_to_alarm=3,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )

    def _dead_letters(self, q: TaskQueue) -> cw.Alarm:
        return q.dead_letter.metric_approximate_number_of_messages_visible(
            period=PERIOD, statistic="Maximum"
        ).create_alarm(
            self,
            f"DeadLetters-{q.spec.label}",
            alarm_description=f"Messages in {q.spec.dead_letter_name}: deliveries to {q.spec.name} keep failing",
            threshold=0,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )


@dataclass(frozen=True)
class ObservabilityProps:
    config: StackConfig
    table: TaskTable
    consumer: lambda_.Function
    frontend: lambda_.Function
    consumer_groups: int
    objective_ms: int
    alarm_key: kms.IKey
    alarm_emails: list[str]


class Observability(Construct):
    """The topic and the consumer's alarm first (the lambdas' alarms notify the topic), then `add_dashboard`
    once every lambda's alarms exist."""

    def __init__(self, scope: Construct, id: str, props: ObservabilityProps) -> None:
        super().__init__(scope, id)
        self.props = props
        self._namespace = props.config.metrics_namespace  # this environment's alone (telemetry.namespace_of)
        self.topic = sns.Topic(
            self, "Alarms", display_name=f"{Stack.of(self).stack_name} alarms", master_key=props.alarm_key,
            enforce_ssl=True,
        )  # fmt: skip
        _allow_cloudwatch(props.alarm_key)
        for email in props.alarm_emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
        self.consumer_alarm = notify(self._consumer_alarm(), self.topic)
        self.housekeeping_alarm = notify(self._housekeeping_alarm(), self.topic)

    def add_dashboard(self, lambda_alarms: list[cw.Alarm], services: list[ServiceView]) -> cw.Dashboard:
        self.alarms = [*lambda_alarms, self.consumer_alarm, self.housekeeping_alarm]
        self.dashboard = cw.Dashboard(
            self,
            "Dashboard",
            dashboard_name=Stack.of(self).stack_name,
            default_interval=Duration.hours(3),
        )
        self._widgets(queue_specs(self.props.config), services)
        return self.dashboard

    # Alarms

    def _consumer_alarm(self) -> cw.Alarm:
        return self.props.consumer.metric_errors(period=Duration.minutes(5), statistic="Sum").create_alarm(
            self,
            "ConsumerErrors",
            alarm_description="The store consumer failed: tasks may not be enqueued on time",
            threshold=0,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )

    def _housekeeping_alarm(self) -> cw.Alarm:
        # The consumer logs each failed chore and goes on polling, so its invocations do not fail: this
        # is the only signal that periodic schedules stopped firing or chains stopped moving.
        failures = cw.Metric(
            namespace=self._namespace,
            metric_name=Metric.HOUSEKEEPING_FAILURES,
            dimensions_map={"service": CONSUMER_SERVICE},
            statistic="Sum",
            period=Duration.minutes(5),
        )
        return failures.create_alarm(
            self,
            "HousekeepingFailures",
            alarm_description=(
                "The consumer's housekeeping keeps failing (firing periodic schedules, sweeping chains): see the"
                " consumer's log lines 'housekeeping ... failed'"
            ),
            threshold=0,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=3,
            datapoints_to_alarm=3,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )

    # Dashboard

    def _widgets(self, queues: list[QueueSpec], services: list[ServiceView]) -> None:
        config = self.props.config
        for number, alarms in enumerate(_chunks(self.alarms, ALARMS_PER_WIDGET)):
            title = "Alarms" if number == 0 else f"Alarms ({number + 1})"
            self.dashboard.add_widgets(cw.AlarmStatusWidget(title=title, alarms=alarms, width=24, height=3))  # type: ignore[arg-type]
        for name in config.lambdas:
            self.dashboard.add_widgets(self._tasks_widget(name), self._start_lag_widget(name))
        if any(holds_back(spec) for spec in config.lambdas.values()):
            self.dashboard.add_widgets(
                *(_key_holds_widget(self._namespace, hold, metric) for hold, metric in KEY_HOLD_METRICS.items())
            )
        for number, part in enumerate(_chunks(services, LOG_GROUPS_PER_QUERY)):
            self.dashboard.add_widgets(*_flow_key_queries([view.log_group_name for view in part], number))
        for number in range(0, len(services), 2):
            self.dashboard.add_widgets(*(self._service_widget(view) for view in services[number : number + 2]))
        for number, part in enumerate(_chunks(queues, LINES_PER_GRAPH)):
            self.dashboard.add_widgets(*self._queue_widgets(part, "" if number == 0 else f" ({number + 1})"))
        self.dashboard.add_widgets(*self._consumer_widgets())

    def _tasks_widget(self, name: str) -> cw.GraphWidget:
        return cw.GraphWidget(
            title=f"{name}: tasks per minute",
            left=[
                summed(self._namespace, label, metrics, **{Dimension.LAMBDA: name})
                for label, metrics in TASK_METRICS.items()
            ],
            width=12,
        )

    def _start_lag_widget(self, name: str) -> cw.GraphWidget:
        return cw.GraphWidget(
            title=f"{name}: start lag (ms) by priority",
            left=[
                searched(
                    self._namespace,
                    percentile,
                    Metric.START_LAG_MS,
                    percentile,
                    **{Dimension.LAMBDA: name},
                )
                for percentile in LAG_PERCENTILES
            ],
            left_annotations=[
                cw.HorizontalAnnotation(value=self.props.objective_ms, label="objective", color=cw.Color.RED)
            ],
            width=12,
        )

    def _service_widget(self, view: ServiceView) -> cw.GraphWidget:
        """What the service scales on, drawn with SEARCH (a few hundred bytes a service: the environment's
        template must stay under CloudFormation's 1 MB with a hundred services)."""
        queues = " OR ".join(f'QueueName="{name}"' for name in view.queue_names)
        sqs = 'MetricName="ApproximateNumberOfMessagesVisible" OR MetricName="ApproximateNumberOfMessagesNotVisible"'
        lambdas = " OR ".join(f'{Dimension.LAMBDA}="{name}"' for name in view.lambdas)
        due = f'Namespace="{self._namespace}" MetricName="{Metric.TASKS_DUE_SOON}" ({lambdas})'
        tasks = f'Namespace="{CONTAINER_INSIGHTS}" ServiceName="{view.service_name}"'
        period = int(PERIOD.to_seconds())

        def line(expression: str, label: str) -> cw.MathExpression:
            return cw.MathExpression(expression=expression, label=label, period=PERIOD, using_metrics={})

        return cw.GraphWidget(
            title=f"Worker service {view.name}: backlog, tasks due soon, tasks",
            left=[
                line(f"SUM(SEARCH('({sqs}) ({queues})', 'Maximum', {period}))", "queued and in flight"),
                line(f"{view.consumer_groups} * SUM(SEARCH('{due}', 'Average', {period}))", "due soon (look-ahead)"),
            ],
            right=[
                line(f"SUM(SEARCH('{tasks} MetricName=\"RunningTaskCount\"', 'Average', {period}))", "running tasks"),
                line(f"SUM(SEARCH('{tasks} MetricName=\"DesiredTaskCount\"', 'Average', {period}))", "desired tasks"),
            ],
            width=12,
        )

    def _queue_widgets(self, queues: list[QueueSpec], suffix: str) -> list[cw.IWidget]:
        """By queue name, which the specs give: no reference into the lambdas' nested stacks."""
        return [
            cw.GraphWidget(
                title=f"Queue depth{suffix}",
                left=[_queue_metric("ApproximateNumberOfMessagesVisible", q.name, "Average") for q in queues],
                width=8,
            ),
            cw.GraphWidget(
                title=f"Oldest message age (s){suffix}",
                left=[_queue_metric("ApproximateAgeOfOldestMessage", q.name, "Maximum") for q in queues],
                width=8,
            ),
            cw.GraphWidget(
                title=f"Dead letters{suffix}",
                left=[
                    _queue_metric("ApproximateNumberOfMessagesVisible", q.dead_letter_name, "Maximum") for q in queues
                ],
                width=8,
            ),
        ]

    def _consumer_widgets(self) -> list[cw.IWidget]:
        table, namespace = self.props.table.table, self._namespace
        return [
            cw.GraphWidget(
                title="Consumer loop (s)",
                left=[searched(namespace, s, Metric.CONSUMER_LOOP_SECONDS, s) for s in ("p50", "p99", "Maximum")],
                width=8,
            ),
            cw.GraphWidget(
                title="Tasks per loop",
                left=[searched(namespace, s, Metric.TASKS_PER_LOOP, s) for s in ("Average", "Maximum")],
                right=[searched(namespace, "consumer errors", Metric.CONSUMER_ERRORS, "Sum")],
                width=8,
            ),
            cw.GraphWidget(
                title="Throttles",
                left=[
                    self.props.consumer.metric_throttles(period=PERIOD, label="consumer Lambda"),
                    self.props.frontend.metric_throttles(period=PERIOD, label="frontend Lambda"),
                    table.metric("ReadThrottleEvents", period=PERIOD, statistic="Sum", label="table reads"),
                    table.metric("WriteThrottleEvents", period=PERIOD, statistic="Sum", label="table writes"),
                    summed(namespace, "ATF throttles", (Metric.THROTTLES,)),
                ],
                width=8,
            ),
        ]


def holds_back(spec: LambdaSpec) -> bool:
    """Whether the lambda's flow keys can hold a task back (a singleton-only key refuses at scheduling)."""
    limits = spec.key_limits
    return limits is not None and bool(limits.max_running or limits.max_starts_per_second)


def held_back_query(namespace: str, metric: str) -> str:
    """Metrics Insights: the metric summed per lambda (over priorities and emitters), the busiest lambdas."""
    by = f'"{Dimension.LAMBDA}"'
    return f'SELECT SUM({metric}) FROM "{namespace}" GROUP BY {by} ORDER BY SUM() DESC LIMIT {TOP_LAMBDAS}'


def _key_holds_widget(namespace: str, hold: KeyHold, metric: str) -> cw.GraphWidget:
    """Tasks the flow keys held back, a line per lambda: one query for the whole environment, not a widget or a
    metric per lambda, let alone per key (CloudWatch bills each metric; a key dimension would be one per customer
    id). Titled as the logs' held_by says it, so the ranking of keys below reads alike."""
    return cw.GraphWidget(
        title=f"Tasks held back by their flow key: {hold} ({metric} per minute, by lambda)",
        left=[cw.MathExpression(expression=held_back_query(namespace, metric), period=PERIOD, using_metrics={})],
        width=8,
    )


def _flow_key_queries(log_groups: list[str], number: int) -> list[cw.IWidget]:
    """The busiest flow keys and those held back most, over the dashboard's time range, from the worker
    hosts' log lines: the keys are on the lines, never in a metric's dimensions."""
    suffix = "" if number == 0 else f" ({number + 1})"
    return [
        cw.LogQueryWidget(
            title=f"Busiest flow keys: tasks started{suffix}", log_group_names=log_groups,
            query_lines=list(BUSIEST_KEYS_QUERY), view=cw.LogQueryVisualizationType.TABLE, width=12,
        ),
        cw.LogQueryWidget(
            title=f"Flow keys holding tasks back most{suffix}", log_group_names=log_groups,
            query_lines=list(HELD_KEYS_QUERY), view=cw.LogQueryVisualizationType.TABLE, width=12,
        ),
    ]  # fmt: skip


def _queue_metric(metric: str, queue_name: str, statistic: str) -> cw.Metric:
    return cw.Metric(
        namespace="AWS/SQS",
        metric_name=metric,
        dimensions_map={"QueueName": queue_name},
        statistic=statistic,
        period=PERIOD,
        label=queue_name,
    )


def _chunks(items: list[T], size: int) -> list[list[T]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


def _allow_cloudwatch(key: kms.IKey) -> None:
    """CloudWatch publishes alarms to an encrypted topic only if the key lets it, for this account's alarms."""
    stack = Stack.of(key)
    key.add_to_resource_policy(
        iam.PolicyStatement(
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["kms:Decrypt", "kms:GenerateDataKey*"],
            resources=["*"],
            conditions={
                "ArnLike": {"aws:SourceArn": f"arn:{stack.partition}:cloudwatch:{stack.region}:{stack.account}:alarm:*"}
            },
        )
    )
