"""Dead letters: tasks that failed for good, kept with every attempt's error.

They sit in their lambda's dead-letter partitions of the index, keyed by when
they died, so a filtered selection (collection, error class, time window) is
a cheap query. An operator redrives a selection back to new with a fresh
attempt budget, spread out at a drip rate so a fixed bug does not meet a
stampede, or discards it (the tasks end as fatal_failure).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice

from atf_core import lifecycle, singleton
from atf_core.amend import check_drip, dripped
from atf_core.clock import Clock
from atf_core.config import StackConfig
from atf_core.definitions import Attr
from atf_core.errors import FlowKeyBusy, InputError, NotFound
from atf_core.lifecycle import Assoc
from atf_core.schema import Task, TaskStatus, from_ms, to_ms, utcnow
from atf_core.store.base import Change, DueEntry, TaskRef, TaskStore
from atf_core.store.codec import index_partition
from atf_core.store.positions import Position, in_order

EPOCH = datetime(1970, 1, 2, tzinfo=UTC)
FOREVER = datetime(9999, 1, 1, tzinfo=UTC)
MAX_SELECTION = 10_000
# A dead letter's position (store.positions) is (died at, id); as text (a page's `next`, passed back as
# `after`): "<ms>-<id>".
POSITION_PATTERN = r"^[0-9]{1,15}-[0-9a-f]{32}$"
# Told the chain of each chain link redriven (Chains.rejoin), so the chain is swept again while the link runs.
ChainHook = Callable[[str], None]


@dataclass(frozen=True)
class DeadLetterFilter:
    lambda_name: str
    collection: str | None = None
    error_type: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 1000
    ids: tuple[str, ...] = ()  # these dead letters, by id: a selection of its own (the request model checks it)


@dataclass(frozen=True)
class DeadLetter:
    id: str
    lambda_name: str
    collection: str
    priority: str
    error_type: str | None
    died_at: datetime
    flow_key: str | None = None


@dataclass
class BulkResult:
    """What a redrive or discard did, or in a dry run would do."""

    dry_run: bool
    matched: list[DeadLetter] = field(default_factory=list)
    changed: int = 0
    first_at: datetime | None = None
    last_at: datetime | None = None
    # Redrive: dead letters left as they are because another task holds their singleton flow key meanwhile
    # (redriving them would run two at once); redrive them again once it settles.
    key_busy: list[str] = field(default_factory=list)
    more: bool = False  # the selection holds more than `limit`: go on with `next` and `until` for the rest
    # Where this call's selection ended, if more follow: passed back as `after`, the next call goes on past
    # the letters this one reached (those it left dead too, e.g. key_busy); without it, from the oldest again.
    next: str | None = None
    # With `next`: the `until` to pass back with it, the time of this call (to the millisecond the index keeps)
    # or the selection's own until if earlier. A letter this call redrove that dies again dies after the call,
    # past any `after`: bounded so, going on takes the letters dead when it began and no others.
    until: datetime | None = None


@dataclass(frozen=True)
class DeadLetterPage:
    letters: list[DeadLetter]
    more: bool  # more of the selection follow the last letter (its position: `after` for the next page)


class DeadLetters:
    def __init__(
        self, store: TaskStore, config: StackConfig, clock: Clock = utcnow, rejoin_chain: ChainHook | None = None
    ) -> None:
        self._store = store
        self._config = config
        self._clock = clock
        self._rejoin_chain = rejoin_chain

    def matching(self, selection: DeadLetterFilter) -> list[DeadLetter]:
        """The oldest `limit` dead letters of the selection, oldest first."""
        return self.page(selection).letters

    def page(self, selection: DeadLetterFilter, after: Position | None = None) -> DeadLetterPage:
        """The oldest `limit` dead letters of the selection that follow `after`, oldest first, and whether
        more follow.

        Each partition is read in time order, so its first `limit` + 1 entries past `after` are all it can
        contribute (the one past `limit` says there are more); the oldest across partitions are then kept.
        """
        if selection.ids:
            return DeadLetterPage(self._chosen(selection), more=False)
        limit = min(selection.limit, MAX_SELECTION)
        found = [
            _dead_letter(entry)
            for entries in self._partitions(selection, after)
            for entry in islice(_past(in_order(entries), after), limit + 1)
        ]
        found.sort(key=letter_position)
        return DeadLetterPage(found[:limit], len(found) > limit)

    def _chosen(self, selection: DeadLetterFilter) -> list[DeadLetter]:
        """The dead letters named by id, oldest first; an id that is not one of the lambda's is refused (NotFound
        naming `ids[i]`) before anything is written."""
        tasks = {task.id: task for task in self._store.get_many(selection.ids)}
        chosen = []
        for n, task_id in enumerate(selection.ids):
            task = tasks.get(task_id)
            if task is None or task.lambda_ != selection.lambda_name:  # another lambda's is as none: nothing told
                raise NotFound(f"no task {task_id} of {selection.lambda_name}", f"ids[{n}]")
            if task.status is not TaskStatus.DEAD_LETTER:
                raise NotFound(f"{task_id} is not a dead letter: it is {task.status}", f"ids[{n}]")
            chosen.append(_letter_of(task))
        return sorted(chosen, key=letter_position)

    def redrive(
        self,
        selection: DeadLetterFilter,
        dry_run: bool,
        per_second: float | None = None,
        budget: int | None = None,
        after: Position | None = None,
    ) -> BulkResult:
        """Back to new, each with `budget` more attempts, started at most per_second a second; the oldest
        `limit` of the selection that follow `after`."""
        if per_second is not None and per_second <= 0:
            raise InputError("per_second must be positive", "per_second")
        now, page = self._clock(), self.page(selection, after)
        matched, result = page.letters, _result_of(page, selection, dry_run, now)
        attempts = budget or self._config.lambdas[selection.lambda_name].max_attempts
        keys_taken = set[str]()
        # The drip starts at the call's now (first_at), not before the result's `until`: a letter redriven here
        # that dies again is not taken again by the calls that go on.
        starts = dripped(now, len(matched), per_second)
        check_drip(starts, now)
        for dead, start in zip(matched, starts, strict=True):
            result.first_at = result.first_at or start
            result.last_at = start
            if dry_run:
                if self._would_find_busy(dead, keys_taken):
                    result.key_busy.append(dead.id)
                continue
            change = Change(now=now, next_at=start, max_attempts=attempts, reason=f"redriven at {now.isoformat()}")
            try:
                result.changed += int(self._redrive(dead, change))
            except FlowKeyBusy:
                result.key_busy.append(dead.id)
        return result

    def _singleton(self, dead: DeadLetter) -> bool:
        limits = self._config.lambda_named(dead.lambda_name).key_limits
        return dead.flow_key is not None and limits is not None and limits.singleton

    def _redrive(self, dead: DeadLetter, change: Change) -> bool:
        """Back to new; a singleton key's dead letter takes its key again (FlowKeyBusy where another holds it).
        A chain's link redriven puts its chain back in the sweep: a failed chain had left it, and a release of
        the link's children lost with a dying executor would then never come."""
        if self._singleton(dead):
            applied = singleton.redrive(self._store, _ref(dead), change)
            task = self._store.get(dead.id) if applied and self._rejoin_chain else None
        else:
            outcome = self._store.transition(_ref(dead), lifecycle.REDRIVE, change)
            applied, task = outcome.applied, outcome.task
        if applied and task is not None and task.chain and self._rejoin_chain:
            self._rejoin_chain(task.chain)
        return applied

    def _would_find_busy(self, dead: DeadLetter, keys_taken: set[str]) -> bool:
        """A dry run's prediction of FlowKeyBusy: another unsettled task holds the key now, or an earlier
        dead letter of this redrive would have taken it back."""
        if not self._singleton(dead) or dead.flow_key is None:
            return False
        busy = dead.flow_key in keys_taken or singleton.busy_holder(self._store, _ref(dead))[1] is not None
        keys_taken.add(dead.flow_key)
        return busy

    def discard(self, selection: DeadLetterFilter, dry_run: bool, after: Position | None = None) -> BulkResult:
        now, page = self._clock(), self.page(selection, after)
        matched, result = page.letters, _result_of(page, selection, dry_run, now)
        if not dry_run:
            for dead in matched:
                change = Change(now=now, reason="discarded from the dead letters")
                result.changed += int(self._store.transition(_ref(dead), lifecycle.DISCARD, change).applied)
        return result

    def _partitions(self, selection: DeadLetterFilter, after: Position | None) -> Iterator[Iterator[DueEntry]]:
        spec = self._config.lambda_named(selection.lambda_name)
        equal = {}
        if selection.collection:
            equal[Attr.COLLECTION] = selection.collection
        if selection.error_type:
            equal[Attr.ERROR_TYPE] = selection.error_type
        low, high = selection.since or EPOCH, selection.until or FOREVER
        if after is not None:  # from the last page's last letter's time on (others died in the same ms)
            low = max(low, from_ms(after[0]))
        if low > high:  # past the window: DynamoDB refuses a range whose start is after its end
            return
        for priority in spec.priorities:
            for shard in range(self._config.shards_of(selection.lambda_name)):
                partition = index_partition(Assoc.DEAD_LETTER, selection.lambda_name, priority, shard)
                yield self._store.entries(partition, low, high, equal)


