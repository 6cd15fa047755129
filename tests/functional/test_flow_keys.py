"""Flow-control keys (issue 16 §1): a task's flow_key, the per-key limits of its lambda, the controller
acting on them and the consumer's round-robin across keys (moto in-process, a controlled clock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from atf_core import lifecycle
from atf_core.amend import Amendment, amend
from atf_core.config import KeyLimits, LambdaSpec, Limits, OverRate, StackConfig
from atf_core.consumer.consumer import fair_share
from atf_core.consumer.read_past import FULL_EVERY_MS, SLACK_MS
from atf_core.definitions import Attr
from atf_core.limits import IDLE_KEEP_S, Grant, KeyHold, Limiter, Refusal, key_scope
from atf_core.queues import TaskMessage
from atf_core.schema import ScheduleRequest, Task, TaskStatus, to_ms
from atf_core.store import index
from atf_core.store.base import Change, DueEntry, ReadPast, TaskRef
from atf_core.store.codec import shard_of
from atf_core.store.counters import Counters
from atf_core.tasks import Scheduling
from atf_sdk.worker.buffers import Buffered
from atf_sdk.worker.controller import Controller, ControllerSettings
from tests.conftest import work_controller
from tests.functional.helpers import raw_item
from tests.functional.test_consumer import World

T = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def keyed_config(config: StackConfig, **key_limits: Any) -> StackConfig:
    lambdas = dict(config.lambdas)
    lambdas["work"] = lambdas["work"].model_copy(update={"key_limits": KeyLimits(**key_limits)})
    return config.model_copy(update={"lambdas": lambdas})


def limiter(aws: Any, config: StackConfig, clock: dict[str, float], **key_limits: Any) -> Limiter:
    counters = Counters(aws.dynamodb, config.table_name)
    return Limiter(counters, keyed_config(config, **key_limits), clock=lambda: clock["t"])


# -- the field and the configuration ---------------------------------------------------
def test_a_task_keeps_its_flow_key_and_the_consumer_sends_it(aws: Any, config: StackConfig) -> None:
    world = World(aws, config)
    world.now = T
    task = world.schedule(flow_key="customer-42", key="idem-1")
    assert (task.flow_key, task.key) == ("customer-42", "idem-1")  # two fields: flow control, idempotency
    stored = world.store.get(task.id)
    assert stored is not None and stored.flow_key == "customer-42"
    assert raw_item(world.store, task.id)[Attr.FLOW_KEY] == "customer-42"
    world.consumer.poll()
    [message] = world.drain()
    assert message.flow_key == "customer-42"
    assert TaskMessage.decode(message.encode()) == message


def test_a_chains_link_carries_its_flow_key_to_its_message(aws: Any, config: StackConfig) -> None:
    from atf_core.chains import Chains, ChainSpec
    from atf_core.store.items import ItemStore

    world = World(aws, keyed_config(config, max_running=1))
    world.now = T
    chains = Chains(world.store, ItemStore(aws.dynamodb, config.table_name), world.config, clock=lambda: T)
    spec = ChainSpec.model_validate({"links": [{"name": "sync", "lambda": "work", "flow_key": "customer-9"}]})
    [link] = chains.create(spec, now=T).links
    stored = world.store.get(link.task_id)
    assert stored is not None and stored.flow_key == "customer-9"
    world.consumer.poll()
    [message] = world.drain()
    assert (message.task_id, message.flow_key) == (link.task_id, "customer-9")


@pytest.mark.parametrize("limits", [{"singleton": True}, {"debounce": {"quiet_seconds": 5, "max_delay_seconds": 30}}])
def test_a_link_cannot_take_a_key_its_lambda_makes_a_singleton_or_debounces(
    aws: Any, config: StackConfig, limits: dict[str, Any]
) -> None:
    from atf_core.chains import Chains, ChainSpec
    from atf_core.errors import InputError
    from atf_core.store.items import ItemStore

    keyed = keyed_config(config, **limits)
    world = World(aws, keyed)
    chains = Chains(world.store, ItemStore(aws.dynamodb, config.table_name), keyed, clock=lambda: T)
    spec = ChainSpec.model_validate({"links": [{"name": "sync", "lambda": "work", "flow_key": "customer-9"}]})
    with pytest.raises(InputError) as refused:
        chains.create(spec, now=T)
    assert refused.value.field == "links[0].flow_key"
    assert aws.dynamodb.scan(TableName=config.table_name)["Count"] == 0  # nothing written


def test_a_keyless_task_sends_the_message_it_always_did(aws: Any, config: StackConfig) -> None:
    world = World(aws, config)
    world.now = T
    task = world.schedule()
    world.consumer.poll()
    [message] = world.drain()
    assert task.flow_key is None and message.flow_key is None and '"k"' not in message.encode()


@pytest.mark.parametrize("bad", ["", "has space", "x" * 65, "slash/no", "hash#no"])
def test_a_bad_flow_key_is_refused_naming_the_field(bad: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ScheduleRequest.model_validate({"lambda": "work", "flow_key": bad})
    assert [e["loc"] for e in caught.value.errors()] == [("flow_key",)]


@pytest.mark.parametrize(
    ("limits", "field"),
    [
        ({"max_running": 0}, "max_running"),
        ({"max_starts_per_second": 0}, "max_starts_per_second"),
        ({"max_running": 1, "over_rate": "bogus"}, "over_rate"),
        ({"max_running": 1, "debounce": 3}, "debounce"),
    ],
)
def test_bad_key_limits_are_refused_naming_the_field(limits: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        LambdaSpec.model_validate({"key_limits": limits})
    assert [e["loc"] for e in caught.value.errors()] == [("key_limits", field)]


def test_key_limits_that_cap_nothing_are_refused() -> None:
    with pytest.raises(
        ValidationError, match="key_limits needs max_running, max_starts_per_second, singleton or debounce"
    ):
        LambdaSpec.model_validate({"key_limits": {"over_rate": "rate_limit"}})


def test_key_limits_default_to_throttling() -> None:
    spec = LambdaSpec.model_validate({"key_limits": {"max_starts_per_second": 2}})
    assert spec.key_limits is not None and spec.key_limits.over_rate is OverRate.THROTTLE


# -- the limiter, per key ----------------------------------------------------------------
def test_each_key_runs_at_most_its_cap_apart_from_the_others(aws: Any, config: StackConfig) -> None:
    clock = {"t": 1_000.0}
    host_a, host_b = limiter(aws, config, clock, max_running=1), limiter(aws, config, clock, max_running=1)
    first = host_a.acquire("work", "default", "a1", "A")
    assert isinstance(first, Grant) and first.slots == (key_scope("work", "A"),)
    refused = host_b.acquire("work", "default", "a2", "A")  # another host: the cap is in the table
    assert isinstance(refused, Refusal) and not refused.drop and "'A'" in refused.reason
    assert isinstance(host_b.acquire("work", "default", "b1", "B"), Grant)  # key B is not held back by A
    assert isinstance(host_b.acquire("work", "default", "x1"), Grant)  # nor is a keyless task
    host_a.release(first)
    assert isinstance(host_b.acquire("work", "default", "a2", "A"), Grant)


def test_a_dead_workers_key_slot_expires(aws: Any, config: StackConfig) -> None:
    clock = {"t": 1_000.0}
    limits = limiter(aws, config, clock, max_running=1)
    assert isinstance(limits.acquire("work", "default", "a1", "A"), Grant)  # its worker dies: no renewal
    assert isinstance(limits.acquire("work", "default", "a2", "A"), Refusal)
    clock["t"] += config.timeouts.heartbeat + 1
    assert isinstance(limits.acquire("work", "default", "a2", "A"), Grant)


def test_key_counters_expire_by_ttl_after_the_key_goes_quiet(aws: Any, config: StackConfig) -> None:
    clock = {"t": 1_000.0}
    limits = limiter(aws, config, clock, max_running=1, max_starts_per_second=5)
    grant = limits.acquire("work", "default", "a1", "A")
    assert isinstance(grant, Grant)
    table = Counters(aws.dynamodb, config.table_name)._table
    slots, window = table.get("#running#work#A"), table.get("#rate#work#A#1000")
    assert slots is not None and window is not None
    lease_s = 1_000 + max(config.timeouts.heartbeat, config.timeouts.claim)
    assert int(slots[Attr.EXPIRES]["N"]) == lease_s + IDLE_KEEP_S
    assert int(window[Attr.EXPIRES]["N"]) == 1_001 + IDLE_KEEP_S
    clock["t"] += 10
    limits.renew(grant)  # a heartbeat pushes the item's life on with the lease
    slots = table.get("#running#work#A")
    assert slots is not None and int(slots[Attr.EXPIRES]["N"]) == lease_s + 10 + IDLE_KEEP_S


def test_over_the_rate_a_key_throttles_or_drops_as_configured(aws: Any, config: StackConfig) -> None:
    clock = {"t": 1_000.0}
    throttle = limiter(aws, config, clock, max_starts_per_second=2)
    answers = [throttle.acquire("work", "default", f"t{i}", "A") for i in range(3)]
    assert [type(a) for a in answers] == [Grant, Grant, Refusal]
    assert isinstance(answers[2], Refusal) and not answers[2].drop
    assert isinstance(throttle.acquire("work", "default", "t9", "B"), Grant)  # B has its own window
    clock["t"] += 1
    assert isinstance(throttle.acquire("work", "default", "t2", "A"), Grant)
    dropping = limiter(aws, config, clock, max_starts_per_second=1, over_rate="rate_limit")
    assert isinstance(dropping.acquire("work", "default", "r0", "C"), Grant)
    refused = dropping.acquire("work", "default", "r1", "C")
    assert isinstance(refused, Refusal) and refused.drop
    assert refused.reason == "over the rate of flow key 'C' of work (1 starts/s)"


def test_a_refused_rate_gives_back_the_keys_running_slot(aws: Any, config: StackConfig) -> None:
    clock = {"t": 1_000.0}
    limits = limiter(aws, config, clock, max_running=5, max_starts_per_second=1)
    assert isinstance(limits.acquire("work", "default", "a1", "A"), Grant)
    assert isinstance(limits.acquire("work", "default", "a2", "A"), Refusal)
    assert set(Counters(aws.dynamodb, config.table_name).slots(key_scope("work", "A"))) == {"a1"}


def test_a_task_its_key_refuses_spends_none_of_the_lambdas_starts(aws: Any, config: StackConfig) -> None:
    # Given a lambda of 5 starts a second whose keys run one task at a time, and key A's task running
    clock = {"t": 1_000.0}
    keyed = keyed_config(config, max_running=1)
    lambdas = dict(keyed.lambdas)
    lambdas["work"] = lambdas["work"].model_copy(update={"limits": Limits(max_starts_per_second=5)})
    limits = Limiter(Counters(aws.dynamodb, config.table_name), keyed.model_copy(update={"lambdas": lambdas}),
                     clock=lambda: clock["t"])  # fmt: skip
    assert isinstance(limits.acquire("work", "default", "a1", "A"), Grant)
    # When A's next task asks again and again within that second, refused by its key each time
    for _ in range(8):
        refused = limits.acquire("work", "default", "a2", "A")
        assert isinstance(refused, Refusal) and refused.key_hold is KeyHold.MAX_RUNNING
        clock["t"] += 0.1
    # Then the lambda's other four starts of that second are still there for the other keys, and no more
    others = [limits.acquire("work", "default", f"b{n}", f"B{n}") for n in range(5)]
    assert [isinstance(answer, Grant) for answer in others] == [True] * 4 + [False]


# -- the controller ----------------------------------------------------------------------
def controller_for(aws: Any, config: StackConfig, drained: list[Controller], capacity: int = 20) -> Controller:
    settings = ControllerSettings(gate_refresh_s=0, buffer_per_lambda=capacity)
    controller: Controller = work_controller(aws, config, drained, settings)[0]
    return controller


def buffered(config: StackConfig, message: TaskMessage, seq: int = 0) -> Buffered:
    """A message of the normal priority as a controller's buffer holds it."""
    rank = config.lambdas["work"].priorities.index("normal")
    return Buffered(rank, message.due_ms, seq, message, "https://queue.invalid/none", "receipt")


