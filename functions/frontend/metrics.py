"""The frontend's own metrics, beside the per-invocation ones Powertools flushes."""

from __future__ import annotations

from collections import Counter

from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from atf_core.telemetry import Dimension, Metric, metrics_namespace


def count_scheduled(lambda_names: list[str]) -> None:
    """One Scheduled data point per lambda: tasks the API created (single tasks, batches, chain links)."""
    if is_metrics_disabled():  # single_metric writes even when Metrics is disabled
        return
    for name, count in Counter(lambda_names).items():
        with single_metric(
            name=Metric.SCHEDULED, unit=MetricUnit.Count, value=count, namespace=metrics_namespace()
        ) as metric:
            metric.add_dimension(Dimension.LAMBDA, name)
