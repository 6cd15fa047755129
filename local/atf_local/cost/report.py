"""What `atf cost` reports: the assumptions, each lifecycle's units per task, and the prices.

The units come from running the lifecycles (atf_local.cost.lifecycles); the
dollars from the price list (atf_local.cost.billing). What the consumer and
the controllers read each poll does not grow with tasks: it is reported as a
fixed cost per second, spread over the rate of tasks assumed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from atf_core.config import StackConfig
from atf_local.cost.billing import Bill, Price, lambda_dollars
from atf_local.cost.estimate import Estimate

if TYPE_CHECKING:
    from rich.console import Console

# What the consumer reads each poll, whatever the load: left out of the per-task figures.
POLL_OVERHEAD = ("dynamodb.Query/", "dynamodb.GetItem/", "sqs.GetQueueAttributes/", "sqs.GetQueueUrl/")


@dataclass
class ScenarioCost:
    name: str
    tasks: int
    write_units: float
    index_units: float
    read_units: float
    sqs_requests: float
    steps: dict[str, float] = field(default_factory=dict)  # write units per task of each step

    @property
    def dollars_per_million(self) -> float:
        return (
            self.write_units * Price.DYNAMODB_WRITE_UNITS
            + self.read_units * Price.DYNAMODB_READ_UNITS
            + self.sqs_requests * Price.SQS_REQUESTS
        )


@dataclass
class CostReport:
    config_name: str
    estimate: Estimate
    scenarios: list[ScenarioCost]
    fixed_per_second: dict[str, float]  # dollars per second that do not grow with tasks
    frontend_per_million: dict[str, float]
    peers: list[dict[str, Any]]

    def fixed_per_million(self) -> float:
        return sum(self.fixed_per_second.values()) / max(self.estimate.rate, 1e-9) * 1e6

    def all_in_per_million(self, scenario: ScenarioCost) -> float:
        return scenario.dollars_per_million + sum(self.frontend_per_million.values()) + self.fixed_per_million()

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config_name,
            "estimate": asdict(self.estimate),
            "scenarios": [
                {**asdict(s), "dollars_per_million": s.dollars_per_million, "all_in": self.all_in_per_million(s)}
                for s in self.scenarios
            ],
            "fixed_dollars_per_second": self.fixed_per_second,
            "fixed_dollars_per_million_at_rate": self.fixed_per_million(),
            "frontend_dollars_per_million": self.frontend_per_million,
            "peers": self.peers,
        }


def per_task(name: str, bill: Bill, steps: dict[str, float], tasks: int) -> ScenarioCost:
    """Per-task units, leaving out what the consumer reads each poll whatever the load."""
    overhead = {k: v for k, v in bill.detail.items() if k.startswith(POLL_OVERHEAD)}
    reads = bill.read_units - sum(v for k, v in overhead.items() if k.endswith("/read_units"))
    sqs = bill.sqs_requests - sum(v for k, v in overhead.items() if k.endswith("/sqs_requests"))
    index = sum(v for k, v in bill.detail.items() if k.endswith("/index_units"))
    return ScenarioCost(
        name=name,
        tasks=tasks,
        write_units=bill.write_units / tasks,
        index_units=index / tasks,
        read_units=reads / tasks,
        sqs_requests=sqs / tasks,
        steps={k: round(v, 3) for k, v in steps.items() if v},
    )


def fixed_costs(config: StackConfig, estimate: Estimate) -> dict[str, float]:
    """Dollars per second that the polling design spends whatever the load."""
    queues = sum(len(spec.priorities) for spec in config.lambdas.values())
    partitions = sum(2 * config.shards_of(name) * len(spec.priorities) for name, spec in config.lambdas.items())
    polls_per_s = 1 / config.poll_interval
    # Each query reads at least one unit, halved (index reads are eventually consistent); the gates
    # item is read strongly once a poll; queue depths are refreshed every 2 s while sending.
    consumer_reads = polls_per_s * (0.5 * partitions + 1) * estimate.consumer_groups
    lambda_s = estimate.consumer_groups * estimate.consumer_mb / 1024
    return {
        "consumer Lambda (always running)": lambda_dollars(lambda_s, estimate.consumer_groups / 60),
        "consumer index queries and gate reads": consumer_reads * Price.DYNAMODB_READ_UNITS / 1e6,
        "consumer queue-depth reads": queues / 2.0 * Price.SQS_REQUESTS / 1e6,
    }


def frontend_costs(estimate: Estimate) -> dict[str, float]:
    per_task = 1 / max(1, estimate.tasks_per_request)
    gb_s = estimate.frontend_ms / 1000 * estimate.frontend_mb / 1024
    return {
        "API Gateway REST": per_task * Price.API_GATEWAY_REST,
        "frontend Lambda": lambda_dollars(gb_s * per_task * 1e6, per_task * 1e6),
    }


def render(report: CostReport, console: Console | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console(highlight=False)
    est = report.estimate
    table = Table(title=f"AWS cost per task, stack {report.config_name!r}, {est.payload_bytes}-byte payload")
    for column in (
        "lifecycle",
        "write units",
        "of which index",
        "read units",
        "SQS requests",
        "DynamoDB+SQS $/M",
        "all-in $/M",
    ):
        table.add_column(column, justify="left" if column == "lifecycle" else "right")
    for s in report.scenarios:
        table.add_row(
            s.name,
            f"{s.write_units:.2f}",
            f"{s.index_units:.2f}",
            f"{s.read_units:.2f}",
            f"{s.sqs_requests:.2f}",
            f"{s.dollars_per_million:.2f}",
            f"{report.all_in_per_million(s):.2f}",
        )
    console.print(table)
    front = ", ".join(f"{k} ${v:.3f}/M" for k, v in report.frontend_per_million.items())
    console.print(
        f"all-in adds the frontend ({est.tasks_per_request} task(s) per request: {front}) and fixed "
        f"costs at {est.rate:g} tasks/s (${report.fixed_per_million():.3f}/M):"
    )
    for name, per_s in report.fixed_per_second.items():
        console.print(f"  {name}: ${per_s * 86400 * 30:.2f} a month")
    peers = Table("peer", "$/M tasks", "basis", title="The same million tasks elsewhere")
    for peer in report.peers:
        peers.add_row(peer["name"], f"{peer['dollars_per_million']:.2f}", peer["basis"])
    console.print(peers)