def test_a_task_over_its_keys_rate_limit_ends_dropped_with_the_reason(
    aws: Any, config: StackConfig, drained: list[Controller]
) -> None:
    keyed = keyed_config(config, max_starts_per_second=1, over_rate="rate_limit")
    world = World(aws, keyed)
    world.now = datetime.now(UTC)
    controller = controller_for(aws, keyed, drained)
    # Both claims in one rate window: on the wall clock they straddled a second's edge now and then.
    controller._limiter._clock = lambda: 1_000.5
    first, second = world.schedule(flow_key="A"), world.schedule(flow_key="A")
    world.consumer.poll()
    messages = {m.task_id: m for m in world.drain()}
    claimed = [controller.claim("work", buffered(keyed, messages[t.id]), "h:1") for t in (first, second)]
    ran = [t for t in claimed if t is not None]
    assert len(ran) == 1  # the same window: one starts, the other is over the rate
    dropped = world.store.get(second.id if ran[0].id == first.id else first.id)
    assert dropped is not None and dropped.status is TaskStatus.DROPPED and dropped.attempt == 0
    assert dropped.reason == "over the rate of flow key 'A' of work (1 starts/s)"


@pytest.mark.parametrize("since", ["its attempt failed and waits to retry", "an operator moved it later"])
def test_a_stale_message_over_its_keys_rate_limit_drops_nothing(
    aws: Any, config: StackConfig, drained: list[Controller], since: str
) -> None:
    # Given a key that starts once a window and drops what comes over it, and a task of the key whose message
    # is stale by now: claimed and failed retriably (a duplicate of its message comes), or moved an hour later
    keyed = keyed_config(config, max_starts_per_second=0.2, over_rate="rate_limit")
    world = World(aws, keyed)
    world.now = datetime.now(UTC)
    controller = controller_for(aws, keyed, drained)
    controller._limiter._clock = lambda: 1_000.5  # one rate window throughout
    spender, task = world.schedule(flow_key="A"), world.schedule(flow_key="A")
    world.consumer.poll()
    messages = {m.task_id: m for m in world.drain()}
    if since == "an operator moved it later":
        assert controller.claim("work", buffered(keyed, messages[spender.id]), "h:1") is not None
        Scheduling(world.store, keyed, clock=lambda: world.now).amend(task.id, Amendment(run_at=world.now + HOUR))
    else:
        claimed = controller.claim("work", buffered(keyed, messages[task.id]), "h:1")
        assert claimed is not None
        change = Change(now=world.now, attempt=claimed.attempt, next_at=world.now + HOUR)
        assert world.store.transition(TaskRef.of(claimed), lifecycle.FAIL_RETRIABLE, change).applied
    before = world.store.get(task.id)
    # When the stale message meets the key's rate
    assert controller.claim("work", buffered(keyed, messages[task.id], 1), "h:1") is None
    # Then the task is not dropped: it waits as it was, for its retry or its new time
    after = world.store.get(task.id)
    assert before is not None and after is not None
    assert (after.status, after.next_at, after.attempt) == (before.status, before.next_at, before.attempt)
    assert after.status in (TaskStatus.NEW, TaskStatus.RETRIABLE_FAILURE)


