"""The controller: one per worker host.

It long-polls only the queues of the lambdas this host serves, keeps their
messages in per-lambda buffers, and answers NextWork from executor threads
highest priority first, claiming each task with a conditional write before it
hands the task out.

A long poll cannot be called off: SQS keeps a receive open until its wait ends
and makes whatever it hands out invisible for the visibility timeout, whether
or not the caller is still there to read the answer. So a draining host never
starts a receive, waits for the receives in flight to come back, and makes
what they brought visible again at once, with what it had buffered.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from multiprocessing.connection import Connection, Listener
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atf_core import lifecycle, tracing
from atf_core.aws import retry_budget_s
from atf_core.backoff import ceiling
from atf_core.calls import calls
from atf_core.clock import Clock
from atf_core.config import StackConfig
from atf_core.definitions import Attr
from atf_core.gating import GateView, hand_back
from atf_core.limits import KEY_HOLD_METRICS, Grant, KeyHold, Limiter, Refusal
from atf_core.queues import QueueDirectory, TaskMessage
from atf_core.schema import Gate, GateAction, Task, TaskStatus, utcnow
from atf_core.store.base import Change, TaskRef, TaskStore
from atf_core.store.counters import Counters
from atf_core.telemetry import WORKER_SERVICE, LogKey, LogLine, Metric, MetricBuffer, queue
from atf_sdk.worker.buffers import BATCH, Buffered, Received, WorkBuffer
from atf_sdk.worker.deletes import DeleteBatcher
from atf_sdk.worker.health import ReceiverStatus
from atf_sdk.worker.observe import task_context
from atf_sdk.worker.protocol import NextWork, NoWork, Work

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

log = logging.getLogger("atf.controller")
LIMITED_RETRY_S = 0.2
CLAIM_RETRY_S = 1.0  # a claim that failed (not refused: its write raised) is tried again this much later
DEFER_S = 1.0  # how much later a task a collection's or key's limit holds back is looked at again, once deferred
RECEIVE_RETRY_S = (1.0, 15.0)  # a failing receive is retried with backoff (no jitter) from the first to the second
RECEIVE_GRACE_S = 5.0  # beyond its wait, how long a receive in flight may take to come back on drain
DRAIN_POLL_S = 0.1  # how often a drain's waits look whether a second stop signal cut them short
# Besides its receive, a turn of a receive loop may read the gates and hand messages back: calls bounded by
# their clients' timeouts, given this much together before a receiver counts as stuck.
TURN_SLACK_S = 60.0
# A due message a host holds while every thread of its lambda is busy goes back to SQS after this long, for a
# host with a free one (it came early, received while a thread was idle): a start up to this much later, not
# after the running task.
STRANDED_S = 0.5
ACCEPT_RETRY_S = 0.5


def receiver_name(lambda_name: str, priority: str, part: int) -> str:
    """How health reports name a receive loop: lambda/priority, and the queue's part where a priority is split."""
    return f"{lambda_name}/{priority}" if part == 0 else f"{lambda_name}/{priority}#{part}"


class _NoLimits:
    def limited(self, lambda_name: str) -> bool:
        return False

    def acquire(self, lambda_name: str, collection: str, task_id: str, flow_key: str | None = None) -> Grant | Refusal:
        return Grant(task_id, ())

    def release(self, grant: Grant) -> None:
        return None


NO_LIMITS: Any = _NoLimits()


@dataclass(frozen=True)
class ControllerSettings:
    buffer_per_lambda: int = 20
    # Messages a lambda's receives bring in beyond its executor threads waiting for work: 0 takes only what
    # idle threads will start at once, so a host whose threads are all busy (with long tasks) receives nothing
    # and leaves the queue to idle hosts; more saves the receive's round trip for short tasks, and holds that
    # many behind running ones. None: up to buffer_per_lambda, whoever waits (a test's receive by hand).
    prefetch_per_lambda: int | None = 0
    receive_wait_s: int = 10
    gate_refresh_s: float = 2.0
    # While a lambda of this host is paused its receivers wait on the gates alone: they are read this often
    # then, so the held tasks start about as soon as the consumer sends them after the resume, not up to
    # gate_refresh_s later. On AWS: two strongly consistent reads of the gates item a second per host,
    # during a pause only.
    paused_gate_refresh_s: float = 0.5


