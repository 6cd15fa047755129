"""The store consumer: each poll reads what is due, decides each entry, and carries the decisions out.

For every (lambda, priority) whose queue has room, it queries each shard of
the index for entries due by now + lookahead (gates applied), pairs them with
their tasks as its enqueue mode reads them (modes.py), decides each one
(decide.py: send, enqueue, drop, expire, re-enqueue, exhaust or wait) and
sends the messages in batches of ten. Entries whose task is already in flight
are checked against the deadline of their state, and re-enqueued once it has
passed. The round trips of a queue's poll overlap on a few I/O threads
(overlap.py); what is decided, and in which order, is the same.
"""

from __future__ import annotations

import functools
import itertools
import logging
import random
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from atf_core import lifecycle, sizing
from atf_core.config import StackConfig
from atf_core.consumer.budget import QueueBudget
from atf_core.consumer.deadlines import observed_stamp
from atf_core.consumer.decide import (
    Action,
    Drop,
    Enqueue,
    Exhaust,
    Expire,
    Look,
    Requeue,
    Send,
    Wait,
    decide,
    recover,
    watches_stamp,
)
from atf_core.consumer.modes import enqueue_mode
from atf_core.consumer.overlap import Overlap, io_threads_for
from atf_core.consumer.poll import Event, Poll, PollReport
from atf_core.consumer.read_past import ReadPastMarks
from atf_core.consumer.tracker import InFlightTracker, QueueKey, where
from atf_core.gating import GateView
from atf_core.lifecycle import Assoc
from atf_core.queues import QueueDirectory, TaskMessage
from atf_core.schema import GateAction, Task, TaskStatus, from_ms, utcnow
from atf_core.store.base import Change, DueEntry, Flow, Outcome, TaskRef, TaskStore
from atf_core.store.codec import index_partition

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

log = logging.getLogger("atf.consumer")

# Work the consumer does once a poll besides enqueueing: firing periodic
# schedules, sweeping running chains. Called with (now, lookahead seconds).
Housekeeping = Callable[[datetime, float], object]


@dataclass(frozen=True)
class Outgoing:
    message: TaskMessage
    entry: DueEntry
    recorded: bool = True  # the store holds it as enqueued: a failed send must hand it back