def held_back_in_a_half_full_buffer(
    aws: Any, config: StackConfig, drained: list[Controller]
) -> tuple[StackConfig, World, Controller, Task, dict[str, TaskMessage]]:
    """Key A runs one task at a time and runs one; its second task waits, and the host's buffer of 2 is half
    full: a task its key holds back goes back to the index rather than take more room. The configuration,
    the world, the controller, the waiting task and the messages sent, by task id."""
    keyed = keyed_config(config, max_running=1)
    world = World(aws, keyed)
    world.now = datetime.now(UTC)
    controller = controller_for(aws, keyed, drained, capacity=2)
    running, waiting = world.schedule(flow_key="A"), world.schedule(flow_key="A")
    world.consumer.poll()
    messages = {m.task_id: m for m in world.drain()}
    assert controller.claim("work", buffered(keyed, messages[running.id]), "h:1")
    # a buffer half full: a task its key holds back goes back to the index rather than take more room
    controller._buffers["work"].hold(buffered(keyed, TaskMessage("other", 0, 0, "default"), 2), 60)
    return keyed, world, controller, waiting, messages


def test_a_throttled_keyed_task_waits_without_using_an_attempt(
    aws: Any, config: StackConfig, drained: list[Controller]
) -> None:
    keyed, world, controller, waiting, messages = held_back_in_a_half_full_buffer(aws, config, drained)
    held = buffered(keyed, messages[waiting.id], 1)
    assert controller.claim("work", held, "h:1") is None
    after = world.store.get(waiting.id)
    assert after is not None and after.status is TaskStatus.NEW and after.attempt == 0
    assert after.next_at is not None and to_ms(after.next_at) > messages[waiting.id].due_ms  # deferred, not lost
    # the message it came in is stale now: a late claim of it is refused by the entry fence
    assert controller.claim("work", held, "h:1") is None
    assert world.status(waiting) is TaskStatus.NEW


