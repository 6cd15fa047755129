"""Chains: a sequence or DAG of tasks where each link starts when all its parents have succeeded.

Every link is an ordinary task created with the chain, the roots as new and
the rest as waiting (out of the scheduling index). When a link succeeds its
executor releases the children whose parents have all succeeded; the
consumer sweeps running chains now and then as well, so a release lost with
a dying executor only comes late. A chain is seen as one unit: its status,
each link's state; the links not yet started can be cancelled, and a failed
link (a dead letter) retried, after which the chain carries on.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from atf_core import lifecycle
from atf_core.clock import Clock
from atf_core.config import StackConfig
from atf_core.errors import Conflict, InputError, NotFound, input_error
from atf_core.schema import (
    FLOW_KEY_PATTERN,
    NAME_PATTERN,
    STORED,
    JsonInt,
    Payload,
    ScheduleRequest,
    Task,
    TaskCollection,
    TaskStatus,
    TimeoutSeconds,
    from_ms,
    reachable_by_path,
    read_back,
    refusal,
    to_ms,
    utcnow,
)
from atf_core.store.base import Change, TaskRef, TaskStore
from atf_core.store.items import CHAINS_PARTITION, ItemStore
from atf_core.tasks import build_task, task_id_for

log = logging.getLogger("atf.chains")
LINK_NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
SWEEP_EVERY = timedelta(seconds=5)
REJOIN_ATTEMPTS = 3
MAX_CHAIN_SPEC_BYTES = 160 * 1024
MAKING = "making"  # the chain item's mark while its create has not written every link
FAILED = {TaskStatus.DEAD_LETTER, TaskStatus.FATAL_FAILURE, TaskStatus.EXPIRED, TaskStatus.DROPPED}
# A link in one of these will run (again) with nobody acting: the chain still moves.
UNDER_WAY = {
    TaskStatus.NEW,
    TaskStatus.ENQUEUED,
    TaskStatus.CLAIMED,
    TaskStatus.PROCESSING,
    TaskStatus.RETRIABLE_FAILURE,
}


class LinkSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: Annotated[str, Field(pattern=LINK_NAME_PATTERN), AfterValidator(reachable_by_path)]
    lambda_: str = Field(alias="lambda", pattern=NAME_PATTERN)
    payload: Payload = Field(default_factory=dict)
    collection: TaskCollection = "default"
    priority: str | None = Field(default=None, pattern=NAME_PATTERN)
    max_attempts: JsonInt | None = Field(default=None, ge=1, le=100)
    timeout_seconds: TimeoutSeconds | None = None
    flow_key: str | None = Field(
        default=None,
        pattern=FLOW_KEY_PATTERN,
        description="The link's flow-control key: its lambda's max_running and start-rate limits per key, and "
        "fairness, apply (not singleton or debounce, which act when a task is scheduled on its own).",
    )
    after: list[str] = Field(default_factory=list, description="Links that must succeed first.")

    @field_validator("priority", mode="before")
    @classmethod
    def _stored_empty_priority(cls, value: Any, info: ValidationInfo) -> Any:
        # A link's priority "" was once taken as none (the lambda's default) and stored so: such a chain still
        # reads. A request's "" is refused by the pattern, as a task's is.
        return None if value == "" and read_back(info) else value


class ChainSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    links: list[LinkSpec] = Field(min_length=1, max_length=100)
    key: str | None = Field(default=None, min_length=1, max_length=128)

    @model_validator(mode="after")
    def _a_dag(self) -> ChainSpec:
        # The chain item holds the spec, as UTF-8, and must fit DynamoDB's 400 KB item limit.
        if len(self.model_dump_json(by_alias=True).encode()) > MAX_CHAIN_SPEC_BYTES:
            raise refusal(
                f"the chain is over {MAX_CHAIN_SPEC_BYTES} bytes as JSON; keep large data out of payloads", "links"
            )
        names = [link.name for link in self.links]
        for index, link in enumerate(self.links):
            if link.name in names[:index]:
                raise refusal(f"link names must be distinct: {link.name!r} is taken", "links", index, "name")
            missing = [p for p in link.after if p not in names]
            if missing:
                raise refusal(f"link {link.name!r} waits for unknown links {missing}", "links", index, "after")
        looped = _in_a_cycle({link.name: link.after for link in self.links})
        if looped is not None:
            raise refusal(f"link {looped!r} waits for itself through a cycle", "links", names.index(looped), "after")
        return self

    def fingerprint(self) -> str:
        return json.dumps(self.model_dump(mode="json", by_alias=True, exclude={"key"}), sort_keys=True)


def _in_a_cycle(parents: dict[str, list[str]]) -> str | None:
    """A link that waits, through its parents, for itself; None when the links wait in no cycle."""
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(node: str) -> str | None:
        if state.get(node) == 1:  # met again while its own parents are being visited: it is on a cycle
            return node
        if state.get(node) == 2:
            return None
        state[node] = 1
        looped = next((hit for parent in parents[node] if (hit := visit(parent)) is not None), None)
        state[node] = 2
        return looped

    return next((hit for node in parents if (hit := visit(node)) is not None), None)


class ChainStatus(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class LinkView(BaseModel):
    name: str
    task_id: str
    status: TaskStatus
    attempt: int
    after: list[str]


class ChainView(BaseModel):
    id: str
    status: ChainStatus
    created_at: datetime
    links: list[LinkView]


@dataclass(frozen=True)
class StoredChain:
    id: str
    spec: ChainSpec
    created_at: datetime
    version: int
    making: bool = False  # its links are being written: a reader that changes it writes the rest first

    def task_id(self, link: str) -> str:
        return uuid.uuid5(uuid.UUID(hex=self.id), link).hex


class SweepFailed(Exception):
    """Some chains could not be swept; the consumer counts it (an alarmed metric) and sweeps again next poll."""


class Chains:
    def __init__(self, store: TaskStore, items: ItemStore, config: StackConfig, clock: Clock = utcnow) -> None:
        self._store = store
        self._items = items
        self._config = config
        self._clock = clock

    def create(self, spec: ChainSpec, now: datetime | None = None) -> ChainView:
        now = now or self._clock()
        chain = StoredChain(task_id_for("#chain", spec.key), spec, now, 1, making=True)
        tasks = [self._link_task(chain, link, now) for link in spec.links]  # every link checked first
        # The chain's item first, marked as being made, in the sweep from the start: if this request dies before
        # its last link is written, the sweep writes the rest (a chain is never left half made, key or not).
        if not self._items.put(_chain_item(chain.id), _fields(chain), _sweep_index(now), None):
            existing = self._load(chain.id)
            if self._as_left_out(existing.spec).fingerprint() != self._as_left_out(spec).fingerprint():
                raise Conflict(f"key {spec.key!r} was used for a different chain", "key")
            chain = existing
        for task in tasks:  # idempotent: a retried request finds the links it made, and writes the rest
            self._store.create(task, f"chain:{chain.id}")
        return self._view(self._unmarked(chain, now) if chain.making else chain)

    def _as_left_out(self, spec: ChainSpec) -> ChainSpec:
        """The spec with each link's priority or max_attempts equal to its lambda's default taken as left out:
        the links' tasks are the same either way, so a repeat naming the defaults is the same chain."""
        links = []
        for link in spec.links:
            lambda_spec = self._config.lambdas.get(link.lambda_)
            if lambda_spec is not None:
                link = link.model_copy(update=lambda_spec.defaults_left_out(link.priority, link.max_attempts))
            links.append(link)
        return spec.model_copy(update={"links": links})

    def get(self, chain_id: str, lambda_name: str | None = None) -> ChainView:
        """The chain; with `lambda_name` (a lambda's own route), one with a link of another lambda is not found."""
        return self._view(self._load(chain_id, lambda_name))

    def advance(self, chain_id: str, now: datetime | None = None) -> int:
        """Release every waiting link whose parents have all succeeded; returns how many."""
        return self._advance(self._load(chain_id), now or self._clock())

    def _advance(self, chain: StoredChain, now: datetime) -> int:
        tasks = self._tasks(chain)
        view = self._view(chain, tasks)
        done = {link.name for link in view.links if link.status is TaskStatus.SUCCESS}
        released = 0
        for link in view.links:
            task = tasks.get(link.task_id)  # none: a link a half-made chain has yet to write (the sweep will)
            if task is not None and link.status is TaskStatus.WAITING and all(p in done for p in link.after):
                change = Change(now=now, next_at=now)
                released += int(self._store.transition(TaskRef.of(task), lifecycle.RELEASE_LINK, change).applied)
        self._reindex(chain, view if not released else self._view(chain), now)
        return released

    def cancel(self, chain_id: str, lambda_name: str | None = None) -> ChainView:
        """Cancel every link that has not started; running links finish."""
        now = self._clock()
        # The links a create left out are written waiting, out of the index: written as the create would, a
        # root could be sent and claimed before this cancels it
        chain = self._made(self._load(chain_id, lambda_name), now, status=TaskStatus.WAITING)
        for task in self._tasks(chain).values():
            if lifecycle.CANCEL.allows(task.status):
                change = Change(now=now, reason=f"chain {chain_id} cancelled")
                self._store.transition(TaskRef.of(task), lifecycle.CANCEL, change)
        return self._view(chain)

    def retry(
        self, chain_id: str, link_name: str, budget: int | None = None, lambda_name: str | None = None
    ) -> ChainView:
        """Send a failed (dead-letter) link back to run, with a fresh attempt budget."""
        chain = self._load(chain_id, lambda_name)
        if all(link.name != link_name for link in chain.spec.links):
            raise NotFound(f"chain {chain_id} has no link {link_name!r}", "link")
        # The link's task as it is now (its priority may have been changed since the chain was made); none yet
        # is a link still waiting to be written
        stored = self._store.get(chain.task_id(link_name))
        if stored is None or stored.status is not TaskStatus.DEAD_LETTER:
            status = stored.status.value if stored is not None else TaskStatus.WAITING.value
            raise Conflict(f"link {link_name!r} is {status}; only a dead letter can be retried", "link")
        ref = TaskRef.of(stored)
        now = self._clock()
        attempts = budget or self._config.lambdas[ref.lambda_name].max_attempts
        change = Change(now=now, next_at=now, max_attempts=attempts, reason="retried in its chain")
        self._store.transition(ref, lifecycle.REDRIVE, change)
        view = self._view(chain)
        self._reindex(chain, view, now)
        return view

    def rejoin(self, chain_id: str) -> None:
        """Back in the sweep: one of its links was sent back to run from outside the chain (a dead letter
        redriven). The sweep's next look takes it out again if nothing in it is under way."""
        for _ in range(REJOIN_ATTEMPTS):  # each a fresh read: another writer (an advance) changed it meanwhile
            try:
                chain = self._load(chain_id)
            except NotFound:  # its item gone (expired): nothing left to sweep
                return
            if self._items.put(_chain_item(chain.id), _fields(chain), _sweep_index(self._clock()), chain.version):
                return
        log.warning("chain %s changed %d times while rejoining the sweep", chain_id, REJOIN_ATTEMPTS)

    def parent_results(self, chain_id: str, task_id: str) -> dict[str, Any]:
        """What the parents of a chain's link returned, by link name (a link runs once they all succeeded)."""
        chain = self._load(chain_id)
        link = next((lk for lk in chain.spec.links if chain.task_id(lk.name) == task_id), None)
        if link is None or not link.after:
            return {}
        parents = {t.id: t for t in self._store.get_many([chain.task_id(name) for name in link.after])}
        return {name: parents[chain.task_id(name)].result for name in link.after if chain.task_id(name) in parents}

    def sweep(self, now: datetime) -> int:
        """The consumer's safety net: advance running chains that are due a look."""
        released, failed = 0, 0
        for item in self._items.partition(CHAINS_PARTITION, to_ms(now)):
            try:
                # Only here (and in a cancel) are the links of a chain whose create died part way written: an
                # executor advancing its chain creates no task.
                released += self._advance(self._made(self._load(_chain_id(item)), now), now)
            except Exception:  # say a link the configuration no longer allows: the other chains are swept
                log.exception("sweeping chain %s failed", _chain_id(item))
                failed += 1
        if failed:
            raise SweepFailed(f"{failed} chains could not be swept (logged above); the others were")
        return released

    # -- helpers -------------------------------------------------------------
    def _made(self, chain: StoredChain, now: datetime, status: TaskStatus | None = None) -> StoredChain:
        """The chain with every link written: those a create that died part way left out, as it would have
        written them (or in `status`), then the mark taken off. A chain made whole is returned as it is, so a
        link that went missing later is never made again."""
        if not chain.making:
            return chain
        written = {task.id for task in self._store.get_many([chain.task_id(lk.name) for lk in chain.spec.links])}
        for link in chain.spec.links:
            if chain.task_id(link.name) not in written:
                task = self._link_task(chain, link, chain.created_at, stored=True)
                task = task if status is None else task.model_copy(update={"status": status})
                self._store.create(task, f"chain:{chain.id}")
        return self._unmarked(chain, now)

    def _unmarked(self, chain: StoredChain, now: datetime) -> StoredChain:
        """The chain with its mark taken off, once every link is written."""
        made = replace(chain, making=False)
        if self._items.put(_chain_item(chain.id), _fields(made), _sweep_index(now), chain.version):
            return replace(made, version=chain.version + 1)
        return self._load(chain.id)  # changed meanwhile: made by another caller, or re-indexed, still marked

    def _link_task(self, chain: StoredChain, link: LinkSpec, now: datetime, stored: bool = False) -> Task:
        body: dict[str, Any] = {"lambda": link.lambda_, "payload": link.payload, "collection": link.collection}
        optional = (
            ("priority", link.priority),
            ("max_attempts", link.max_attempts),
            ("timeout_seconds", link.timeout_seconds),
            ("flow_key", link.flow_key),
        )
        body.update({k: v for k, v in optional if v is not None})
        try:
            _no_scheduling_time_key_limit(self._config, link)
            # A link of a stored spec is read as stored: a check added on input since does not stop its making
            request = ScheduleRequest.model_validate(body, context=STORED if stored else None)
            task = build_task(self._config, request, now)
        except ValidationError as error:  # a task's check the link's model lacks: still a refusal, not a fault
            raise _at_link(chain, link, input_error(error)) from None
        except InputError as error:
            raise _at_link(chain, link, error) from None
        status = TaskStatus.NEW if not link.after else TaskStatus.WAITING
        return task.model_copy(update={"id": chain.task_id(link.name), "status": status, "chain": chain.id})

    def _tasks(self, chain: StoredChain) -> dict[str, Task]:
        """The links' tasks by id, as stored: a write addresses a link by its task (its priority the one it was
        made with, under the configuration of then; its flow key's shard), never by its spec."""
        return {t.id: t for t in self._store.get_many([chain.task_id(link.name) for link in chain.spec.links])}

    def _view(self, chain: StoredChain, tasks: dict[str, Task] | None = None) -> ChainView:
        tasks = self._tasks(chain) if tasks is None else tasks
        links = [_link_view(chain, link, tasks.get(chain.task_id(link.name))) for link in chain.spec.links]
        return ChainView(id=chain.id, status=_status(links), created_at=chain.created_at, links=links)

    def _load(self, chain_id: str, lambda_name: str | None = None) -> StoredChain:
        """The stored chain; with `lambda_name`, a chain is that lambda's when every link runs it (a chain
        spanning lambdas is an all-lambdas one): another is answered as none, so a scoped caller learns nothing.
        A chain's links never change lambda, so the check needs no condition in later writes. A lambda the stack
        does not have is refused as unknown."""
        if lambda_name is not None:
            self._config.lambda_named(lambda_name)
        raw = self._items.get(_chain_item(chain_id))
        spec = ChainSpec.model_validate_json(raw["cspec"], context=STORED) if raw is not None else None
        if raw is None or spec is None or (lambda_name is not None and _lambdas(spec) != {lambda_name}):
            raise NotFound(f"no chain {chain_id!r}", "id")
        return StoredChain(chain_id, spec, from_ms(raw["created"]), int(raw.get("v", 0)), bool(raw.get(MAKING)))

    def _reindex(self, chain: StoredChain, view: ChainView, now: datetime) -> None:
        """A chain with a link still under way stays in the sweep partition, whatever its status (a failed branch
        does not stop the others, whose releases the sweep must still make); a chain that cannot move leaves it."""
        moving = chain.making or view.status is ChainStatus.RUNNING or _under_way(view.links)
        index = _sweep_index(now) if moving else None
        self._items.put(_chain_item(chain.id), _fields(chain), index, chain.version)


