"""A worker service scales on its backlog per running task, and ahead of the tasks about to come due.

The backlog of a service is, over its lambdas' queues, the messages waiting (visible) and in flight
(received by a host and not yet deleted), plus the tasks the consumer sees coming due within its
look-ahead. That last term is what no queue-based autoscaler has: the schedule index knows the
future, so a midnight batch or a cron fan-out starts hosts before its messages exist.

The look-ahead metric (atf_core.telemetry.Metric.TASKS_DUE_SOON, namespace ATF, dimensions
`lambda` and `service` = the consumer's) is published by every consumer group once an invocation
(atf_core.consumer.due_soon): the count of that lambda's new tasks due within `due_soon_window` on the
shards the group polls. The
lambda's total is then the minute's Average times the number of groups, whatever the cadence, as long
as every group publishes alike.

Two policies act on the one ECS service:

- target tracking on backlog / running tasks (CloudWatch metric math, which CDK's L2 target tracking
  cannot express, hence the L1 policy), keeping it near `backlog_per_task`; it scales in to
  `min_tasks`, zero included, once nothing is queued, in flight or due;
- from zero: target tracking multiplies the current count by the ratio, so it cannot leave zero.
  An alarm on "a backlog and no desired task" sets the count at once (ExactCapacity, idempotent while
  the alarm lasts), from 1 up to `max_tasks` by the size of the backlog. The queue metrics it reads
  keep flowing while the service is at zero because the consumer reads every queue hourly
  (atf_core.consumer.wake): SQS publishes nothing for a queue left six hours without a call.

CloudWatch takes at most 10 metrics in an alarm's expression: a service scales on 2 per queue, 1 per
lambda and 1 task count, so it may serve up to 4 queues of one lambda (or 2 lambdas of 1-2 priorities...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from aws_cdk import Duration
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_ecs as ecs
from constructs import Construct

from atf_cdk.service import Scaling
from atf_core.telemetry import CONSUMER_SERVICE, Dimension, Metric

PERIOD = Duration.minutes(1)
CONTAINER_INSIGHTS = "ECS/ContainerInsights"
MAX_METRICS_PER_EXPRESSION = 10
SCALE_OUT_COOLDOWN = Duration.minutes(1)
SCALE_IN_COOLDOWN = Duration.minutes(5)


def due_soon_metric(namespace: str, lambda_name: str) -> cw.Metric:
    """One lambda's look-ahead series, as the consumer publishes it (one value per group and invocation)."""
    return cw.Metric(
        namespace=namespace,
        metric_name=Metric.TASKS_DUE_SOON,
        dimensions_map={Dimension.LAMBDA: lambda_name, "service": CONSUMER_SERVICE},
        statistic="Average",
        period=PERIOD,
    )


def task_count_metric(cluster_name: str, service_name: str, metric: str) -> cw.Metric:
    return cw.Metric(
        namespace=CONTAINER_INSIGHTS,
        metric_name=metric,
        dimensions_map={"ClusterName": cluster_name, "ServiceName": service_name},
        statistic="Average",
        period=PERIOD,
    )


def queue_metric(queue_name: str, metric: str) -> cw.Metric:
    return cw.Metric(
        namespace="AWS/SQS",
        metric_name=metric,
        dimensions_map={"QueueName": queue_name},
        statistic="Maximum",
        period=PERIOD,
    )