@pytest.mark.parametrize("change", ["a later run time", "another priority"])
def test_a_throttled_keyed_task_an_operator_changed_keeps_the_change(
    aws: Any, config: StackConfig, drained: list[Controller], change: str
) -> None:
    # Given a task its key holds back, in a buffer half full, and an operator's change since its message was sent
    keyed, world, controller, waiting, messages = held_back_in_a_half_full_buffer(aws, config, drained)
    later = world.now + timedelta(hours=1)
    amendment = Amendment(run_at=later) if change == "a later run time" else Amendment(priority="high")
    changed = Scheduling(world.store, keyed, clock=lambda: world.now).amend(waiting.id, amendment)
    entry = {k: raw_item(world.store, waiting.id)[k] for k in (Attr.INDEX_PK, Attr.INDEX_SK)}
    # When the old message is refused by the key's limit
    assert controller.claim("work", buffered(keyed, messages[waiting.id], 1), "h:1") is None
    # Then the deferral does not write over the change: the task and its index entry stay where the change put
    # them (it had put the run time back to a second from now, or left the entry in the old priority's index)
    after = world.store.get(waiting.id)
    assert after is not None and (after.next_at, after.priority) == (changed.next_at, changed.priority)
    assert {k: raw_item(world.store, waiting.id)[k] for k in (Attr.INDEX_PK, Attr.INDEX_SK)} == entry
    assert after.status is TaskStatus.NEW and after.attempt == 0