class Controller:
    def __init__(
        self,
        store: TaskStore,
        sqs: SQSClient,
        sqs_long_poll: SQSClient,
        config: StackConfig,
        lambda_names: list[str],
        settings: ControllerSettings | None = None,
        store_client: DynamoDBClient | None = None,
        metrics: MetricBuffer | None = None,
        clock: Clock = utcnow,
    ) -> None:
        self._store = store
        self._clock = clock
        self._sqs = sqs
        self._long_poll = sqs_long_poll
        self._config = config
        self._lambdas = lambda_names
        self._settings = settings or ControllerSettings()
        self._queues = QueueDirectory(sqs, config)
        self._deletes = DeleteBatcher(sqs)
        self._limiter = (
            Limiter(Counters(store_client, config.table_name), config) if store_client is not None else NO_LIMITS
        )
        self._buffers = {
            name: WorkBuffer(
                self._settings.buffer_per_lambda,
                ranks=len(config.lambdas[name].priorities),
                parts=config.queue_parts_of(name),
                prefetch=self._settings.prefetch_per_lambda,
            )
            for name in lambda_names
        }
        self._receivers: dict[str, threading.Thread] = {}  # by name: lambda/priority
        self._turns: dict[str, float] = {}  # receiver name -> when its loop last began a turn (monotonic)
        self._failures: dict[str, int] = {}  # receiver name -> receives failed in a row
        self._draining = threading.Event()
        self._gates = GateView.of([], clock())
        self._gates_read = 0.0
        self._gate_lock = threading.Lock()
        self.metrics = metrics or MetricBuffer(service=WORKER_SERVICE)
        self._limited: set[tuple[str, str]] = set()  # (task, metric): tasks a limit holds back, counted once each

    @calls(QueueDirectory.url)
    def queue_url(self, lambda_name: str, priority: str, part: int = 0) -> str:
        """The URL of one of this host's queues (looked up once): raises if the queue cannot be reached."""
        return self._queues.url(lambda_name, priority, part)

    # -- receiving -----------------------------------------------------------
    def start_receivers(self) -> list[threading.Thread]:
        for name in self._lambdas:
            for rank, priority in enumerate(self._config.lambdas[name].priorities):
                for part in range(self._config.queue_parts_of(name)):  # every queue a priority is split over
                    receiver = receiver_name(name, priority, part)
                    thread = threading.Thread(
                        target=self._receive_loop,
                        args=(name, priority, rank, part),
                        daemon=True,
                        name=f"receive-{receiver.replace('/', '-')}",
                    )
                    self._turns[receiver] = time.monotonic()
                    thread.start()
                    self._receivers[receiver] = thread
        return list(self._receivers.values())

    def _receive_loop(self, lambda_name: str, priority: str, rank: int, part: int = 0) -> None:
        """Receive until the host drains; no error ends it (a dead receiver would hold lower priorities back)."""
        buffer = self._buffers[lambda_name]
        receiver = receiver_name(lambda_name, priority, part)
        failures = 0
        while not self._draining.is_set():
            self._turns[receiver] = time.monotonic()
            try:
                if not self._receive_once(lambda_name, priority, rank, part):
                    self._release(buffer.stranded(STRANDED_S))
                    time.sleep(0.05)  # threads that come to wait for work meanwhile are asked for in one receive
                failures = 0
            except Exception:
                failures += 1
                log.exception("receive from %s failed (%d in a row)", receiver, failures)
                buffer.may_hold_more(rank, False, part)  # a queue that cannot be read holds no lower priority back
            self._failures[receiver] = failures
            if failures:
                self._draining.wait(ceiling(failures, *RECEIVE_RETRY_S))

    def receivers(self) -> list[ReceiverStatus]:
        """Each receiver thread: alive, how long since its loop began a turn, its failures in a row."""
        now = time.monotonic()
        return [
            ReceiverStatus(name, thread.is_alive(), now - self._turns[name], self._failures.get(name, 0))
            for name, thread in self._receivers.items()
        ]

    @property
    def receiver_stuck_after_s(self) -> float:
        """The longest a turn of a receive loop can take: its receive's every attempt timing out, the
        longest backoff after a failure, and the slack for the turn's other calls."""
        return retry_budget_s(self._long_poll.meta.config) + RECEIVE_RETRY_S[1] + TURN_SLACK_S

    @calls("sqs:ReceiveMessage", QueueDirectory.url)
    def _receive_once(self, lambda_name: str, priority: str, rank: int, part: int = 0) -> bool:
        """One receive, if this priority may receive now; False if it may not."""
        buffer = self._buffers[lambda_name]
        if self._lambda_paused(lambda_name):
            buffer.may_hold_more(rank, True, part)  # once it lifts, what the queue holds is unknown: read it first
            return False
        ask = buffer.batch(rank)
        if ask == 0:
            return False
        url = self._queues.url(lambda_name, priority, part)
        # A queue that may hold more is read again at once, without waiting for new messages.
        wait = 0 if buffer.expects_more(rank, part) else self._settings.receive_wait_s
        reply = self._long_poll.receive_message(QueueUrl=url, MaxNumberOfMessages=ask, WaitTimeSeconds=wait)
        received = _decoded(reply.get("Messages", []), url)
        if self._draining.is_set():  # it was in flight as the host began to drain: not ours to run
            self._release(received)
        else:
            self._release(buffer.put_many(rank, received, more=bool(received), part=part))
        return True

    # -- NextWork ------------------------------------------------------------
    def next_work(
        self, lambda_name: str, wait_s: float, worker: str = "", wanted: Callable[[], bool] = lambda: True
    ) -> Task | None:
        """Claim and return the best due task for this lambda, or None after wait_s.

        `worker` names the executor (host:pid) the claim is for; `wanted` says whether it still
        waits for the answer (a task claimed for an executor that died would wait out its claim timeout).
        """
        buffer = self._buffers[lambda_name]
        deadline = time.monotonic() + wait_s
        while not self._draining.is_set():
            item = buffer.take(max(0.0, deadline - time.monotonic()))
            if item is None:
                return None
            # The take waits for a message to come due, and the host may have begun to drain meanwhile (the
            # drain empties the buffers only once its receives are in): no claim then, the message goes back.
            if self._draining.is_set() or not wanted():
                self._hold(lambda_name, item, 0)
                return None
            task = self.claim(lambda_name, item, worker)
            if task is not None:
                return task
        return None

    def claim(self, lambda_name: str, item: Buffered, worker: str = "") -> Task | None:
        """Claim one buffered message's task for `worker`, or act on its gate or limit; the task if claimed."""
        message = item.message
        priority = self._config.lambdas[lambda_name].priorities[item.rank]
        ref = TaskRef(message.task_id, lambda_name, priority, message.flow_key)
        now, started_ns = self._clock(), time.time_ns()
        grant: Grant | bool = True
        try:
            gate = self._gate_on(lambda_name, item, now)
            if gate is not None:
                self._apply_gate(ref, message, gate.action, gate.scope, now)
                self._delete(item)
                return None
            grant = self._limits(lambda_name, item, ref, now)
            if grant is False:
                return None
            if grant is not True:
                now = self._clock()  # the claim is made after the grant (its calls take time): stamp it then
            change = Change(now=now, attempt=message.attempt, entry_ms=message.due_ms, host=worker or None)
            outcome = self._store.transition(ref, lifecycle.CLAIM, change)
        except Exception:
            # Say a throttle past botocore's retries: the message is tried again shortly, not left to wait out
            # its visibility timeout, and a slot it was granted is not held meanwhile (a claim that did land
            # unseen is refused next time by its attempt, and its task re-sent once the claim times out).
            log.exception("claim of %s failed; trying again in %g s", message.task_id, CLAIM_RETRY_S)
            self._hold(lambda_name, item, CLAIM_RETRY_S)
            self._give_back(grant)
            return None
        self._delete(item)  # claimed, or a duplicate / stale message: either way it is done
        self._forget_holds(message.task_id)
        if outcome.applied and outcome.task is not None:
            self.metrics.count(Metric.CLAIMED, 1, queue(ref.lambda_name, ref.priority))
            _trace_claim(outcome.task, started_ns)
            return outcome.task
        self._give_back(grant)
        self._expire_if_due(ref, outcome.task, now)
        return None

    def _give_back(self, grant: Grant | bool) -> None:
        """Give back the slots a start took when its claim did not happen; a failure only lets a slot stay
        held until its lease lapses."""
        if isinstance(grant, Grant):
            try:
                self._limiter.release(grant)
            except Exception:  # noqa: BLE001 - the slot's lease ends it
                log.warning("giving back the running slots of %s failed", grant.task_id)

    def _limits(self, lambda_name: str, item: Buffered, ref: TaskRef, now: datetime) -> Grant | bool:
        """A grant from the lambda's limits (True: none apply), or False: the message waits, or (over a flow
        key's rate limit) its task ended dropped."""
        if not self._limiter.limited(lambda_name):
            return True
        message = item.message
        answer = self._limiter.acquire(lambda_name, message.collection, message.task_id, message.flow_key)
        if isinstance(answer, Grant):
            return answer
        if answer.drop:
            if self._drop(ref, message, answer.reason, now) and answer.key_hold is not None:
                self._count_key_hold(ref, answer.key_hold)
            self._delete(item)
            self._forget_holds(message.task_id)
            return False
        self._count_limited(lambda_name, item)
        if answer.key_hold is not None:
            self._count_key_hold(ref, answer.key_hold)
        if not answer.others_may_start or not self._defer(lambda_name, item, ref, now):
            self._hold(lambda_name, item, LIMITED_RETRY_S)
        return False

    def _defer(self, lambda_name: str, item: Buffered, ref: TaskRef, now: datetime) -> bool:
        """A collection's or a flow key's limit holds its task back: while the buffer has room, it waits
        there; past half of it (or where holding it would leave no room for a full receive), the task goes
        back to the index DEFER_S later and its message is deleted, so one collection's or key's backlog
        cannot fill the buffer and keep the lambda's other tasks from being received. True if deferred.
        The write is fenced as the claim is, by the message's attempt, index entry and priority: a task an
        operator (or a debounce merge) has moved since the message was sent keeps its new time and priority.
        No attempt is used."""
        buffer = self._buffers[lambda_name]
        if buffer.room() > max(buffer.capacity // 2, min(BATCH, buffer.capacity)):
            return False
        later = now + timedelta(seconds=DEFER_S)
        change = Change(now=now, attempt=item.message.attempt, entry_ms=item.message.due_ms, next_at=later)
        outcome = self._store.transition(ref, lifecycle.AMEND, change)
        if not outcome.applied and outcome.task is not None and outcome.task.status is TaskStatus.RETRIABLE_FAILURE:
            outcome = self._store.transition(ref, lifecycle.AMEND_RETRY, change)
        if not outcome.applied:
            return False  # claimed or changed meanwhile: the claim finds out which
        self._delete(item)
        return True

    def _count_limited(self, lambda_name: str, item: Buffered) -> None:
        if self._first_time(item.message.task_id, Metric.LIMITED):
            priority = self._config.lambdas[lambda_name].priorities[item.rank]
            self.metrics.count(Metric.LIMITED, 1, queue(lambda_name, priority))

    def _count_key_hold(self, ref: TaskRef, hold: KeyHold) -> None:
        """Count and log a task its flow key held back, once a task and limit: rechecks every
        LIMITED_RETRY_S would count time, not tasks (a drop happens once: its task ends). The metric is per
        lambda; the key is on the log line only (a metric per key would be one per customer id), where the
        dashboard's query ranks keys."""
        metric = KEY_HOLD_METRICS[hold]
        if hold is not KeyHold.RATE_LIMIT and not self._first_time(ref.id, metric):
            return
        self.metrics.count(metric, 1, queue(ref.lambda_name, ref.priority))
        keys = {"task_id": ref.id, "lambda": ref.lambda_name, "priority": ref.priority}
        log.info(LogLine.HELD_BACK, extra={**keys, LogKey.FLOW_KEY: ref.flow_key, LogKey.HELD_BY: hold.value})

    def _first_time(self, task_id: str, metric: str) -> bool:
        """Whether this task was not counted in this metric yet (until it is claimed, or ends)."""
        if (task_id, metric) in self._limited:
            return False
        if len(self._limited) > 10_000:  # messages handed back on drain are never claimed here
            self._limited.clear()
        self._limited.add((task_id, metric))
        return True

    def _forget_holds(self, task_id: str) -> None:
        for metric in (Metric.LIMITED, *KEY_HOLD_METRICS.values()):
            self._limited.discard((task_id, metric))

    def _expire_if_due(self, ref: TaskRef, task: Task | None, now: datetime) -> None:
        """A claim refused because the task expired while it waited: end it as expired."""
        if task is not None and task.expire_at is not None and task.expire_at <= now:
            try:
                self._store.transition(ref, lifecycle.EXPIRE, Change(now=now, expired_by=now))
            except Exception:  # noqa: BLE001 - the consumer expires it on its next look
                log.warning("could not expire %s", ref.id)

    def _apply_gate(self, ref: TaskRef, message: TaskMessage, action: GateAction, scope: str, now: datetime) -> None:
        if action is GateAction.DROP:
            self._drop(ref, message, f"dropped by gate {scope}", now)
        else:
            hand_back(self._store, self._config, ref, message.attempt, now)

    def _drop(self, ref: TaskRef, message: TaskMessage, reason: str, now: datetime) -> bool:
        """End a task not yet started as dropped (a gate's drop, a flow key's rate limit), with the reason;
        True if this call ended it. Fenced as the claim is, by the message's attempt and index entry: a
        duplicate or stale message (its task failed and waits to retry, or an operator moved it) drops nothing."""
        fenced = Change(now=now, reason=reason, entry_ms=message.due_ms, observed={Attr.ATTEMPT: message.attempt})
        outcome = self._store.transition(ref, lifecycle.DROP, fenced)
        if outcome.applied:
            self.metrics.count(Metric.DROPPED, 1, queue(ref.lambda_name, ref.priority))
        return outcome.applied

    @calls(DeleteBatcher._send)  # in the batcher's thread, ten at a time
    def _delete(self, item: Buffered) -> None:
        self._deletes.delete(item.queue_url, item.receipt)

    # -- gates ---------------------------------------------------------------
    def _gate_on(self, lambda_name: str, item: Buffered, now: datetime) -> Gate | None:
        """The gate on a message's task now, as of a read made after the message arrived whenever it would
        keep the task back. The consumer sends a gated task once it has read the gate lifted, or ahead of a
        gate that lifts by its until before the task's run time: a cached view older than the message may
        still hold a pause that is gone (discarding the message on its word would leave the task waiting out
        the enqueue timeout), and any view may hold a gate whose until has passed since it was read (that
        one is not in force: a drop would end the task for good). Judged at the claim's moment (gating.py
        says why)."""
        collection = item.message.collection
        if self._gate_view().decide(lambda_name, collection, at=now) is None:
            return None
        return self._gate_view(read_after=item.received_at).decide(lambda_name, collection, at=now)

    def _gate_view(self, read_after: float | None = None, max_age_s: float | None = None) -> GateView:
        """The gates, read at most max_age_s (gate_refresh_s) ago, or (read_after) begun after that moment:
        that read must succeed."""
        max_age_s = self._settings.gate_refresh_s if max_age_s is None else max_age_s
        with self._gate_lock:
            must = read_after is not None and self._gates_read <= read_after
            if must or time.monotonic() - self._gates_read > max_age_s:
                started = time.monotonic()
                try:
                    self._gates = GateView.of(self._store.gates(), self._clock())
                    self._gates_read = started
                except Exception:
                    if must:
                        raise
                    log.warning("reading gates failed")  # keep the last view
            return self._gates

    def _lambda_paused(self, lambda_name: str) -> bool:
        if not self._gate_view().lambda_paused(lambda_name):
            return False
        return self._gate_view(max_age_s=self._settings.paused_gate_refresh_s).lambda_paused(lambda_name)

    # -- stopping ------------------------------------------------------------
    def drain(self, cut_short: threading.Event | None = None) -> None:
        """Stop receiving and claiming; wait for the receives in flight (unless `cut_short` is set first: a
        message one of them brings back after is visible again at its timeout), and hand every message this
        host holds back to SQS at once."""
        self._draining.set()
        for buffer in self._buffers.values():  # what it holds goes back at once, for hosts that are not stopping
            self._release(buffer.drain())
        deadline = time.monotonic() + self._settings.receive_wait_s + RECEIVE_GRACE_S
        for thread in self._receivers.values():
            while thread.is_alive() and time.monotonic() < deadline and not (cut_short and cut_short.is_set()):
                thread.join(DRAIN_POLL_S)
        for buffer in self._buffers.values():
            self._release(buffer.drain())
        self._deletes.close()

    def _hold(self, lambda_name: str, item: Buffered, seconds: float) -> None:
        """Put a message back in its buffer, to be handed out again `seconds` later. Once the host drains, the
        buffer is emptied no more: what comes back after (a claim under way as the drain began) goes back to
        SQS at once, or it would wait out its visibility timeout."""
        buffer = self._buffers[lambda_name]
        buffer.hold(item, seconds)
        if self._draining.is_set():
            self._release(buffer.drain())

    @calls("sqs:ChangeMessageVisibility")
    def _release(self, items: Iterable[Buffered | Received]) -> None:
        """Make messages this host will not run visible again at once, for this host or another."""
        for item in items:
            try:
                self._sqs.change_message_visibility(
                    QueueUrl=item.queue_url, ReceiptHandle=item.receipt, VisibilityTimeout=0
                )
            except Exception:  # noqa: BLE001 - it becomes visible after its timeout anyway
                log.warning("could not release message for %s", item.message.task_id)

    @property
    def draining(self) -> bool:
        return self._draining.is_set()


class NextWorkServer:
    """Serves NextWork to executor threads over a Unix socket.

    A thread's connection closes while it holds a task only when its process died: `lost(task, how, held_s)`
    records that attempt's end (AttemptEnds.lost) without waiting for its lease to lapse."""

    def __init__(
        self,
        controller: Controller,
        address: str,
        authkey: bytes,
        lost: Callable[[Task, str, float], None] = lambda task, how, held_s: None,
    ) -> None:
        self._controller = controller
        self._lost = lost
        self._listener = Listener(address, family="AF_UNIX", authkey=authkey)
        self.address = address
        self.connections = 0  # executor threads that have connected: the host is ready when all have
        self._serving: list[threading.Thread] = []
        self._handed: dict[int, int] = {}  # tasks handed to each executor process (by pid), until its exit is told
        self._handed_lock = threading.Lock()
        self._closed = threading.Event()

    def serve_forever(self) -> None:
        """Accept executor threads until closed. A failed accept (out of file descriptors, say) is retried:
        were this thread to end, every executor started after would find no one to ask for work."""
        while not self._closed.is_set():
            try:
                connection = self._listener.accept()
            except Exception:
                if self._closed.is_set():
                    return
                log.exception("accepting an executor's connection failed; accepting again")
                self._closed.wait(ACCEPT_RETRY_S)
                continue
            self.connections += 1
            serving = threading.Thread(target=self._serve, args=(connection,), daemon=True)
            self._serving = [thread for thread in self._serving if thread.is_alive()] + [serving]  # before it serves
            serving.start()

    def _serve(self, connection: Connection) -> None:
        running: Task | None = None  # what this executor thread was handed, until it asks for more
        handed_at = 0.0  # when (monotonic)
        with connection:
            while True:
                try:
                    request = connection.recv()
                except (EOFError, OSError):  # the executor process ended (finished, or died)
                    if running is not None:
                        self._ended_holding(running, "ended while running it", time.monotonic() - handed_at)
                    return
                try:
                    running = self._next_task(request, connection)
                except Exception:  # a fault of this request's turn: the thread serves on, not ended by it
                    log.exception("finding work for executor %s failed", request.worker)
                    running = None
                    time.sleep(CLAIM_RETRY_S)  # it asks again at once: a lasting fault is not a busy loop
                answer = NoWork(stop=self._controller.draining) if running is None else Work(_as_json(running))
                if running is not None:
                    pid = pid_of(request.worker)
                    # Counted before the send: the executor may run the task and exit before this thread runs again.
                    # (A host that reaps a dead executor between this and a failed send still counts it as handed:
                    # its failed-start count misses one.)
                    self._count_handed(pid, +1)
                    handed_at = time.monotonic()
                try:
                    connection.send(answer)
                except OSError:  # it died while it waited
                    if running is not None:
                        self._count_handed(pid, -1)  # it was never handed this one
                        self._ended_holding(running, "ended before it was handed the task", 0.0)
                    return

    def _count_handed(self, pid: int | None, change: int) -> None:
        if pid is None:
            return
        with self._handed_lock:  # an executor's threads are served by as many of this server's threads
            count = self._handed.get(pid, 0) + change
            if count > 0:
                self._handed[pid] = count
            else:
                self._handed.pop(pid, None)

    def handed_work(self, pid: int) -> bool:
        """Whether the executor process `pid` (on this host) was handed a task; asked once, as it exits."""
        with self._handed_lock:
            return self._handed.pop(pid, 0) > 0

    def _ended_holding(self, task: Task, how: str, held_s: float) -> None:
        """An executor thread's connection closed while it held a task: its process died (or the thread did)."""
        with task_context(task):
            log.warning(
                "executor %s ended while running task %s attempt %d: the attempt is recorded as lost unless it "
                "recorded its end first",
                task.claimed_by,
                task.id,
                task.attempt,
            )
            try:
                self._lost(task, f"its executor {task.claimed_by} {how}, as its host saw its connection close", held_s)
            except Exception:  # its lease lapses, and the consumer records the loss then
                log.exception("recording the loss of task %s attempt %d failed", task.id, task.attempt)

    def _next_task(self, request: NextWork, connection: Connection) -> Task | None:
        if self._controller.draining:
            return None
        return self._controller.next_work(
            request.lambda_name,
            request.wait_s,
            request.worker,
            wanted=lambda: not _closed(connection) and not _stopped(request.worker),
        )

    def settle(self, timeout_s: float) -> None:
        """Wait, up to `timeout_s`, for the connections of executors that have ended to be done with: the
        losses of the attempts they held recorded."""
        deadline = time.monotonic() + timeout_s
        for thread in list(self._serving):
            if thread.ident is not None:  # started (an accept may be between listing and starting it)
                thread.join(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        self._closed.set()
        self._listener.close()


def _as_json(task: Task) -> str:
    return task.model_dump_json(by_alias=True)


def _closed(connection: Connection) -> bool:
    """An executor thread sends nothing while it waits for an answer: anything to read means its end closed."""
    try:
        return connection.poll()
    except OSError:
        return True


def pid_of(worker: str) -> int | None:
    """The process id in an executor's worker id (host:pid, atf_sdk.worker.executor); None if it names none."""
    pid = worker.rpartition(":")[2]
    return int(pid) if pid.isdecimal() and pid.isascii() else None


def _stopped(worker: str) -> bool:
    """Whether the asking executor's process (host:pid, on this host) is stopped: SIGSTOP, a debugger. It asked
    before it stopped; a task claimed for it would wait for it to resume, past its lease, where another
    executor could run it now. Linux's process state; elsewhere, never."""
    pid = pid_of(worker)
    if pid is None:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat.rpartition(")")[2].split()  # the state follows the command's name, which may hold anything
    return bool(fields) and fields[0] in ("T", "t")


def _decoded(messages: list[Any], url: str) -> list[Received]:
    """The task messages of a receive. One that does not decode (sent by hand, or by another framework's
    version) is left alone: it comes back after its visibility timeout and, received maxReceiveCount times,
    goes to the queue's dead-letter queue for an operator to see. It must not cost the messages that came
    with it their visibility timeout, as a receive that raised did."""
    received = []
    for message in messages:
        try:
            received.append(Received(TaskMessage.decode(message["Body"]), url, message["ReceiptHandle"]))
        except Exception as error:  # noqa: BLE001 - whatever its body holds, it is not a task message
            log.warning("message %s of %s is not a task message (%r): left for the dead-letter queue",
                        message.get("MessageId"), url, error)  # fmt: skip
    return received


def _trace_claim(task: Task, started_ns: int) -> None:
    tracing.record("atf claim", "CONSUMER", tracing.of_task(task), parent=task.traceparent, started_ns=started_ns)