@dataclass(frozen=True)
class Sending:
    """A batch on its way: the positions SQS did not take, once it answers."""

    batch: Sequence[Outgoing]
    failed: Future[set[int]]


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
        io_threads: int | None = None,
        queues: QueueDirectory | None = None,
    ) -> None:
        self._store = store
        self._config = config
        self._group = group or ConsumerGroup()
        self._clock = clock
        # Threads for the I/O of a poll (overlap.py); 1 makes every call in turn, as it is needed.
        self._overlap = Overlap(io_threads_for(config) if io_threads is None else io_threads)
        self._mode = enqueue_mode(config, store, self._overlap)
        self._queues = queues or QueueDirectory(sqs, config)  # one given is shared with a chore (wake.py)
        self._budget = QueueBudget(self._queues.depth, self._in_flight_cap, clock=lambda: self._clock().timestamp())
        self._seconds_in_flight = sizing.seconds_in_flight(config.lookahead, config.poll_interval)
        self._tracker = InFlightTracker()
        self._watched: dict[tuple[object, ...], int] = {}  # a running task's stamp -> when first seen
        self._read_past_marks = ReadPastMarks(every_ms=int(config.poll_interval * 1000))
        self._last_gates: GateView | None = None
        self._housekeeping = housekeeping

    def _in_flight_cap(self, queue: QueueKey) -> int:
        """What all of a (lambda, priority)'s queues may hold together."""
        lambda_name = queue[0]
        return self._config.in_flight_cap_of(lambda_name) * self._config.queue_parts_of(lambda_name)

    def poll(self, handover_s: float = 0.0) -> PollReport:
        """One pass over every queue, then the housekeeping. `handover_s` reads that much further than the
        lookahead: an invocation's last poll sends what falls due before the next one's first (tick.py). That
        poll does its housekeeping first, so the tasks a periodic schedule makes for the gap go out with it."""
        now = self._clock()
        poll = Poll(now, GateView.of(self._store.gates(), now), self._config.lookahead + handover_s)
        self._release_lifted(poll.gates)
        if handover_s:
            self._housekeep(poll)
        for lambda_name, spec in self._config.lambdas.items():
            if poll.gates.lambda_paused(lambda_name):
                continue
            for priority in spec.priorities:
                try:
                    if self._poll_queue(poll, (lambda_name, priority)):
                        poll.read_in_full.add((lambda_name, priority))
                except Exception:
                    log.exception("poll of %s/%s failed", lambda_name, priority)
                    poll.report.count(Event.ERROR, (lambda_name, priority))
        self._tracker.prune(poll.seen, poll.read_in_full)
        self._forget_old_stamps(poll.now_ms)
        if not handover_s:
            self._housekeep(poll)
        return poll.report

    def _housekeep(self, poll: Poll) -> None:
        for chore in self._housekeeping:
            try:
                chore(poll.now, poll.lookahead_s)
            except Exception:
                log.exception("housekeeping %s failed", getattr(chore, "__qualname__", chore))
                poll.report.count(Event.HOUSEKEEPING_FAILED)

    def close(self) -> None:
        """Stop the I/O threads (a consumer kept for the process's life never needs to)."""
        self._overlap.close()

    # -- reading -----------------------------------------------------------------
    def _poll_queue(self, poll: Poll, queue: QueueKey) -> bool:
        """Enqueue what is due for one queue; False if its queue was full and nothing was read."""
        # A pass gives each queue at most enqueue_per_poll tasks, then moves on; a queue
        # that took its share makes the loop come back at once (saturated).
        # A poll reading past the lookahead (the hand-over's) may fill the queue past its steady bound by the
        # share of the extra time: the messages it sends early are held by the workers meanwhile.
        stretch = 1.0 + (poll.lookahead_s - self._config.lookahead) / self._seconds_in_flight
        room = min(self._budget.available(queue, min(stretch, 2.0)), self._config.enqueue_per_poll)
        if room == 0:
            return False
        due = self._fair_due(poll, queue, window=min(4 * room, 2000))
        # Each batch of ten goes out as soon as its writes are done: the first tasks of a
        # long poll do not wait for the last ones to be recorded. A send per I/O
        # thread is under way while the next batches are decided; each is recorded here.
        sent, pending = 0, deque[Sending]()
        try:
            for batch in batches_of(self._outgoing(poll, due, room), 10):
                pending.append(self._start_send(queue, batch))
                if len(pending) >= self._overlap.threads:
                    sent += self._settle(poll, queue, pending.popleft())
        finally:
            settled, error = self._settle_all(poll, queue, pending)
            sent += settled
            self._budget.spent(queue, sent)
        if error is not None:
            raise error
        poll.report.saturated |= sent >= room
        return sent < room  # a full queue may have left due entries unread

    def _partitions(self, lambda_name: str, priority: str) -> list[str]:
        shards = [s for s in range(self._config.shards_of(lambda_name)) if self._group.owns(s)]
        random.shuffle(shards)  # no shard always first when the budget runs out
        return [index_partition(a, lambda_name, priority, s) for s in shards for a in (Assoc.STARTED, Assoc.NEW)]

    def _fair_due(self, poll: Poll, queue: QueueKey, window: int) -> Iterator[DueEntry]:
        """The first `window` due entries in turn by flow, then the rest in order. Where a few flows fill
        that window, the partitions it did not read to the end are read again leaving those flows out,
        and the entries found behind them take their turns too: a key's backlog ahead of another key's
        tasks in its shard cannot hold them back (how often, and from where: read_past.py)."""
        partitions, ended = self._partitions(*queue), set[str]()
        entries = self._due_entries(poll, queue, partitions, ended=ended, window=window)
        head = list(itertools.islice(entries, window))
        behind: list[DueEntry] = []
        if crowding := crowding_flows(head, window):
            cut_short = [p for p in partitions if p not in ended]
            ahead = {entry.id for entry in head}
            found = self._read_past(poll, queue, cut_short, crowding, limit=window + len(ahead))
            behind = list(itertools.islice((e for e in found if e.id not in ahead), window))
        yield from fair_share(iter(head + behind), window=len(head) + len(behind))
        taken = {entry.id for entry in behind}
        yield from (entry for entry in entries if entry.id not in taken)

    def _read_past(
        self, poll: Poll, queue: QueueKey, partitions: Sequence[str], crowding: Sequence[Flow], limit: int
    ) -> Iterator[DueEntry]:
        """The entries behind the crowding flows' backlog in those partitions, in turn by partition: read now
        in the partitions read_past.py says to read now, from where it says; kept from the last read in the
        others."""
        up_to = poll.up_to
        skip = poll.gates.paused_collections(queue[0])
        skipped = (frozenset(crowding), frozenset(skip))
        plan = self._read_past_marks.plan(partitions, skipped, poll.now_ms)
        kept = self._read_past_marks.found([p for p in partitions if p not in plan], skipped, poll.now_ms)
        reads = (
            functools.partial(self._store.read_past, p, up_to, crowding, skip, since_ms=since, limit=limit)
            for p, since in plan.items()
        )
        found: dict[str, Iterator[DueEntry]] = {partition: iter(entries) for partition, entries in kept.items()}
        done = self._overlap.ordered(reads, ahead=self._overlap.threads)
        for (partition, since), read in zip(plan.items(), done, strict=True):
            self._read_past_marks.record(partition, skipped, poll.now_ms, since, read)
            found[partition] = iter(read.behind)
        return self._unsent(poll, _in_turn(found, set()))

    def _due_entries(
        self, poll: Poll, queue: QueueKey, partitions: Sequence[str], ended: set[str], window: int
    ) -> Iterator[DueEntry]:
        """Due entries this consumer has no reason to skip, oldest first per partition, the partitions in
        turn; those read to the end are added to `ended`."""
        up_to = poll.up_to
        skip = poll.gates.paused_collections(queue[0])
        # The first page of each partition is asked for ahead, on the I/O threads; the entries come
        # out in partition order all the same, and are looked at here. Taken in turn, a window needs
        # about its share of each partition: a first page of twice that, not a whole page of each, keeps
        # a backlog from being read (and billed) a page per partition at every pass.
        first = first_page(window, len(partitions))
        reads = (functools.partial(_started, self._store.due(p, up_to, skip, first)) for p in partitions)
        started = dict(zip(partitions, self._overlap.ordered(reads, ahead=self._overlap.threads), strict=True))
        return self._unsent(poll, _in_turn(started, ended))

    def _unsent(self, poll: Poll, entries: Iterator[DueEntry]) -> Iterator[DueEntry]:
        """The entries but for those sent and not yet due to be looked at again; each is noted as seen."""
        for entry in entries:
            poll.seen.add((entry.id, entry.next_ms))
            if not self._tracker.waiting((entry.id, entry.next_ms), poll.now_ms):
                yield entry

    def _outgoing(self, poll: Poll, entries: Iterator[DueEntry], room: int) -> Iterator[Outgoing]:
        """Decide each due entry and carry the decision out; at most `room` messages to send."""
        count = 0
        for entry, task in self._mode.paired(entries, min(room, 100)):
            if count >= room:
                return
            look = self._look(poll, entry, task)
            outgoing = self._act(poll, look, decide(look, self._config, self._mode.handover))
            if outgoing is not None:
                count += 1
                yield outgoing

    def _look(self, poll: Poll, entry: DueEntry, task: Task | None) -> Look:
        key = (entry.id, entry.next_ms)
        watched = None
        if watches_stamp(task):
            watched = self._watched.setdefault((task.id, *sorted(observed_stamp(task).items())), poll.now_ms)
        # The gate in force at the task's run time, as far as the gates read now tell (gating.py says why).
        gate = poll.gates.decide(entry.lambda_name, entry.collection, at=from_ms(entry.next_ms))
        return Look(entry, task, poll.now, gate, self._tracker.sent_at(key), watched, lookahead_s=poll.lookahead_s)

    # -- acting --------------------------------------------------------------------
    def _act(self, poll: Poll, look: Look, action: Action) -> Outgoing | None:
        """Carry out one decision: a message to send, a write, or a note of when to look again."""
        entry, queue = look.entry, (look.entry.lambda_name, look.entry.priority)
        match action:
            case Wait(until_ms):
                self._tracker.wait(look.key, until_ms, where(entry))
                return None
            case Send(attempt):
                return Outgoing(
                    TaskMessage(entry.id, attempt, entry.next_ms, entry.collection, entry.flow_key),
                    entry,
                    recorded=False,
                )
            case Requeue() | Exhaust():
                return self._recover_stuck(poll, look, action)
        outcome = self._first_write(look, action)
        if not outcome.applied or outcome.task is None:  # the task moved on: look at it as the write found it
            moved = self._look(poll, entry, outcome.task)
            return self._act(poll, moved, recover(moved, self._config))
        if isinstance(action, Enqueue):
            return Outgoing(
                TaskMessage(entry.id, outcome.task.attempt, entry.next_ms, entry.collection, entry.flow_key), entry
            )
        poll.report.count(Event.EXPIRED if isinstance(action, Expire) else Event.DROPPED, queue)
        return None

    def _first_write(self, look: Look, action: Enqueue | Expire | Drop) -> Outcome:
        now = look.now
        match action:
            case Enqueue(due_by):
                return self._store.transition(look.ref, lifecycle.ENQUEUE, Change(now=now, due_by=due_by))
            case Expire():
                return self._store.transition(look.ref, lifecycle.EXPIRE, Change(now=now, expired_by=now))
            case Drop(reason):
                return self._store.transition(look.ref, lifecycle.DROP, Change(now=now, reason=reason))

    def _recover_stuck(self, poll: Poll, look: Look, action: Requeue | Exhaust) -> Outgoing | None:
        """Send a stuck task again, or end it; either write is fenced by the attempt and by the stamp that
        stayed unchanged, so it fails if the task was seen alive meanwhile."""
        queue = (look.entry.lambda_name, look.entry.priority)
        seen = look.task.status if look.task is not None else None
        change = Change(
            now=look.now, attempt=action.attempt, observed=action.observed, error=action.error, seen_status=seen
        )
        if isinstance(action, Exhaust):
            ending = replace(change, reason=action.reason, next_at=look.now)
            if self._store.transition(look.ref, action.transition, ending).applied:
                poll.report.count(Event.EXHAUSTED, queue)
                if action.transition.target is TaskStatus.DEAD_LETTER:
                    poll.report.count(Event.DEAD_LETTERED, queue)
            return None
        outcome = self._store.transition(look.ref, lifecycle.REQUEUE, change)
        if not outcome.applied or outcome.task is None or look.task is None:
            return None
        poll.report.count(Event.REQUEUED, queue)
        message = TaskMessage(
            look.entry.id, outcome.task.attempt, look.now_ms, look.task.collection, look.task.flow_key
        )
        return Outgoing(message, look.entry)

    def _start_send(self, queue: QueueKey, batch: Sequence[Outgoing]) -> Sending:
        messages = [o.message for o in batch]
        return Sending(batch, self._overlap.submit(functools.partial(self._queues.send, *queue, messages)))

    def _settle(self, poll: Poll, queue: QueueKey, sending: Sending) -> int:
        """Record one batch's send; a failed message recorded as enqueued is handed back so the next poll
        retries it. A send that raised is taken as failed whole: its recorded tasks are handed back too, or
        they would wait out the enqueue timeout (were some delivered after all, their claims still win: a
        released task can be claimed, and the next enqueue of a claimed task is refused). A hand-back that
        fails is raised once the batch is recorded and the others are handed back: the poll counts it."""
        # Look again when the first deadline could pass: a task claimed at once
        # and left by a dead controller is stuck claim_timeout after the send.
        timeouts = self._config.timeouts
        deadline_ms = poll.now_ms + int(min(timeouts.enqueue, timeouts.claim) * 1000)
        try:
            failed = sending.failed.result()
        except Exception:
            poll.report.count(Event.SEND_FAILED, queue, len(sending.batch))
            self._release_all([item.message for item in sending.batch if item.recorded], queue, poll.now)
            raise
        for i, item in enumerate(sending.batch):
            if i not in failed:
                key = (item.entry.id, item.entry.next_ms)
                self._tracker.wait(key, deadline_ms, where(item.entry))
                self._tracker.sent(key, poll.now_ms, where(item.entry))
        sent = len(sending.batch) - len(failed)
        poll.report.count(Event.ENQUEUED, queue, sent)
        if failed:
            poll.report.count(Event.SEND_FAILED, queue, len(failed))
            handed_back = [item.message for i, item in enumerate(sending.batch) if i in failed and item.recorded]
            if error := self._release_all(handed_back, queue, poll.now):
                raise error
        return sent

    def _settle_all(self, poll: Poll, queue: QueueKey, pending: deque[Sending]) -> tuple[int, Exception | None]:
        """Wait for every send still under way and record each, also after one of them raised: those
        sent must be known as sent. The messages sent, and the first error."""
        sent, first_error = 0, None
        while pending:
            try:
                sent += self._settle(poll, queue, pending.popleft())
            except Exception as error:  # noqa: BLE001 - raised by the caller once every send is recorded
                first_error = first_error or error
        return sent, first_error

    def _release_all(self, messages: Sequence[TaskMessage], queue: QueueKey, now: datetime) -> Exception | None:
        """Hand back each message's task; one whose write fails too is left to the enqueue timeout. The
        first such failure."""
        first_error = None
        for message in messages:
            try:
                self._release(message, queue, now)
            except Exception as error:
                log.exception("task %s could not be handed back after its send failed", message.task_id)
                first_error = first_error or error
        return first_error

    def _release(self, message: TaskMessage, queue: QueueKey, now: datetime) -> None:
        """A send failed after the task was recorded as enqueued: hand it back so the next poll retries
        (if this write fails too, the enqueue timeout still recovers the task)."""
        ref = TaskRef(message.task_id, *queue, message.flow_key)
        # Back at its due time, not now: a task sent early (the lookahead, a hand-over) runs no sooner for it
        next_at = max(now, from_ms(message.due_ms))
        self._store.transition(ref, lifecycle.RELEASE, Change(now=now, attempt=message.attempt, next_at=next_at))

    # -- memory --------------------------------------------------------------------
    def _forget_old_stamps(self, now_ms: int) -> None:
        horizon = now_ms - int(4 * max(self._config.timeouts.heartbeat, self._config.timeouts.claim) * 1000)
        for stamp in [s for s, seen in self._watched.items() if seen < horizon]:
            del self._watched[stamp]
        self._tracker.forget_sends_before(now_ms - int(self._config.timeouts.enqueue * 1000))
        self._read_past_marks.forget_found(now_ms)

    def _release_lifted(self, gates: GateView) -> None:
        """Tasks a controller handed back under a pause gate are waiting as new: look again once it lifts
        (those of the lifted lambda or collection only: the rest were never held back). A drop gate hands
        nothing back, and what was sent under it (due once it had lifted) must not be sent again."""
        if self._last_gates is not None:
            lifted = set(self._last_gates.gates) - set(gates.gates)
            paused = {(gate.lambda_, gate.collection) for gate in lifted if gate.action is GateAction.PAUSE}
            self._tracker.forget_gated(paused)
        self._last_gates = gates