def test_with_room_in_the_buffer_a_throttled_keyed_task_waits_there(
    aws: Any, config: StackConfig, drained: list[Controller]
) -> None:
    keyed = keyed_config(config, max_running=1)
    world = World(aws, keyed)
    world.now = datetime.now(UTC)
    controller = controller_for(aws, keyed, drained, capacity=20)
    running, waiting = world.schedule(flow_key="A"), world.schedule(flow_key="A")
    world.consumer.poll()
    messages = {m.task_id: m for m in world.drain()}
    assert controller.claim("work", buffered(keyed, messages[running.id]), "h:1")
    assert controller.claim("work", buffered(keyed, messages[waiting.id], 1), "h:1") is None
    after = world.store.get(waiting.id)
    assert after is not None and after.next_at is not None and to_ms(after.next_at) == messages[waiting.id].due_ms
    assert controller._buffers["work"].room() == 19  # held in the buffer, retried shortly


# -- fairness between keys ---------------------------------------------------------------
def test_fair_share_takes_keys_in_turn() -> None:
    def entry(i: int, key: str | None) -> DueEntry:
        return DueEntry(f"t{i}", "work", "default", "normal", i, flow_key=key)

    flood = [entry(i, "A") for i in range(6)]
    others = [entry(10 + i, k) for i, k in enumerate(["B", "C", None])]
    order = [e.flow_key for e in fair_share(iter(flood + others), window=9)][:4]
    assert order == ["A", "B", "C", None]


def test_a_claimed_keyed_task_releases_its_slot_by_its_executor_view(aws: Any, config: StackConfig) -> None:
    clock = {"t": 1_000.0}
    limits = limiter(aws, config, clock, max_running=1)
    grant = limits.acquire("work", "default", "a1", "A")
    assert isinstance(grant, Grant)
    assert limits.grant_for("work", "default", "a1", "A") == grant  # what the executor renews and gives back
    limits.release(limits.grant_for("work", "default", "a1", "A"))
    assert isinstance(limits.acquire("work", "default", "a2", "A"), Grant)


def test_a_keys_tasks_share_one_shard_and_keyless_ones_spread_by_id(aws: Any, config: StackConfig) -> None:
    world = World(aws, config.model_copy(update={"shards": 8}))
    world.now = T
    keyed = [world.schedule(flow_key="A") for _ in range(6)]
    keyless = [world.schedule() for _ in range(12)]
    assert len({raw_item(world.store, t.id)[Attr.INDEX_PK] for t in keyed}) == 1
    assert len({raw_item(world.store, t.id)[Attr.INDEX_PK] for t in keyless}) > 1


def test_the_consumer_takes_shards_in_turn_so_a_keys_backlog_does_not_hold_back_another_key(
    aws: Any, config: StackConfig
) -> None:
    world = World(aws, config.model_copy(update={"enqueue_per_poll": 10}))  # reads a window of 40 entries
    world.now = T
    flood = [world.schedule(flow_key="A") for _ in range(200)]
    for _ in range(4):  # the consumer shuffles its shards: A's comes first in about half the polls
        world.advance(1)
        other = world.schedule(flow_key="D")  # scheduled after the whole flood, due after it
        shards = {raw_item(world.store, t.id)[Attr.INDEX_PK] for t in (flood[0], other)}
        assert len(shards) == 2, "A and D hash to one shard of two: pick another key"
        world.consumer.poll()
        sent = [m.task_id for m in world.drain()]
        assert other.id in sent and len(sent) <= 10