def _result_of(page: DeadLetterPage, selection: DeadLetterFilter, dry_run: bool, now: datetime) -> BulkResult:
    result = BulkResult(dry_run, page.letters, more=page.more, next=page_next(page))
    if result.next is not None:
        called = from_ms(to_ms(now))
        result.until = called if selection.until is None else min(selection.until, called)
    return result


def page_next(page: DeadLetterPage) -> str | None:
    """Where a page ended, if more follow (its last letter's position as text); None at the end."""
    return position_text(page.letters[-1]) if page.more and page.letters else None


def letter_position(dead: DeadLetter) -> Position:
    return to_ms(dead.died_at), dead.id


def position_text(dead: DeadLetter) -> str:
    died_ms, task_id = letter_position(dead)
    return f"{died_ms}-{task_id}"


def position_of(text: str, field: str = "after") -> Position:
    """A position as position_text wrote it (its form checked against POSITION_PATTERN where it came in); one
    past the last time a task can have is refused, naming `field`."""
    died_ms, task_id = text.split("-", 1)
    if int(died_ms) > to_ms(FOREVER):
        raise InputError(f"{field} is past the last time a dead letter can have: pass a page's next as it is", field)
    return int(died_ms), task_id


def _past(entries: Iterator[DueEntry], after: Position | None) -> Iterator[DueEntry]:
    """The entries listed after `after` (all of them without one)."""
    return entries if after is None else (e for e in entries if (e.next_ms, e.id) > after)


def _dead_letter(entry: DueEntry) -> DeadLetter:
    return DeadLetter(
        id=entry.id,
        lambda_name=entry.lambda_name,
        collection=entry.collection,
        priority=entry.priority,
        error_type=entry.error_type,
        died_at=from_ms(entry.next_ms),
        flow_key=entry.flow_key,
    )


def _letter_of(task: Task) -> DeadLetter:
    """A dead letter as its task reads: its index entry's time is its time of death."""
    died_at = task.next_at or task.finished_at or task.created_at
    error_type = task.last_error.type if task.last_error is not None else None
    return DeadLetter(task.id, task.lambda_, task.collection, task.priority, error_type, died_at, task.flow_key)


def _ref(dead: DeadLetter) -> TaskRef:
    """With its flow key: a keyed task's entries stay in its key's shard (codec.shard_of)."""
    return TaskRef(dead.id, dead.lambda_name, dead.priority, dead.flow_key)