@dataclass(frozen=True)
class ServiceView:
    """A worker service by name: what its scaling and the dashboard read, with no reference between stacks."""

    name: str  # the WorkerService's
    service_name: str  # the ECS service's
    cluster_name: str
    lambdas: list[str]
    queue_names: list[str]  # every queue, split priorities' parts included
    consumer_groups: int
    metrics_namespace: str  # the environment's (StackConfig.metrics_namespace): its consumer's look-ahead series
    # Where a priority is split over several queues, its first queue and how many there are: the consumer
    # sends to the parts in turn and every host reads them all, so they fill alike, and the backlog reads
    # the first part times the parts (an alarm takes 10 metrics: two a queue would run out at five queues).
    split: dict[str, int] = field(default_factory=dict)

    @property
    def log_group_name(self) -> str:
        return worker_log_group_name(self.service_name)

    @property
    def scaled_queues(self) -> list[tuple[str, int]]:
        """(queue, weight) pairs the backlog reads: one a priority, weighted by its parts."""
        parts = {f"{first}-{part}" for first, count in self.split.items() for part in range(1, count)}
        return [(name, self.split.get(name, 1)) for name in self.queue_names if name not in parts]


def worker_log_group_name(service_name: str) -> str:
    """The log group of a worker service's hosts (ECS's own naming, /ecs/<task family>). Named rather than
    generated so that the dashboard's Logs Insights queries, in the environment's stack, name it with no
    reference into the service's nested stack."""
    return f"/ecs/{service_name}"


class Backlog:
    """The metrics and the expression of a service's backlog: queued + in flight + groups x due soon."""

    def __init__(self, view: ServiceView) -> None:
        self.metrics: dict[str, cw.Metric] = {}
        terms = []
        for number, (name, weight) in enumerate(view.scaled_queues):
            visible, in_flight = f"visible{number}", f"inflight{number}"
            self.metrics[visible] = queue_metric(name, "ApproximateNumberOfMessagesVisible")
            self.metrics[in_flight] = queue_metric(name, "ApproximateNumberOfMessagesNotVisible")
            term = f"FILL({visible}, 0) + FILL({in_flight}, 0)"
            terms.append(term if weight == 1 else f"{weight} * ({term})")
        due = []
        for number, name in enumerate(view.lambdas):
            self.metrics[f"due{number}"] = due_soon_metric(view.metrics_namespace, name)
            due.append(f"FILL(due{number}, 0)")
        self.queued = " + ".join(terms)
        self.due = f"{view.consumer_groups} * ({' + '.join(due)})"
        self.expression = f"{self.queued} + {self.due}"

    def used_by(self, expression: str) -> dict[str, cw.IMetric]:
        return {id: metric for id, metric in self.metrics.items() if re.search(rf"\b{id}\b", expression)}

    def with_metric(self, id: str, metric: cw.Metric) -> dict[str, cw.IMetric]:
        using: dict[str, cw.IMetric] = {**self.metrics, id: metric}
        if len(using) > MAX_METRICS_PER_EXPRESSION:
            raise ValueError(
                f"a worker service scales on {len(using)} metrics (2 per queue, 1 per lambda, 1 task count); "
                f"CloudWatch alarms take {MAX_METRICS_PER_EXPRESSION}: serve fewer lambdas or priorities per service"
            )
        return using