def sharing_a_shard_with(key: str, shards: int, count: int) -> list[str]:
    """Keys whose tasks land in the same index shard as `key`'s."""
    target = shard_of("", shards, key)
    return [k for k in (f"key-{i}" for i in range(1000)) if shard_of("", shards, k) == target][:count]


@pytest.mark.parametrize("shards", [1, 8])
def test_keys_behind_a_flood_in_its_own_shard_get_their_turns(aws: Any, config: StackConfig, shards: int) -> None:
    # Given a key's flood of 200 due tasks, and three keys sharing its shard whose tasks are due after it
    world = World(aws, config.model_copy(update={"enqueue_per_poll": 10, "shards": shards}))  # a window of 40
    world.now = T
    flood = [world.schedule(flow_key="A") for _ in range(200)]
    world.advance(1)
    behind = {world.schedule(flow_key=k).id for k in sharing_a_shard_with("A", shards, 3)}
    reads = recorded_reads_past(world)
    # When the consumer polls once
    world.consumer.poll()
    # (the second read, leaving A out, asked only the partition the first did not read to its end)
    assert [read["partition"] for read in reads] == [raw_item(world.store, flood[0].id)[Attr.INDEX_PK]]
    sent = [m.task_id for m in world.drain()]
    # Then the three are among its ten messages, and the flood has its turn too
    assert behind <= set(sent) and len(sent) == 10
    assert len(set(sent) & {t.id for t in flood}) >= 2
    # And nothing is sent twice over the next polls
    for _ in range(5):
        world.advance(1)
        world.consumer.poll()
        sent += [m.task_id for m in world.drain()]
    assert len(sent) == len(set(sent))


def recorded_reads_past(world: World) -> list[dict[str, Any]]:
    """Each read past the consumer makes, as it asks for it and with what it found."""
    reads: list[dict[str, Any]] = []
    read_past = world.store.read_past

    def recorded(partition: str, up_to: Any, flows: Any, *args: Any, **kwargs: Any) -> Any:
        found = read_past(partition, up_to, flows, *args, **kwargs)
        reads.append({"partition": partition, "at": world.now, "since_ms": kwargs.get("since_ms"), "found": found})
        return found

    world.store.read_past = recorded  # type: ignore[method-assign]
    return reads


def flooded(world: World, tasks: int = 200) -> list[Task]:
    """A's flood, due now, then a second later."""
    world.now = T
    flood = [world.schedule(flow_key="A") for _ in range(tasks)]
    world.advance(1)
    return flood


def test_a_busy_consumer_reads_past_a_flood_once_a_poll_interval(aws: Any, config: StackConfig) -> None:
    # Given a key's flood of 200 due tasks, with another key's task behind it in its shard
    world = World(aws, config.model_copy(update={"enqueue_per_poll": 10, "shards": 1, "poll_interval": 1.0}))
    flooded(world)
    first = world.schedule(flow_key="B")
    reads = recorded_reads_past(world)
    # When the consumer polls, and polls again at once (as it does while it has a backlog) as more comes
    world.consumer.poll()
    assert first.id in {m.task_id for m in world.drain()} and [r["at"] for r in reads] == [world.now]
    second = world.schedule(flow_key="C")
    sent: list[str] = []
    for _ in range(9):
        world.advance(0.1)
        world.consumer.poll()
        sent += [m.task_id for m in world.drain()]
    # Then it did not read past the flood again within the interval, and the new task waited
    assert len(reads) == 1 and second.id not in sent
    # And the next poll a poll interval after the read past reads past again and sends it
    world.advance(0.1)
    world.consumer.poll()
    assert len(reads) == 2 and second.id in {m.task_id for m in world.drain()}


