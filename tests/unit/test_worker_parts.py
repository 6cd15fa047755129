"""The worker runtime's parts on their own: heartbeat guard, local buffers, batched deletes, queue budget."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from atf_core.config import MISSES_ALLOWED, Timeouts
from atf_core.consumer.budget import QueueBudget
from atf_core.lifecycle import Transition
from atf_core.queues import TaskMessage
from atf_core.schema import Task, TaskStatus
from atf_core.store.base import Change, Outcome, TaskRef
from atf_sdk.worker.buffers import BATCH, Received, WorkBuffer
from atf_sdk.worker.deletes import DeleteBatcher
from atf_sdk.worker.heartbeat import Heartbeats
from tests.builders import NOW, a_task


def task(task_id: str = "t1", attempt: int = 1) -> Task:
    return a_task(id=task_id, status=TaskStatus.CLAIMED, attempt=attempt)


class ScriptedStore:
    """Answers heartbeats from a script: 'ok', 'refused' or 'error'."""

    def __init__(self, script: list[str]) -> None:
        self.script = script
        self.calls: list[Change] = []
        self.transitions: list[str] = []

    def transition(self, ref: TaskRef, transition: Transition, change: Change) -> Outcome:
        self.calls.append(change)
        self.transitions.append(transition.name)
        answer = self.script.pop(0) if self.script else "ok"
        if answer == "error":
            raise ConnectionError("throttled")
        return Outcome(applied=answer == "ok", task=None)


def heartbeats(script: list[str], interval: float = 1.0) -> tuple[Heartbeats, list[str], ScriptedStore]:
    reasons: list[str] = []
    store = ScriptedStore(script)
    timeouts = Timeouts(heartbeat_interval=interval, heartbeat=3 * interval + 7, claim=3 * interval + 7)
    return Heartbeats(store, timeouts, terminate=reasons.append), reasons, store  # type: ignore[arg-type]


def test_three_failed_heartbeats_in_a_row_end_the_process() -> None:
    beats, reasons, _ = heartbeats(["error", "error", "ok", "error", "error", "error"])
    beats.track(task())
    for _ in range(5):
        beats.beat_all()
    assert reasons == []  # the success in between reset the count
    beats.beat_all()
    assert len(reasons) == 1 and f"{MISSES_ALLOWED} consecutive" in reasons[0]


def test_a_refused_heartbeat_means_the_lease_is_lost() -> None:
    beats, reasons, store = heartbeats(["refused"])
    beats.track(task(attempt=2))
    beats.beat_all()
    assert store.calls[0].attempt == 2  # fenced by the attempt
    assert reasons and "lost" in reasons[0]


def test_a_heartbeat_moves_the_index_entry_only_when_it_would_soon_come_due() -> None:
    # Given beats one after another (the entry, once moved, stays a whole timeout ahead)
    beats, reasons, store = heartbeats(["error", "ok", "ok", "ok"])
    beats.track(task())
    for _ in range(4):
        beats.beat_all()
    # Then the first beat that lands moves it (a failed one does not count), the rest only stamp
    assert store.transitions == ["heartbeat", "heartbeat", "heartbeat_stamp", "heartbeat_stamp"]
    assert reasons == []


def test_the_move_rule_keeps_the_entry_more_than_half_a_timeout_ahead() -> None:
    from datetime import timedelta

    from atf_core.lifecycle import heartbeat_moves_entry

    assert heartbeat_moves_entry(None, NOW, 30)  # never moved: still at the scheduled time
    assert not heartbeat_moves_entry(NOW + timedelta(seconds=15), NOW, 30)
    assert heartbeat_moves_entry(NOW + timedelta(seconds=14.9), NOW, 30)


def test_a_refusal_after_the_task_finished_is_not_a_lost_lease() -> None:
    beats, reasons, _ = heartbeats(["refused"])
    beats.track(task())
    beats.untrack(task())
    beats.beat_all()
    assert reasons == []


def test_an_attempt_that_ends_leaves_the_next_attempt_of_its_task_heartbeated() -> None:
    # Given attempt 2 of a task tracked while attempt 1's thread still finishes (a Retry(after=0), claimed again)
    beats, _, store = heartbeats([])
    first = task()
    second = first.model_copy(update={"attempt": first.attempt + 1})
    beats.track(first)
    beats.track(second)
    # When attempt 1's thread stops heartbeating its attempt
    beats.untrack(first)
    # Then attempt 2 is still heartbeated
    beats.beat_all()
    assert [change.attempt for change in store.calls] == [second.attempt]


def test_slow_renewals_of_limit_slots_do_not_delay_the_heartbeats() -> None:
    # Given two tasks of one executor, beats every 50 ms against a 1 s lease, and slot renewals of 0.6 s each
    # (a throttled slots item): in turn with the beats, a task would wait 1.25 s between its beats
    timeouts = SimpleNamespace(heartbeat_interval=0.05, heartbeat=2.0, lease_floor=1.0, call_budget=0.3)
    ended: list[str] = []
    renewed: list[str] = []
    store = ScriptedStore([])

    def slow_renewal(running: Any) -> None:
        time.sleep(0.6)
        renewed.append(running.id)

    beats = Heartbeats(store, timeouts, terminate=ended.append, on_beat=slow_renewal)  # type: ignore[arg-type]
    for name in ("a", "b"):
        beats.track(task(name))
    # When the executor heartbeats them for 2 s
    threading.Thread(target=beats.run, daemon=True).start()
    time.sleep(2.0)
    beats.stop()
    # Then no lease was taken for lost, and the slots were still renewed, each task's in turn
    assert ended == [] and {"a", "b"} <= set(renewed), (ended, renewed)


def test_a_process_that_was_paused_past_its_lease_ends_before_writing() -> None:
    beats, reasons, store = heartbeats([], interval=0.01)
    beats.track(task())
    written = len(store.calls)  # a lease this short is renewed before the task starts
    time.sleep(3 * 0.01 + Timeouts(heartbeat_interval=0.01, heartbeat=10, claim=10).call_budget + 0.05)
    beats.beat_all()
    assert reasons and "no successful heartbeat" in reasons[0]
    assert len(store.calls) == written


def late(claimed_s_ago: float) -> Task:
    from datetime import timedelta

    from atf_core.schema import utcnow

    return task().model_copy(update={"claimed_at": utcnow() - timedelta(seconds=claimed_s_ago)})


def test_a_task_handed_over_late_is_heartbeated_before_it_starts() -> None:
    """Else the beat loop's next round, up to an interval away, and its call could come after the watchdog
    took the lease for lost and ended the process, with every other task it runs."""
    # Given beats every second: a lease floor of 3 s and one call's budget, a claim that much less 2.6 s old
    beats, reasons, store = heartbeats([])
    floor = Timeouts(heartbeat_interval=1.0, heartbeat=10, claim=10).lease_floor
    assert beats.track(late(floor - 2.6))
    # Then a heartbeat landed at once, renewing the lease
    assert store.transitions == ["heartbeat"] and reasons == []
    # And one handed over with a whole round of beats left is not
    assert beats.track(late(0.0).model_copy(update={"id": "t2"})) and len(store.transitions) == 1


def test_a_task_handed_over_too_late_is_not_started_and_the_process_goes_on() -> None:
    # Given an executor running a task, and a second task whose lease ran out before it got to a thread, or
    # whose first heartbeat, needed at once, fails
    floor = Timeouts(heartbeat_interval=1.0, heartbeat=10, claim=10).lease_floor
    for claimed_s_ago, script, tried in ((60.0, [], 0), (floor - 2.6, ["error"], 1)):
        beats, reasons, store = heartbeats(script)
        assert beats.track(task("running"))
        # Then the second is refused, and the process (with the task it runs) is not ended
        assert not beats.track(late(claimed_s_ago))
        assert reasons == [] and set(beats._running) == {"running"}
        assert len(store.transitions) == tried  # the beat it needed was tried, where it had lease left


def message(task_id: str, due_ms: int = 0) -> TaskMessage:
    return TaskMessage(task_id, 0, due_ms, "c")


def received(*task_ids: str, due_ms: int = 0) -> list[Received]:
    return [Received(message(t, due_ms), "q", f"r-{t}") for t in task_ids]


def test_the_buffer_serves_the_highest_priority_first_and_holds_early_tasks() -> None:
    buffer = WorkBuffer(capacity=10, ranks=3)
    buffer.put_many(2, received("low"), more=False)
    buffer.put_many(0, received("high"), more=False)
    buffer.put_many(0, received("later", due_ms=int((time.time() + 0.3) * 1000)), more=False)
    buffer.put_many(1, received("normal"), more=False)
    assert buffer.room() == 7  # "later" came early: it uses the allowance of early messages
    taken = [buffer.take(0.01) for _ in range(3)]
    assert [t.message.task_id for t in taken if t] == ["high", "normal", "low"]
    assert buffer.take(0.01) is None  # "later" is not due yet
    held = buffer.take(1.0)
    assert held is not None and held.message.task_id == "later"


def test_a_higher_priority_has_room_whatever_lower_ones_hold_and_pushes_the_last_of_them_out() -> None:
    # Given a buffer of four filled with low-priority messages
    buffer = WorkBuffer(capacity=4, ranks=2)
    assert buffer.put_many(1, received("l1", "l2", "l3", "l4"), more=False) == []
    assert (buffer.room(), buffer.room(1), buffer.room(0)) == (0, 0, 4)
    # When a high-priority receive brings in two
    evicted = buffer.put_many(0, received("h1", "h2"), more=False)
    # Then the two low ones due last make way (for the controller to hand back), and the highs run first
    assert [e.message.task_id for e in evicted] == ["l4", "l3"]
    taken = [buffer.take(0.01) for _ in range(5)]
    assert [t.message.task_id for t in taken if t] == ["h1", "h2", "l1", "l2"]


def test_no_lower_priority_is_received_or_handed_out_while_a_higher_queue_may_hold_more() -> None:
    buffer = WorkBuffer(capacity=20, ranks=2)
    assert buffer.expects_more(0) and not buffer.expects_more(1)  # unknown until the first receive
    assert buffer.batch(1) == 0  # the low receiver waits for the high one's first receive
    buffer.may_hold_more(0, False)
    assert buffer.batch(1) == 10
    buffer.put_many(1, received("l1"), more=False)
    # A full batch of highs: their queue may hold more, so the low message waits for the next receive
    buffer.put_many(0, received(*(f"h{i}" for i in range(10))), more=True)
    assert [buffer.take(0.01).message.task_id for _ in range(10)] == [f"h{i}" for i in range(10)]  # type: ignore[union-attr]
    assert buffer.take(0.05) is None and buffer.batch(1) == 0
    # ...until it finds the queue empty
    buffer.put_many(0, [], more=False)
    low = buffer.take(0.01)
    assert low is not None and low.message.task_id == "l1"


def test_a_higher_priority_without_room_holds_nothing_back() -> None:
    # Given highs not due yet that fill their room (the early allowance), so their receiver cannot fetch more
    buffer = WorkBuffer(capacity=11, ranks=2)
    later = int((time.time() + 60) * 1000)
    buffer.put_many(0, received(*(f"h{i}" for i in range(20)), due_ms=later), more=True)
    buffer.put_many(1, received("l1"), more=False)
    assert buffer.batch(0) == 0
    # Then a due low one runs: highs that are not ready hold nothing back
    low = buffer.take(0.01)
    assert low is not None and low.message.task_id == "l1"


def test_messages_that_came_early_keep_no_due_one_waiting_in_the_queue() -> None:
    # Given a buffer of twenty holding nineteen messages due in a second (the consumer sent them ahead)
    buffer = WorkBuffer(capacity=20, ranks=1)
    soon = int((time.time() + 1) * 1000)
    buffer.put_many(0, received(*(f"e{i}" for i in range(19)), due_ms=soon), more=False)
    # When its receiver asks what to fetch, it fetches a batch: the early ones have an allowance of their own
    assert buffer.batch(0) == 10
    # Then the due ones it brings are kept, and handed out before the early ones
    assert buffer.put_many(0, received(*(f"d{i}" for i in range(10))), more=False) == []
    assert [buffer.take(0.01).message.task_id for _ in range(10)] == [f"d{i}" for i in range(10)]  # type: ignore[union-attr]
    assert buffer.take(0.01) is None


def test_due_messages_stay_within_the_capacity_and_early_ones_within_as_much_again() -> None:
    # Given a buffer of four holding four due messages: no receive
    buffer = WorkBuffer(capacity=4, ranks=2)
    buffer.put_many(1, received("l1", "l2", "l3", "l4"), more=False)
    assert buffer.room(1) == 0
    # Given another holding eight early ones: no receive either
    early = WorkBuffer(capacity=4, ranks=2)
    soon = int((time.time() + 5) * 1000)
    early.put_many(1, received(*(f"e{i}" for i in range(8)), due_ms=soon), more=False)
    assert early.room(1) == 0
    # When a high-priority receive brings two due ones into it, the two early ones due last make way
    evicted = early.put_many(0, received("h1", "h2"), more=False)
    assert [e.message.task_id for e in evicted] == ["e7", "e6"]


def test_early_messages_that_fall_due_past_the_capacity_are_not_pushed_out() -> None:
    # Given three due messages and three early ones in a buffer of four
    buffer = WorkBuffer(capacity=4, ranks=1)
    soon = int((time.time() + 0.1) * 1000)
    buffer.put_many(0, received("d1", "d2", "d3"), more=False)
    buffer.put_many(0, received("e1", "e2", "e3", due_ms=soon), more=False)
    # When the early ones fall due, there are six due messages for four places: no receive, and all six are
    # handed out (none goes back to the queue to be received again)
    time.sleep(0.15)
    assert buffer.room() == 0 and buffer.batch(0) == 0
    taken = [item.message.task_id for item in iter(lambda: buffer.take(0.01), None)]
    assert sorted(taken) == ["d1", "d2", "d3", "e1", "e2", "e3"]


def keyed(task_id: str, key: str | None, due_ms: int = 0, collection: str = "c") -> Received:
    return Received(TaskMessage(task_id, 0, due_ms, collection, key), "q", f"r-{task_id}")


def test_within_a_priority_flows_take_turns_not_the_oldest_backlog_first() -> None:
    # Given one receive brought key A's backlog of 40, older than the three tasks of keys B, C and J with it
    buffer = WorkBuffer(capacity=50, ranks=1)
    now = int(time.time() * 1000)
    flood = [keyed(f"a{i}", "A", due_ms=now - 10_000 + i) for i in range(40)]
    buffer.put_many(0, [*flood, keyed("b", "B", now), keyed("c", "C", now), keyed("j", "J", now)], more=False)
    # When the host takes them one by one
    taken = [item.message.task_id for item in iter(lambda: buffer.take(0.01), None)]
    # Then B, C and J run among the first four, and A's backlog keeps its own order
    assert set(taken[:4]) == {"a0", "b", "c", "j"}
    assert [t for t in taken if t.startswith("a")] == [f"a{i}" for i in range(40)]


def test_a_flow_that_was_idle_takes_its_turn_next_not_after_what_busy_flows_had() -> None:
    # Given key A has had twenty turns, with twenty more waiting
    buffer = WorkBuffer(capacity=50, ranks=1)
    buffer.put_many(0, [keyed(f"a{i}", "A", due_ms=i) for i in range(40)], more=False)
    assert [buffer.take(0.01).message.task_id for _ in range(20)] == [f"a{i}" for i in range(20)]  # type: ignore[union-attr]
    # When key B's first task and a task without a key arrive
    buffer.put_many(0, [keyed("b", "B", due_ms=1000), keyed("plain", None, due_ms=1000)], more=False)
    # Then both run within the next three, not after A's remaining twenty
    assert {"b", "plain"} <= {buffer.take(0.01).message.task_id for _ in range(3)}  # type: ignore[union-attr]


def test_collections_are_flows_apart_and_priority_still_comes_first() -> None:
    buffer = WorkBuffer(capacity=50, ranks=2)
    buffer.put_many(1, [keyed(f"x{i}", None, due_ms=i, collection="bulk") for i in range(10)], more=False)
    buffer.put_many(1, [keyed("y", None, due_ms=99, collection="web")], more=False)
    buffer.put_many(0, [keyed(f"h{i}", None, due_ms=500, collection="bulk") for i in range(3)], more=False)
    taken = [item.message.task_id for item in iter(lambda: buffer.take(0.01), None)]
    assert taken[:3] == ["h0", "h1", "h2"]  # the higher priority first, whatever the turns
    assert taken.index("y") <= 4  # the other collection's task is not behind the bulk ones


def test_the_turns_of_flows_long_gone_are_forgotten() -> None:
    # Given ten thousand keys that each had one task, taken
    buffer = WorkBuffer(capacity=100, ranks=1)
    for start in range(0, 10_000, 100):
        buffer.put_many(0, [keyed(f"t{k}", f"key-{k}") for k in range(start, start + 100)], more=False)
        while buffer.take(0.001) is not None:
            pass
    # Then the buffer keeps no more turns than it holds tasks, plus a little
    assert len(buffer._next_turn) <= 2 * 100 + 64


class FakeSqs:
    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def delete_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803
        self.batches.append([e["ReceiptHandle"] for e in Entries])
        return {"Successful": Entries}


def test_deletes_go_out_ten_at_a_time() -> None:
    sqs = FakeSqs()
    batcher = DeleteBatcher(sqs, linger_s=0.5)  # type: ignore[arg-type]
    for i in range(23):
        batcher.delete("q", f"r{i}")
    batcher.close()
    assert sorted(len(b) for b in sqs.batches) == [3, 10, 10]
    assert sorted(r for b in sqs.batches for r in b) == sorted(f"r{i}" for i in range(23))


@pytest.fixture
def clock() -> Iterator[list[float]]:
    yield [0.0]


def test_the_queue_budget_counts_sends_between_reads(clock: list[float]) -> None:
    depths = iter([0, 150, 20])
    budget = QueueBudget(lambda *_: next(depths), cap=200, refresh_s=2.0, clock=lambda: clock[0])
    assert budget.available(("l", "p")) == 200
    budget.spent(("l", "p"), 150)
    assert budget.available(("l", "p")) == 50  # not re-read yet: counted
    clock[0] = 2.0
    assert budget.available(("l", "p")) == 50  # re-read: 150 still waiting
    budget.spent(("l", "p"), 50)
    clock[0] = 2.3  # full: read again sooner than the refresh period
    assert budget.available(("l", "p")) == 180


def _waiting_takers(buffer: WorkBuffer, count: int) -> list[threading.Thread]:
    """Executor threads waiting for work in the buffer (each gives up after a second)."""
    takers = [threading.Thread(target=buffer.take, args=(1.0,)) for _ in range(count)]
    for taker in takers:
        taker.start()
    deadline = time.monotonic() + 2
    while buffer._waiting < count and time.monotonic() < deadline:  # the count a receive is bounded by
        time.sleep(0.005)
    return takers


def test_with_no_prefetch_a_receive_asks_only_for_the_threads_waiting_for_work() -> None:
    # Given a buffer of a host whose executor threads are all busy (none waits for work)
    buffer = WorkBuffer(capacity=20, ranks=2, prefetch=0)
    # Then its receives ask for nothing: the queue's messages are left to hosts with idle threads
    assert buffer.batch(0) == buffer.batch(1) == 0
    # When two threads wait for work, it asks for two; less what it holds already, of that priority or above
    takers = _waiting_takers(buffer, 2)
    assert buffer.batch(0) == 2
    buffer.put_many(0, received("early", due_ms=int((time.time() + 5) * 1000)), more=False)
    assert buffer.batch(0) == 2, "an early message waits for its time: it keeps no due one out"
    buffer.put_many(0, received("due"), more=False)
    for taker in takers:  # one takes "due", the other gives up after its second
        taker.join()
    assert buffer.batch(0) == buffer.batch(1) == 0, "no thread waits: the early one is held for its time"


def test_a_due_message_no_thread_came_for_is_handed_back_for_another_host() -> None:
    # Given a message received while a thread waited, due once the host's only thread is busy
    buffer = WorkBuffer(capacity=20, prefetch=0)
    buffer.put_many(0, received("stuck"), more=False)
    assert buffer.stranded(0.2) == [], "not yet: it may be taken"
    time.sleep(0.25)
    # Then it is taken out for SQS; and not while a thread waits for work
    waiting = WorkBuffer(capacity=20, prefetch=0)
    waiting.put_many(0, received("taken"), more=False)
    time.sleep(0.25)
    waiting._waiting = 1  # a thread about to take it
    assert waiting.stranded(0.2) == []
    assert [item.message.task_id for item in buffer.stranded(0.2)] == ["stuck"]
    assert buffer.take(0.01) is None and WorkBuffer(capacity=20).stranded(0) == []


def test_a_prefetch_asks_for_that_many_beyond_the_waiting_threads_and_none_is_unbounded() -> None:
    assert WorkBuffer(capacity=20, prefetch=3).batch(0) == 3
    assert WorkBuffer(capacity=20).batch(0) == BATCH
    takers = _waiting_takers(buffer := WorkBuffer(capacity=20, prefetch=3), 2)
    assert buffer.batch(0) == 5
    for taker in takers:
        taker.join()


def test_a_message_a_limit_put_back_keeps_no_other_out() -> None:
    # Given one thread waiting for work, and a message its key's limit put back (to be offered again shortly)
    buffer = WorkBuffer(capacity=20, prefetch=0)
    buffer.put_many(0, received("held"), more=False)
    item = buffer.take(0.01)
    assert item is not None
    buffer.hold(item, 0.0)
    buffer._waiting = 1  # the thread, about to take it again (and be refused again while the key is busy)
    # Then a receive still asks for a message for that thread
    assert buffer.batch(0) == 1
    # And the held one is not handed to another host, whose thread the same limit would refuse
    buffer._waiting = 0
    time.sleep(0.25)
    assert buffer.stranded(0.2) == []


def test_a_host_given_a_prefetch_keeps_what_it_holds() -> None:
    buffer = WorkBuffer(capacity=20, prefetch=2)
    buffer.put_many(0, received("kept"), more=False)
    time.sleep(0.25)
    assert buffer.stranded(0.2) == []