def _fields(chain: StoredChain) -> dict[str, Any]:
    spec = chain.spec
    # (0.1.0 also wrote its fingerprint, read by nothing, and as \u escapes a spec over the item's 400 KB)
    fields = {"cspec": spec.model_dump_json(by_alias=True), "created": to_ms(chain.created_at)}
    return {**fields, MAKING: True} if chain.making else fields


def _sweep_index(now: datetime) -> tuple[str, int]:
    return CHAINS_PARTITION, to_ms(now + SWEEP_EVERY)


def _chain_item(chain_id: str) -> str:
    return f"#chain#{chain_id}"


def _chain_id(item_id: str) -> str:
    return item_id.removeprefix("#chain#")


def _link_view(chain: StoredChain, link: LinkSpec, task: Task | None) -> LinkView:
    status = task.status if task else TaskStatus.WAITING
    attempt = task.attempt if task else 0
    return LinkView(name=link.name, task_id=chain.task_id(link.name), status=status, attempt=attempt, after=link.after)


def _status(links: list[LinkView]) -> ChainStatus:
    statuses = {link.status for link in links}
    if statuses == {TaskStatus.SUCCESS}:
        return ChainStatus.SUCCEEDED
    if statuses & FAILED:
        return ChainStatus.FAILED
    if TaskStatus.CANCELLED in statuses and not _under_way(links):
        return ChainStatus.CANCELLED
    return ChainStatus.RUNNING


