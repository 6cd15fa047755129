"""How many tasks of each lambda come due soon: what the worker services scale ahead of.

No queue-based autoscaler can see a burst before its messages exist; the schedule
index can. Each consumer group counts, once an invocation (a minute), the waiting
entries of the shards it polls whose next_timestamp falls in (now, now + window],
and publishes the count per lambda as TasksDueSoon. Those are the new (and
redriven) tasks; a retry waiting out its backoff sits with the running tasks,
whose entries are lease deadlines, and is left out: its hosts are already up. The CDK app's scaling
(atf_cdk.constructs.scaling) adds the groups up: every group publishes alike.

The count is a Select=COUNT query per (lambda, priority, shard), cut after a few
pages: it reads index entries, not items, and a count of many thousands already
asks for the most hosts a service allows, so the cut costs no precision that
matters and bounds the read a burst can cost.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from atf_core.config import StackConfig
from atf_core.consumer.consumer import ConsumerGroup
from atf_core.lifecycle import Assoc
from atf_core.schema import to_ms
from atf_core.store.codec import index_partition
from atf_core.store.index import IndexStore

MAX_PAGES = 2  # per partition: a page is up to 1 MB of index entries


class DueSoon:
    """Counts, per lambda, the waiting tasks due within the window on one consumer group's shards."""

    def __init__(self, index: IndexStore, config: StackConfig, group: ConsumerGroup | None = None) -> None:
        self._index = index
        self._config = config
        self._group = group or ConsumerGroup()

    def count(self, now: datetime) -> dict[str, int]:
        """Every lambda's count (zero included, so a quiet lambda reads 0, not "no data")."""
        window = self._config.due_soon_window
        if window <= 0:
            return {}
        low, high = to_ms(now) + 1, to_ms(now + timedelta(seconds=window))
        return {name: self._count_lambda(name, low, high) for name in self._config.lambdas}

    def _count_lambda(self, lambda_name: str, low: int, high: int) -> int:
        spec = self._config.lambdas[lambda_name]
        total = 0
        for priority in spec.priorities:
            for shard in range(self._config.shards_of(lambda_name)):
                if self._group.owns(shard):
                    partition = index_partition(Assoc.NEW, lambda_name, priority, shard)
                    total += self._index.count(partition, low, high, MAX_PAGES)[0]
        return total
