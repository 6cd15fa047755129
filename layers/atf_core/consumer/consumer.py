"""One poll of the store consumer.

For every (lambda, priority) whose queue has room, query each shard of the
index for entries due by now + lookahead, apply gates, and send the due tasks
in batches of 10. By default the consumer reads the due tasks (one batch read,
at half price) and sends them without writing: the controller's claim is the
task's first write after scheduling. With `record_enqueued` it writes each one
as enqueued first, as in ATF's table. Entries whose task is already in flight
are checked against the deadline of their state, and re-enqueued once it has
passed.
"""

from __future__ import annotations

import itertools
import logging
import random
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from atf_core import lifecycle
from atf_core.config import StackConfig
from atf_core.consumer.budget import QueueBudget
from atf_core.consumer.deadlines import deadline_of, lost_attempt, observed_stamp
from atf_core.consumer.tracker import EntryKey, InFlightTracker, where
from atf_core.gating import GateView
from atf_core.queues import QueueDirectory, TaskMessage
from atf_core.schema import GateAction, Task, TaskStatus, to_ms, utcnow
from atf_core.store.base import Change, DueEntry, TaskRef, TaskStore
from atf_core.store.codec import Assoc, index_partition

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

log = logging.getLogger("atf.consumer")


@dataclass
class PollReport:
    enqueued: int = 0  # messages sent, re-enqueued tasks included
    requeued: int = 0
    dropped: int = 0
    exhausted: int = 0
    expired: int = 0
    skipped_full: int = 0
    send_failures: int = 0
    errors: int = 0
    saturated: bool = False  # some queue took all the room it had: more may be due right away
    by_queue: dict[tuple[str, str], int] = field(default_factory=dict)
    # (what, lambda, priority) -> how many: "dropped", "expired", "requeued", "exhausted", "dead_lettered"
    per_queue: Counter[tuple[str, str, str]] = field(default_factory=Counter)


# Work the consumer does once a poll besides enqueueing: firing periodic
# schedules, sweeping running chains. Called with (now, lookahead seconds).
Housekeeping = Callable[[datetime, float], object]


@dataclass(frozen=True)
class Outgoing:
    message: TaskMessage
    entry: DueEntry
    recorded: bool = True  # the store holds it as enqueued: a failed send must hand it back


@dataclass(frozen=True)
class ConsumerGroup:
    """Which shards this consumer polls: shard % of == index."""

    index: int = 0
    of: int = 1

    def owns(self, shard: int) -> bool:
        return shard % self.of == self.index


