"""How big a stack must be for the rate its lambdas are planned for: one derivation, used by the
configuration (shards, queue splits, in-flight bounds), the CDK app (consumer groups) and the capacity
model in bench/capacity.py, so the plan on paper is the stack that gets deployed.

Every input is a published AWS limit (../shared/reference/aws-facts.md) or a figure `make bench`
measures; each names where it comes from.
"""

from __future__ import annotations

import math

# DynamoDB: a partition serves at most 1,000 write units/s; a sorted index partition keyed by time gets
# no split relief, so the due index is spread over shards instead.
PARTITION_WRITE_UNITS_S = 1_000
# SQS: about 120,000 messages in flight per standard queue; at the cap, receives return nothing.
SQS_IN_FLIGHT_PER_QUEUE = 120_000
# Lambda gives one full vCPU at 1,769 MB, proportionally less below.
LAMBDA_MB_PER_VCPU = 1_769
# Lambda's default concurrency per account and region, of which 100 must stay unreserved.
LAMBDA_ACCOUNT_CONCURRENCY = 1_000
LAMBDA_UNRESERVED_FLOOR = 100

# Index writes a task makes on its shard's partition: the entry added at scheduling, removed at success.
INDEX_WRITE_UNITS_PER_TASK = 2.0
# The consumer's CPU per task sent that groups are planned for: a planning figure, not a measurement. It
# stays above every figure `make bench` measures on the local stack (bench/results/report.md: the
# throughput step's consumer CPU per task, and the consumer passes' CPU ms per task) because on AWS every
# call also pays TLS, which the local stack's plain HTTP does not. The report notes when a measurement
# passes it; raise it then. Raised from 1.5 ms when the throughput step measured 1.22-1.62 ms on a day the
# same machine's moto answered 40% slower (0.98 ms the day before; the consumer passes 0.64-0.68 ms).
CONSUMER_CPU_S_PER_TASK = 0.002
# Plan partitions, queues and CPUs at half their ceiling: bursts and uneven hashing take the rest.
HEADROOM = 0.5


def shards_for(rate: float) -> int:
    """Index shards per (lambda, priority) so that `rate` tasks/s keep each partition at HEADROOM."""
    return max(1, math.ceil(rate * INDEX_WRITE_UNITS_PER_TASK / (PARTITION_WRITE_UNITS_S * HEADROOM)))


def seconds_in_flight(lookahead_s: float, poll_interval_s: float) -> float:
    """How long a message stays in flight: sent up to `lookahead_s` early (half a poll interval more on
    average), then held until its claim and delete, about half a second."""
    return lookahead_s + poll_interval_s / 2 + 0.5


def in_flight_for(rate: float, lookahead_s: float, poll_interval_s: float) -> int:
    """Messages in flight at once on a (lambda, priority) taking `rate` tasks/s."""
    return math.ceil(rate * seconds_in_flight(lookahead_s, poll_interval_s))


def queue_parts_for(rate: float, lookahead_s: float, poll_interval_s: float) -> int:
    """Queues a (lambda, priority) is split over so that none passes half of SQS's in-flight cap."""
    in_flight = in_flight_for(rate, lookahead_s, poll_interval_s)
    return max(1, math.ceil(in_flight / (SQS_IN_FLIGHT_PER_QUEUE * HEADROOM)))


def consumer_vcpus(memory_mib: int) -> float:
    """The vCPUs a consumer invocation of `memory_mib` can use. Divided, not multiplied by a reciprocal:
    1769 * (1 / 1769) is 0.9999999999999999, which made 10,000 tasks/s need 21 groups of 500, not 20."""
    return min(memory_mib / LAMBDA_MB_PER_VCPU, 1.0)  # one thread decides: more vCPUs do not help it


def group_rate(memory_mib: int, cpu_s_per_task: float = CONSUMER_CPU_S_PER_TASK) -> float:
    """Tasks/s one consumer group sends at HEADROOM of the CPU its memory buys (its I/O overlaps, so its
    CPU, not its round trips, is the bound), at `cpu_s_per_task` of CPU a task."""
    return consumer_vcpus(memory_mib) * HEADROOM / cpu_s_per_task


def consumer_groups_for(rate: float, memory_mib: int, cpu_s_per_task: float = CONSUMER_CPU_S_PER_TASK) -> int:
    """Consumer groups a stack needs for `rate` tasks/s over all its lambdas."""
    return max(1, math.ceil(rate / group_rate(memory_mib, cpu_s_per_task)))


def most_consumer_groups(concurrency: int = LAMBDA_ACCOUNT_CONCURRENCY) -> int:
    """The most groups an account's Lambda concurrency allows: each reserves two executions (one
    invocation and the next tick's during the hand-over), and 100 must stay unreserved."""
    return (concurrency - LAMBDA_UNRESERVED_FLOOR) // 2