def test_what_a_read_past_found_beyond_a_polls_share_goes_out_in_the_next_polls(aws: Any, config: StackConfig) -> None:
    # Given A's flood of 200 due tasks, with eight of B's behind it in its shard: more than B's turns in
    # one poll of ten messages, which A shares
    world = World(aws, config.model_copy(update={"enqueue_per_poll": 10, "shards": 1, "poll_interval": 1.0}))
    flooded(world)
    b_tasks = {world.schedule(flow_key="B").id for _ in range(8)}
    reads = recorded_reads_past(world)
    # When the consumer polls three times within a poll interval (as it does while it has a backlog)
    sent: list[str] = []
    for _ in range(3):
        world.consumer.poll()
        sent += [m.task_id for m in world.drain()]
        world.advance(0.1)
    # Then it read past the flood once, and sent all of B's tasks, each once, A's taking turns with them
    assert len(reads) == 1
    assert b_tasks <= set(sent) and len(sent) == len(set(sent)) == 30
    assert len(b_tasks & set(sent[:10])) == 5


def test_a_kept_task_moved_to_another_priority_is_not_enqueued_from_its_old_entry(
    aws: Any, config: StackConfig
) -> None:
    # Given a consumer that records each task as enqueued, and A's flood with eight of B's tasks behind it,
    # read past once: five of B's sent, the rest kept for the next polls
    update = {"enqueue_per_poll": 10, "shards": 1, "poll_interval": 1.0, "record_enqueued": True}
    world = World(aws, config.model_copy(update=update))
    flooded(world)
    b_tasks = [world.schedule(flow_key="B") for _ in range(8)]
    world.consumer.poll()
    sent = {m.task_id for m in world.drain()}
    moved, *still = [t.id for t in b_tasks if t.id not in sent]
    # When one of those kept moves to the low priority (polled after normal) before the next poll
    world.advance(0.1)
    current = world.store.get(moved)
    assert current is not None
    assert amend(world.store, current, Amendment(priority="low"), world.now).applied
    world.consumer.poll()
    # Then the other kept ones go out on normal, the moved one not from its old entry there (its claim would
    # refuse it, and it would stay enqueued until the enqueue timeout), and low's entry sends it
    normal = {m.task_id for m in world.drain()}
    assert set(still) <= normal and moved not in normal
    assert [m.task_id for m in world.drain("low")] == [moved]
    assert world.status(current) is TaskStatus.ENQUEUED


def test_a_read_past_starts_where_the_last_found_the_other_flows(aws: Any, config: StackConfig) -> None:
    # Given A's flood of a few seconds ago with B's task behind it in its shard, read past once
    world = World(aws, config.model_copy(update={"enqueue_per_poll": 10, "shards": 1}))
    flood = flooded(world)
    world.advance(5)
    first = world.schedule(flow_key="B")
    reads = recorded_reads_past(world)
    world.consumer.poll()
    assert first.id in {m.task_id for m in world.drain()}
    assert reads[0]["since_ms"] is None and reads[0]["found"].clear_to_ms == to_ms(first.scheduled_at)
    # When C's task comes behind the flood and the consumer polls a poll interval later
    read_at = world.now
    world.advance(1)
    second = world.schedule(flow_key="C")
    world.consumer.poll()
    # Then that read started past A's 200 (where B's was found, or the slack before the last read, if earlier)
    assert reads[1]["since_ms"] == to_ms(read_at) - SLACK_MS > to_ms(flood[-1].scheduled_at)
    assert second.id in {m.task_id for m in world.drain()}


def test_an_entry_older_than_the_mark_is_found_by_the_next_full_read(aws: Any, config: StackConfig) -> None:
    # Given a consumer reading past A's flood from its mark
    world = World(aws, config.model_copy(update={"enqueue_per_poll": 10, "shards": 1}))
    flooded(world, tasks=400)
    world.advance(5)
    reads = recorded_reads_past(world)
    world.consumer.poll()
    world.drain()
    # When B's task is written due at a moment before that mark (a time in the past, behind A's backlog)
    old = world.schedule(flow_key="B", run_at=(T + timedelta(seconds=0.5)).isoformat())
    sent: list[str] = []
    while old.id not in sent and world.now < T + timedelta(seconds=30):
        world.advance(1)
        world.consumer.poll()
        sent += [m.task_id for m in world.drain()]
    # Then the reads from the mark pass it by, and the next read from the oldest entry finds it
    fulls = [read["at"] for read in reads if read["since_ms"] is None]
    assert old.id in sent and len(fulls) == 2
    assert timedelta(milliseconds=FULL_EVERY_MS) <= fulls[1] - fulls[0] <= timedelta(milliseconds=FULL_EVERY_MS + 1000)