def _in_turn(partitions: dict[str, Iterator[DueEntry]], ended: set[str]) -> Iterator[DueEntry]:
    """One entry of each partition in turn, oldest first within each: a keyed task's entry is in its key's
    shard (codec.shard_of), so one key's backlog in one shard cannot hold back the heads of the others.
    A partition read to its end is added to `ended`."""
    live = deque(partitions.items())
    while live:
        name, entries = live.popleft()
        entry = next(entries, None)
        if entry is None:
            ended.add(name)
        else:
            yield entry
            live.append((name, entries))


def batches_of(items: Iterator[Outgoing], size: int) -> Iterator[list[Outgoing]]:
    """The items in lists of `size`. Where making the next item raises (a throttled write), the items made
    before it are yielded first, then the error raised: those are recorded as enqueued and must be sent,
    not left to the enqueue timeout."""
    batch: list[Outgoing] = []
    try:
        for item in items:
            batch.append(item)
            if len(batch) == size:
                yield batch
                batch = []
    except Exception:
        if batch:
            yield batch
        raise
    if batch:
        yield batch


def first_page(window: int, partitions: int) -> int:
    """How many entries to ask of each partition first: twice its share of the window, at least ten."""
    return max(10, -(-2 * window // max(1, partitions)))


def _started(entries: Iterator[DueEntry]) -> Iterator[DueEntry]:
    """The entries with their first page read (the query made) now."""
    first = next(entries, None)
    return iter(()) if first is None else itertools.chain((first,), entries)


def fair_share(entries: Iterator[DueEntry], window: int) -> Iterator[DueEntry]:
    """Take the first `window` due entries round-robin by collection and flow key, so one collection's
    or one key's flood cannot starve another's tasks; then the rest in order."""
    head = list(itertools.islice(entries, window))
    by_flow: dict[Flow, deque[DueEntry]] = defaultdict(deque)
    for entry in head:
        by_flow[entry.flow].append(entry)
    while by_flow:
        for flow in list(by_flow):
            yield by_flow[flow].popleft()
            if not by_flow[flow]:
                del by_flow[flow]
    yield from entries


def crowding_flows(head: Sequence[DueEntry], window: int) -> list[Flow]:
    """The keyed flows holding at least an eighth each of a full window (at most eight): other keys' entries
    may wait behind theirs in their shard. None where the window was not filled, since then every due
    entry is in it. A flood without a key is spread over every shard by task id, so the window already
    takes from each shard in turn: reading past it would read the whole backlog, every poll."""
    if len(head) < window:
        return []
    counts = Counter(entry.flow for entry in head if entry.flow_key is not None)
    return [flow for flow, count in counts.most_common(8) if count * 8 >= window]