class BacklogScaling(Construct):
    """Target tracking of backlog per running task, and the step from zero. `scaling` None: no scaling
    (a service without an image stays at zero)."""

    def __init__(
        self, scope: Construct, id: str, *, service: ecs.FargateService, view: ServiceView, scaling: Scaling | None
    ) -> None:
        super().__init__(scope, id)
        self.view = view
        self.backlog = Backlog(view)
        running = task_count_metric(view.cluster_name, view.service_name, "RunningTaskCount")
        desired = task_count_metric(view.cluster_name, view.service_name, "DesiredTaskCount")
        self.per_task = cw.MathExpression(
            expression=f"({self.backlog.expression}) / MAX([FILL(running, 0), 1])",
            using_metrics=self.backlog.with_metric("running", running),
            label="backlog per running task",
            period=PERIOD,
        )
        self.without_tasks = cw.MathExpression(
            expression=f"IF(FILL(desired, 0) < 1, {self.backlog.expression}, 0)",
            using_metrics=self.backlog.with_metric("desired", desired),
            label="backlog while no task is desired",
            period=PERIOD,
        )
        if scaling is None or scaling.max_tasks == 0:
            return
        self.target = appscaling.ScalableTarget(
            self,
            "Target",
            service_namespace=appscaling.ServiceNamespace.ECS,
            scalable_dimension="ecs:service:DesiredCount",
            resource_id=f"service/{view.cluster_name}/{service.service_name}",
            min_capacity=scaling.min_tasks,
            max_capacity=scaling.max_tasks,
        )
        self.target.node.add_dependency(service)
        self.tracking = self._tracking(scaling, view.service_name)
        self.from_zero_alarm = self._from_zero(scaling)

    def _tracking(self, scaling: Scaling, service_name: str) -> appscaling.CfnScalingPolicy:
        queries = [
            appscaling.CfnScalingPolicy.TargetTrackingMetricDataQueryProperty(
                id=id,
                metric_stat=appscaling.CfnScalingPolicy.TargetTrackingMetricStatProperty(
                    metric=appscaling.CfnScalingPolicy.TargetTrackingMetricProperty(
                        namespace=metric.namespace,
                        metric_name=metric.metric_name,
                        dimensions=[
                            appscaling.CfnScalingPolicy.TargetTrackingMetricDimensionProperty(name=k, value=v)
                            for k, v in (metric.dimensions or {}).items()
                        ],
                    ),
                    stat=metric.statistic,
                ),
                return_data=False,
            )
            for id, metric in self.per_task.using_metrics.items()
            if isinstance(metric, cw.Metric)
        ]
        queries.append(
            appscaling.CfnScalingPolicy.TargetTrackingMetricDataQueryProperty(
                id="backlogpertask", expression=self.per_task.expression, label=self.per_task.label, return_data=True
            )
        )
        return appscaling.CfnScalingPolicy(
            self,
            "BacklogPerTask",
            policy_name=f"{service_name}-backlog-per-task",
            policy_type="TargetTrackingScaling",
            scaling_target_id=self.target.scalable_target_id,
            target_tracking_scaling_policy_configuration=appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty(
                target_value=scaling.backlog_per_task,
                customized_metric_specification=appscaling.CfnScalingPolicy.CustomizedMetricSpecificationProperty(
                    metrics=queries
                ),
                scale_out_cooldown=int(SCALE_OUT_COOLDOWN.to_seconds()),
                scale_in_cooldown=int(SCALE_IN_COOLDOWN.to_seconds()),
            ),
        )

    def _from_zero(self, scaling: Scaling) -> cw.Alarm:
        action = appscaling.StepScalingAction(
            self,
            "FromZero",
            scaling_target=self.target,
            adjustment_type=appscaling.AdjustmentType.EXACT_CAPACITY,
            metric_aggregation_type=appscaling.MetricAggregationType.MAXIMUM,
            cooldown=SCALE_OUT_COOLDOWN,
        )
        for lower, upper, tasks in from_zero_steps(scaling):
            action.add_adjustment(adjustment=tasks, lower_bound=lower, upper_bound=upper)
        alarm = self.without_tasks.create_alarm(
            self,
            "BacklogWithoutTasks",
            alarm_description="Tasks are queued, in flight or coming due and the service runs none: start some",
            threshold=0,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(cw_actions.ApplicationScalingAction(action))
        return alarm


def from_zero_steps(scaling: Scaling) -> list[tuple[float, float | None, int]]:
    """(lower, upper, tasks): the backlog above the alarm's threshold (0) and the tasks to start, doubling
    from 1 to max_tasks, each step's tasks enough for backlog_per_task each."""
    steps: list[tuple[float, float | None, int]] = []
    tasks, lower = 1, 0.0
    while tasks < scaling.max_tasks:
        upper = float(tasks * scaling.backlog_per_task)
        steps.append((lower, upper, tasks))
        tasks, lower = min(2 * tasks, scaling.max_tasks), upper
    steps.append((lower, None, max(1, scaling.max_tasks)))
    return steps