def test_a_read_past_says_how_far_it_found_only_the_flows(
    aws: Any, config: StackConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = World(aws, config.model_copy(update={"shards": 1}))
    flood = flooded(world, tasks=20)
    up_to = world.now + timedelta(seconds=5)
    partition = raw_item(world.store, flood[0].id)[Attr.INDEX_PK]
    a = [("default", "A")]
    # Nothing but A's: clear to the end of what is due
    assert world.store.read_past(partition, up_to, a) == ReadPast([], to_ms(up_to))
    # Stopped after READ_PAST of A's: clear to the last entry it passed over
    monkeypatch.setattr(index, "READ_PAST", 5)
    fifth = sorted(raw_item(world.store, t.id)[Attr.INDEX_SK] for t in flood)[4]
    assert world.store.read_past(partition, up_to, a) == ReadPast([], int(fifth))
    monkeypatch.setattr(index, "READ_PAST", 6000)
    # Another key's entries behind: clear to the first of them, and at most `limit` of them
    behind = [world.schedule(flow_key="X")]
    world.advance(0.5)
    behind.append(world.schedule(flow_key="Y"))
    found = world.store.read_past(partition, up_to, a, limit=1)
    assert [e.id for e in found.behind] == [behind[0].id] and found.clear_to_ms == found.behind[0].next_ms
    # From a mark: only what lies after it
    since = world.store.read_past(partition, up_to, a, since_ms=found.clear_to_ms + 1)
    assert [e.id for e in since.behind] == [behind[1].id]


def test_a_flood_without_keys_is_not_read_past(aws: Any, config: StackConfig) -> None:
    """Spread over every shard by id, it fills each shard's head: reading past it would read it all."""
    world = World(aws, config.model_copy(update={"enqueue_per_poll": 10}))
    world.now = T
    for _ in range(200):
        world.schedule(collection="flood")
    reads = recorded_reads_past(world)
    world.consumer.poll()
    assert len(world.drain()) == 10 and reads == []


def test_a_read_past_leaves_out_the_flows_it_is_told_to(aws: Any, config: StackConfig) -> None:
    world = World(aws, config.model_copy(update={"shards": 1}))
    world.now = T
    made = {
        "A": world.schedule(flow_key="A"),
        "A in x": world.schedule(flow_key="A", collection="x"),
        "B": world.schedule(flow_key="B"),
        "none": world.schedule(),
        "none in x": world.schedule(collection="x"),
        "B in x": world.schedule(flow_key="B", collection="x"),
    }
    partition = raw_item(world.store, made["none"].id)[Attr.INDEX_PK]
    skip = [("default", "A"), ("x", None)]
    left = {e.id for e in world.store.read_past(partition, T + timedelta(seconds=5), skip).behind}
    assert left == {made[name].id for name in ("B", "none", "B in x")}
    both = {e.id for e in world.store.read_past(partition, T + timedelta(seconds=5), skip, ["x"]).behind}
    assert both == {made[name].id for name in ("B", "none")}


def test_a_read_past_a_flood_stops_after_so_many_of_its_entries(
    aws: Any, config: StackConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DynamoDB bills every entry a filter passes over: the read past a flood is bounded in entries."""
    world = World(aws, config.model_copy(update={"shards": 1}))
    world.now = T
    for _ in range(20):
        world.schedule(flow_key="A")
    world.advance(1)
    behind = world.schedule(flow_key="X")
    partition, up_to = raw_item(world.store, behind.id)[Attr.INDEX_PK], T + timedelta(seconds=5)
    monkeypatch.setattr(index, "READ_PAST", 5)
    assert [e.id for e in world.store.read_past(partition, up_to, [("default", "A")]).behind] == []
    monkeypatch.setattr(index, "READ_PAST", 50)
    assert [e.id for e in world.store.read_past(partition, up_to, [("default", "A")]).behind] == [behind.id]


def test_a_keyed_message_carries_its_key_as_the_message_group(aws: Any, config: StackConfig) -> None:
    world = World(aws, config)
    world.queues.send("work", "normal", [TaskMessage("t1", 0, 1, "default", "A"), TaskMessage("t2", 0, 1, "default")])
    url = world.queues.url("work", "normal")
    reply = aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"])
    groups = {TaskMessage.decode(m["Body"]).task_id: m["Attributes"].get("MessageGroupId") for m in reply["Messages"]}
    assert groups == {"t1": "A", "t2": None}