class Consumer:
    def __init__(
        self,
        store: TaskStore,
        sqs: SQSClient,
        config: StackConfig,
        group: ConsumerGroup | None = None,
        clock: Callable[[], datetime] = utcnow,
        housekeeping: Sequence[Housekeeping] = (),
    ) -> None:
        self._store = store
        self._sqs = sqs
        self._config = config
        self._group = group or ConsumerGroup()
        self._clock = clock
        self._queues = QueueDirectory(sqs, config)
        self._budget = QueueBudget(
            self._queues.depth, config.max_in_flight_per_queue, clock=lambda: self._clock().timestamp()
        )
        self._tracker = InFlightTracker()
        self._first_seen: dict[tuple[object, ...], int] = {}
        self._last_gates: GateView | None = None
        self._housekeeping = housekeeping

    def poll(self) -> PollReport:
        now = self._clock()
        gates = GateView.of(self._store.gates(), now)
        self._release_lifted(gates)
        report = PollReport()
        seen: set[EntryKey] = set()
        polled: set[tuple[str, str]] = set()
        for lambda_name, spec in self._config.lambdas.items():
            if gates.lambda_paused(lambda_name):
                continue
            for priority in spec.priorities:
                try:
                    if self._poll_queue(lambda_name, priority, gates, now, report, seen):
                        polled.add((lambda_name, priority))
                except Exception:
                    log.exception("poll of %s/%s failed", lambda_name, priority)
                    report.errors += 1
        self._tracker.prune(seen, polled)
        self._forget_old_stamps(to_ms(now))
        for chore in self._housekeeping:
            try:
                chore(now, self._config.lookahead)
            except Exception:
                log.exception("housekeeping failed")
                report.errors += 1
        return report

    def _poll_queue(
        self, lambda_name: str, priority: str, gates: GateView, now: datetime, report: PollReport, seen: set[EntryKey]
    ) -> bool:
        """Enqueue what is due for one queue; False if its queue was full and nothing was read."""
        key = (lambda_name, priority)
        # A pass gives each queue at most enqueue_per_poll tasks, then moves on; a queue
        # that took its share makes the loop come back at once (saturated).
        room = min(self._budget.available(key), self._config.enqueue_per_poll)
        if room == 0:
            report.skipped_full += 1
            return False
        due = fair_share(self._due_entries(lambda_name, priority, gates, now, seen), window=min(4 * room, 2000))
        # Each batch of ten goes out as soon as its writes are done: the first tasks of a
        # long poll do not wait for the last ones to be recorded.
        sent, batch = 0, []
        for item in self._enqueue(due, gates, now, room, report):
            batch.append(item)
            if len(batch) == 10:
                sent, batch = sent + self._send(lambda_name, priority, batch, now, report), []
        sent += self._send(lambda_name, priority, batch, now, report)
        self._budget.spent(key, sent)
        report.by_queue[key] = sent
        report.saturated |= sent >= room
        return sent < room  # a full queue may have left due entries unread

    def _partitions(self, lambda_name: str, priority: str) -> list[str]:
        shards = [s for s in range(self._config.shards_of(lambda_name)) if self._group.owns(s)]
        random.shuffle(shards)  # no shard always first when the budget runs out
        return [index_partition(a, lambda_name, priority, s) for s in shards for a in (Assoc.STARTED, Assoc.NEW)]

    def _due_entries(
        self, lambda_name: str, priority: str, gates: GateView, now: datetime, seen: set[EntryKey]
    ) -> Iterator[DueEntry]:
        """Due entries this consumer has no reason to skip, oldest first per shard."""
        up_to = now + timedelta(seconds=self._config.lookahead)
        skip = gates.paused_collections(lambda_name)
        now_ms = to_ms(now)
        for partition in self._partitions(lambda_name, priority):
            for entry in self._store.due(partition, up_to, skip):
                seen.add((entry.id, entry.next_ms))
                if not self._tracker.waiting((entry.id, entry.next_ms), now_ms):
                    yield entry

    def _enqueue(
        self, entries: Iterator[DueEntry], gates: GateView, now: datetime, room: int, report: PollReport
    ) -> Iterator[Outgoing]:
        """Decide each due entry (send, drop, expire, recover), at most `room` to send."""
        count = 0
        for entry, task in self._with_tasks(entries, min(room, 100)):
            if count >= room:
                return
            outgoing = self._decide(entry, task, gates, now, report)
            if outgoing is not None:
                count += 1
                yield outgoing

    def _with_tasks(self, entries: Iterator[DueEntry], chunk: int) -> Iterator[tuple[DueEntry, Task | None]]:
        """Pair entries with their tasks, read in batches; recording consumers learn them from their writes."""
        if self._config.record_enqueued:
            yield from ((entry, None) for entry in entries)
            return
        while batch := list(itertools.islice(entries, chunk)):
            tasks = {t.id: t for t in self._store.get_many([e.id for e in batch], consistent=False)}
            yield from ((entry, tasks.get(entry.id)) for entry in batch)

    def _decide(
        self, entry: DueEntry, task: Task | None, gates: GateView, now: datetime, report: PollReport
    ) -> Outgoing | None:
        gate = gates.decide(entry.lambda_name, entry.collection)
        ref = TaskRef(entry.id, entry.lambda_name, entry.priority)
        if entry.expire_ms is not None and entry.expire_ms <= to_ms(now):
            outcome = self._store.transition(ref, lifecycle.EXPIRE, Change(now=now, expired_by=now))
            if outcome.applied:
                report.expired += 1
                report.per_queue["expired", ref.lambda_name, ref.priority] += 1
                return None
        elif gate is not None and gate.action is GateAction.DROP:
            reason = f"dropped by gate {gate.scope}" + (f": {gate.reason}" if gate.reason else "")
            outcome = self._store.transition(ref, lifecycle.DROP, Change(now=now, reason=reason))
            if outcome.applied:
                report.dropped += 1
                report.per_queue["dropped", ref.lambda_name, ref.priority] += 1
                return None
        elif self._config.record_enqueued:
            due_by = now + timedelta(seconds=self._config.lookahead)
            outcome = self._store.transition(ref, lifecycle.ENQUEUE, Change(now=now, due_by=due_by))
            if outcome.applied and outcome.task is not None:
                return Outgoing(TaskMessage(entry.id, outcome.task.attempt, entry.next_ms, entry.collection), entry)
        else:
            return self._unrecorded(entry, task, now, report)
        return self._recover(entry, outcome.task, now, report)

    def _unrecorded(self, entry: DueEntry, task: Task | None, now: datetime, report: PollReport) -> Outgoing | None:
        """Send a waiting task without writing, unless this consumer sent it less than an enqueue timeout ago."""
        key, queue = (entry.id, entry.next_ms), where(entry)
        if task is None:  # not yet visible to an eventually consistent read: look again next poll
            self._tracker.wait(key, to_ms(now) + int(self._config.poll_interval * 1000), queue)
            return None
        if task.status not in (TaskStatus.NEW, TaskStatus.RETRIABLE_FAILURE):
            return self._recover(entry, task, now, report)
        resend_ms = (self._tracker.sent_at(key) or 0) + int(self._config.timeouts.enqueue * 1000)
        if resend_ms > to_ms(now):  # the message may still be queued behind others
            self._tracker.wait(key, resend_ms, queue)
            return None
        return Outgoing(TaskMessage(entry.id, task.attempt, entry.next_ms, entry.collection), entry, recorded=False)

    def _recover(self, entry: DueEntry, task: Task | None, now: datetime, report: PollReport) -> Outgoing | None:
        """An entry whose task was not waiting to be sent: in flight, finished, or stuck."""
        now_ms = to_ms(now)
        key, queue = (entry.id, entry.next_ms), where(entry)
        if task is None or task.status.terminal or task.status in (TaskStatus.NEW, TaskStatus.RETRIABLE_FAILURE):
            self._tracker.wait(key, now_ms + 5_000, queue)  # the index lags the table by up to a second
            return None
        wake_ms = self._stuck_after_ms(task, now_ms)
        if wake_ms > now_ms:
            self._tracker.wait(key, wake_ms, queue)
            return None
        message = self._requeue(TaskRef(entry.id, entry.lambda_name, entry.priority), task, now, report)
        return None if message is None else Outgoing(message, entry)

    def _stuck_after_ms(self, task: Task, now_ms: int) -> int:
        deadline = deadline_of(task, self._config.timeouts)
        deadline_ms = to_ms(deadline) if deadline else now_ms
        if task.status is TaskStatus.ENQUEUED:
            return deadline_ms  # not running: an early re-enqueue only duplicates a message
        stamp = (task.id, *sorted(observed_stamp(task).items()))
        first_seen = self._first_seen.setdefault(stamp, now_ms)
        return max(deadline_ms, first_seen + int(self._config.timeouts.lease_floor * 1000))

    def _requeue(self, ref: TaskRef, task: Task, now: datetime, report: PollReport) -> TaskMessage | None:
        """Send a stuck task again; a running one's lost attempt goes into its error history (fenced by the
        attempt and the stamp that stayed unchanged, like every write)."""
        stamp = observed_stamp(task)
        running = task.status in (TaskStatus.CLAIMED, TaskStatus.PROCESSING)
        error = lost_attempt(task, self._config.timeouts, now) if running else None
        if error is not None and task.attempt >= task.max_attempts:
            reason = f"attempt {task.attempt} of {task.max_attempts} was lost (executor or controller died)"
            dead_letter = self._config.lambdas[ref.lambda_name].dead_letter
            transition = lifecycle.EXHAUST_TO_DEAD_LETTER if dead_letter else lifecycle.EXHAUST
            change = Change(now=now, attempt=task.attempt, observed=stamp, reason=reason, error=error, next_at=now)
            if self._store.transition(ref, transition, change).applied:
                report.exhausted += 1
                report.per_queue["exhausted", ref.lambda_name, ref.priority] += 1
                if dead_letter:
                    report.per_queue["dead_lettered", ref.lambda_name, ref.priority] += 1
            return None
        change = Change(now=now, attempt=task.attempt, observed=stamp, error=error)
        outcome = self._store.transition(ref, lifecycle.REQUEUE, change)
        if not outcome.applied or outcome.task is None:
            return None
        report.requeued += 1
        report.per_queue["requeued", ref.lambda_name, ref.priority] += 1
        return TaskMessage(ref.id, outcome.task.attempt, to_ms(now), task.collection)

    def _send(
        self, lambda_name: str, priority: str, outgoing: list[Outgoing], now: datetime, report: PollReport
    ) -> int:
        if not outgoing:
            return 0
        url = self._queues.url(lambda_name, priority)
        sent = 0
        # Look again when the first deadline could pass: a task claimed at once
        # and left by a dead controller is stuck claim_timeout after the send.
        timeouts = self._config.timeouts
        deadline_ms = to_ms(now) + int(min(timeouts.enqueue, timeouts.claim) * 1000)
        for start in range(0, len(outgoing), 10):
            batch = outgoing[start : start + 10]
            entries = [{"Id": str(i), "MessageBody": o.message.encode()} for i, o in enumerate(batch)]
            failed = _failed_ids(self._sqs.send_message_batch(QueueUrl=url, Entries=entries))  # type: ignore[arg-type]
            for i, item in enumerate(batch):
                if str(i) in failed:
                    report.send_failures += 1
                    if item.recorded:
                        self._release(item.message, lambda_name, priority, now)
                    continue
                key = (item.entry.id, item.entry.next_ms)
                self._tracker.wait(key, deadline_ms, where(item.entry))
                self._tracker.sent(key, to_ms(now), where(item.entry))
                sent += 1
        report.enqueued += sent
        return sent

    def _release(self, message: TaskMessage, lambda_name: str, priority: str, now: datetime) -> None:
        """A send failed after the task was recorded as enqueued: hand it back so the next poll retries
        (if this write fails too, the enqueue timeout still recovers the task)."""
        ref = TaskRef(message.task_id, lambda_name, priority)
        self._store.transition(ref, lifecycle.RELEASE, Change(now=now, attempt=message.attempt, next_at=now))

    def _forget_old_stamps(self, now_ms: int) -> None:
        horizon = now_ms - int(4 * max(self._config.timeouts.heartbeat, self._config.timeouts.claim) * 1000)
        for stamp in [s for s, seen in self._first_seen.items() if seen < horizon]:
            del self._first_seen[stamp]
        self._tracker.forget_sends_before(now_ms - int(self._config.timeouts.enqueue * 1000))

    def _release_lifted(self, gates: GateView) -> None:
        """Tasks a controller handed back under a gate are waiting as new: look again once it lifts
        (those of the lifted lambda or collection only: the rest were never held back)."""
        if self._last_gates is not None:
            lifted = set(self._last_gates.gates) - set(gates.gates)
            self._tracker.forget_gated({(gate.lambda_, gate.collection) for gate in lifted})
        self._last_gates = gates


def fair_share(entries: Iterator[DueEntry], window: int) -> Iterator[DueEntry]:
    """Take the first `window` due entries round-robin by collection, so one collection's
    flood cannot starve another's tasks; then the rest in order."""
    head = list(itertools.islice(entries, window))
    by_collection: dict[str, deque[DueEntry]] = defaultdict(deque)
    for entry in head:
        by_collection[entry.collection].append(entry)
    while by_collection:
        for collection in list(by_collection):
            yield by_collection[collection].popleft()
            if not by_collection[collection]:
                del by_collection[collection]
    yield from entries


def _failed_ids(reply: Mapping[str, Any]) -> set[str]:
    return {str(failure["Id"]) for failure in reply.get("Failed") or []}