def _under_way(links: list[LinkView]) -> bool:
    """Whether a link will run with nobody acting: one on its way, or one waiting whose parents all succeeded
    (its release is due, from the parent's executor or the sweep)."""
    succeeded = {link.name for link in links if link.status is TaskStatus.SUCCESS}
    return any(
        link.status in UNDER_WAY or (link.status is TaskStatus.WAITING and succeeded.issuperset(link.after))
        for link in links
    )


def _at_link(chain: StoredChain, link: LinkSpec, error: InputError) -> InputError:
    """The error named by the link's place, as the request's own checks name a link (`links[2].after`)."""
    index = next(i for i, known in enumerate(chain.spec.links) if known.name == link.name)
    return type(error)(f"link {link.name!r}: {error.message}", f"links[{index}].{error.field}")


def _lambdas(spec: ChainSpec) -> frozenset[str]:
    """The lambdas a chain's links run."""
    return frozenset(link.lambda_ for link in spec.links)


def _no_scheduling_time_key_limit(config: StackConfig, link: LinkSpec) -> None:
    """A link's task is created with its chain, not scheduled on its own: a singleton key it could not
    take, or a burst it would have to merge into, has no answer there. Refused rather than ignored."""
    spec = config.lambdas.get(link.lambda_)
    limits = spec.key_limits if spec is not None else None
    if link.flow_key is not None and limits is not None and limits.act_when_scheduled:
        mode = "singleton" if limits.singleton else "debounce"
        raise InputError(f"a chain's link cannot take a flow key its lambda makes a {mode}", "flow_key")
