"""The store consumer: a Lambda function ticked every minute by EventBridge, once per consumer group."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from constructs import Construct

from atf_cdk.constructs.function import AtfFunction, FunctionProps
from atf_cdk.constructs.table import TaskTable
from atf_core.consumer.tick import TICK_S, consumer_timeout_s

TICK = Duration.seconds(TICK_S)
# EventBridge takes at most five targets per rule.
TARGETS_PER_RULE = 5


def consumer_timeout(poll_interval: float) -> Duration:
    """A little over the tick: an invocation polls for a little under it (atf_core.consumer.tick)."""
    return Duration.seconds(consumer_timeout_s(poll_interval))


def reserved_concurrency(groups: int) -> int:
    """Each group runs one invocation, plus one for a duplicated tick or one whose invocation ran into the
    next (it came late); a tick beyond that is throttled and, being useless a minute later, dropped rather
    than queued."""
    return 2 * groups


def group_inputs(groups: int) -> list[dict[str, dict[str, int]]]:
    return [{"group": {"index": i, "of": groups}} for i in range(groups)]


class StoreConsumer(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        function: FunctionProps,
        groups: int,
        table: TaskTable,
    ) -> None:
        """The queues it sends to are granted by the stack, once every lambda's nested stack has them."""
        super().__init__(scope, id)
        self.groups = groups
        self.handler = AtfFunction(self, "Handler", function)
        self.function = self.handler.function
        table.grant(self.function, "consumer")
        self.rules: list[events.Rule] = []
        inputs = group_inputs(groups)
        for number, start in enumerate(range(0, groups, TARGETS_PER_RULE)):
            rule = events.Rule(
                self,
                f"Tick{number}",
                description=f"Ticks consumer groups {start}..{min(start + TARGETS_PER_RULE, groups) - 1} of {groups}",
                schedule=events.Schedule.rate(TICK),
            )
            for group in inputs[start : start + TARGETS_PER_RULE]:
                rule.add_target(
                    targets.LambdaFunction(
                        self.function,
                        event=events.RuleTargetInput.from_object(group),
                        # A tick is worth nothing once the next one is due.
                        max_event_age=TICK,
                        retry_attempts=0,
                    )
                )
            self.rules.append(rule)
