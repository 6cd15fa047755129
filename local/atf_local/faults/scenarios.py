"""The scenarios of issue 5, one fault at a time, plus the soak.

Every scenario is bounded: a fixed workload over a fixed time, a fixed number
of injected faults, then a wait for the backlog bounded by `drain_bound_s`.
`ci=True` gives the smaller sizes `make test` runs.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

from atf_local.faults import expect
from atf_local.faults.injector import Injector
from atf_local.faults.processes import ConsumerSpec, Faults, HostSpec, Rules
from atf_local.faults.spec import Scenario
from atf_local.faults.tail import ExecKey
from atf_local.faults.workload import Load

SLOW = {"seconds": 2.0}


def _size(ci: bool, full: Any, small: Any) -> Any:
    return small if ci else full


# -- 1. kill -9 of an executor mid-task -------------------------------------------
def _kill_busy(run: Injector, kills: int, every_s: float, host: str | None = None) -> None:
    for _ in range(kills):
        run.sleep(every_s)
        busy = run.busy_executor(host)
        if busy is None:
            run.missed(f"kill -9: no executor{' of ' + host if host else ''} was running a task")
            continue
        run.signal(busy[0], signal.SIGKILL)


def kill9(ci: bool) -> Scenario:
    count, over, kills = _size(ci, (40, 20.0, 4), (16, 8.0, 2))
    return Scenario(
        1, "kill9", "kill -9 of an executor mid-task", ("slow",),
        loads=(Load("slow", count, over, SLOW),),
        hosts=(HostSpec("host-a", executors=2, threads=2),),
        inject=lambda run: _kill_busy(run, kills, 3.0),
        drain_bound_s=60,
        ci=ci,
        expect=(expect.signals_sent(signal.SIGKILL, kills),),
    )  # fmt: skip


# -- 2. SIGSTOP past the heartbeat timeout, then SIGCONT -------------------------
HOLD_RESULTS: Rules = (
    {"kind": "blackhole", "service": "dynamodb", "clients": ["dynamodb"], "operations": ["UpdateItem"],
     "targets": ["success"], "flag": "hold-results"},
    # host-a receives nothing while its executor is stopped: its controller took the held task's re-sent message
    # into its buffer, where only the stopped executor could take it (it once claimed it for that executor, whose
    # one thread had asked for work as it began to report; it no longer claims for a stopped process), so the
    # task could not run elsewhere before the SIGCONT and the round tested nothing (seen in 1 of 6 runs).
    # Armed only once a write is held: host-a must receive work before that, to have a result to hold.
    {"kind": "blackhole", "service": "sqs", "operations": ["ReceiveMessage"], "flag": "hold-receives"},
)  # fmt: skip


def _pause(run: Injector, pid: int, running: list[ExecKey], before_cont: Callable[[], None] = lambda: None) -> None:
    if not running:
        # Nothing to run again elsewhere (and all([]) would let it go at once): the pause would test nothing.
        run.missed(f"SIGSTOP: pid {pid} was running no task")
        return
    run.signal(pid, signal.SIGSTOP)
    # Keep it stopped until its tasks have run again elsewhere: its lease is long gone.
    if not run.wait_for(_reran(run, running), timeout_s=60, every_s=0.5):
        run.missed(f"SIGSTOP: the tasks of pid {pid} had not run again elsewhere after 60 s")
    before_cont()
    run.signal(pid, signal.SIGCONT)


def _pause_mid_run_and_mid_report(run: Injector, mid_run: bool) -> None:
    """Round one: stop host-a's executor while a task runs. Round two: hold its result
    write (a partition on that call alone), stop it while it reports, and let the write
    go out only after the task has run again elsewhere: that late write must be refused."""
    run.sleep(2.0)
    busy = run.busy_executor("host-a") if mid_run else None
    if busy is not None:
        _pause(run, *busy)
        run.sleep(3.0)
    elif mid_run:
        run.missed("SIGSTOP mid-run: host-a's executor was running no task")
    run.arm("hold-results")
    if run.wait_for(lambda: bool(run.tail.pids_with_fault("blackhole:success")), timeout_s=40):
        run.arm("hold-receives")
        pid = run.tail.pids_with_fault("blackhole:success")[0]
        running = run.tail.busy_pids([pid]).get(pid, [])
        _pause(run, pid, running, before_cont=lambda: _disarm(run, "hold-results", "hold-receives"))
    else:
        run.missed("SIGSTOP mid-report: no result write of host-a was held within 40 s")
    _disarm(run, "hold-results", "hold-receives")


def _disarm(run: Injector, *flags: str) -> None:
    for flag in flags:
        run.disarm(flag)


def _reran(run: Injector, keys: list[ExecKey]) -> Callable[[], bool]:
    return lambda: all(run.tail.rerun_ended(key) for key in keys)


def sigstop(ci: bool) -> Scenario:
    count, over = _size(ci, (30, 30.0), (10, 10.0))
    return Scenario(
        2, "sigstop", "SIGSTOP of an executor past its heartbeat timeout (mid-run, mid-report), then SIGCONT",
        ("slow",),
        loads=(Load("slow", count, over, {"seconds": 3.0, "first_only": True}),),
        hosts=(
            HostSpec("host-a", executors=1, threads=1, faults=Faults(rules=HOLD_RESULTS)),
            HostSpec("host-b", executors=1, threads=2),
        ),
        inject=lambda run: _pause_mid_run_and_mid_report(run, mid_run=not ci),
        drain_bound_s=60,
        ci=ci,
        expect=(expect.paused_result_refused,),
    )  # fmt: skip


# -- 3. a controller killed right after claiming ---------------------------------
def _exit_after_claim(nth: int) -> Rules:
    return ({"kind": "exit_after", "service": "dynamodb", "operations": ["UpdateItem"], "targets": ["claimed"],
             "nth": nth},)  # fmt: skip


def controller_kill(ci: bool) -> Scenario:
    count, over, lives = _size(ci, (40, 20.0, 3), (16, 8.0, 2))
    # A host takes a few seconds to come back: the window stays open for the next lives.
    faults = Faults(lives=tuple(_exit_after_claim(3 if i == 0 else 2) for i in range(lives)))
    return Scenario(
        3, "controller", "a controller killed right after claiming", ("steady",),
        loads=(Load("steady", count, over, {"seconds": 0.3}),),
        hosts=(HostSpec("host-a", executors=1, threads=2, faults=faults),),
        fault_window_s=over + 8 * lives,
        drain_bound_s=60,
        ci=ci,
        expect=(expect.faults_fired("exit_after", lives),),
    )  # fmt: skip


# -- 4. a consumer killed between SQS and the store, both orders -----------------
def _exit_around_send(kind: str, nth: int) -> Rules:
    return ({"kind": kind, "service": "sqs", "operations": ["SendMessageBatch"], "nth": nth},)


def consumer_kill(ci: bool) -> Scenario:
    count, over = _size(ci, (40, 20.0), (20, 10.0))
    lives: tuple[Rules, ...] = (_exit_around_send("exit_before", 3), _exit_around_send("exit_after", 3))
    if not ci:
        lives += (_exit_around_send("exit_before", 4), _exit_around_send("exit_after", 4))
    return Scenario(
        4, "consumer", "a consumer killed just before / just after sending a batch", ("steady",),
        loads=(Load("steady", count, over, {"seconds": 0.2}),),
        hosts=(HostSpec("host-a", executors=1, threads=2),),
        consumers=(ConsumerSpec(faults=Faults(lives=lives)),),
        drain_bound_s=60,
        ci=ci,
        expect=(
            expect.faults_fired("exit_before", len(lives) // 2),
            expect.faults_fired("exit_after", len(lives) // 2)),
    )  # fmt: skip


# -- 5. duplicated SQS messages, two consumers ticking at once -------------------
def duplicates(ci: bool) -> Scenario:
    count, over = _size(ci, (60, 20.0), (24, 8.0))
    dup = Faults(rules=({"kind": "duplicate", "service": "sqs", "operations": ["SendMessageBatch"], "rate": 0.5},))
    return Scenario(
        5, "duplicates", "duplicated SQS messages and two consumers ticking at once", ("steady",),
        loads=(Load("steady", count, over, {"seconds": 0.2}),),
        hosts=(HostSpec("host-a", executors=1, threads=3),),
        consumers=(ConsumerSpec("consumer-a", faults=dup), ConsumerSpec("consumer-b", faults=dup)),
        fault_window_s=over + 5,
        drain_bound_s=60,
        ci=ci,
        expect=(expect.no_duplicates, expect.faults_fired("duplicate", 3)),
    )  # fmt: skip


# -- 6. throttling and 5xx everywhere, the heartbeat path included ---------------
ERRORS: Rules = ({"kind": "throttle", "rate": 0.15}, {"kind": "error5xx", "rate": 0.05})


def throttling(ci: bool) -> Scenario:
    count, over = _size(ci, (40, 20.0), (16, 8.0))
    errors = Faults(rules=ERRORS)
    return Scenario(
        6, "throttling", "throttling and 5xx on DynamoDB and SQS, heartbeats included", ("steady", "slow"),
        loads=(Load("steady", count, over, {"seconds": 0.3}), Load("slow", count // 4, over, {"seconds": 4.0})),
        hosts=(HostSpec("host-a", executors=1, threads=3, faults=errors),),
        consumers=(ConsumerSpec(faults=errors),),
        fault_window_s=over + 10,
        drain_bound_s=60,
        ci=ci,
        expect=(
            expect.no_executor_exits, expect.hosts_survive, expect.faults_fired("throttle", 10),
            # The rules name no client, so they hit the heartbeat calls too: the title's claim, checked
            expect.faults_fired("throttle", 1, client="dynamodb_heartbeat")),
    )  # fmt: skip


# -- 7. a write that lands but whose response is lost ----------------------------
LOST: Rules = ({"kind": "lost_response", "service": "dynamodb", "operations": ["UpdateItem", "PutItem"], "rate": 0.2},)


def lost_response(ci: bool) -> Scenario:
    count, over = _size(ci, (40, 20.0), (16, 8.0))
    lost = Faults(rules=LOST)
    return Scenario(
        7, "lost-response", "writes that land but whose response is lost", ("steady", "slow"),
        loads=(Load("steady", count, over, {"seconds": 0.3}), Load("slow", count // 4, over, {"seconds": 3.0})),
        hosts=(HostSpec("host-a", executors=1, threads=3, faults=lost),),
        consumers=(ConsumerSpec(faults=lost),),
        fault_window_s=over + 10,
        drain_bound_s=60,
        ci=ci,
        expect=(expect.all_succeed("steady"), expect.all_succeed("slow"), expect.reconciled_some),
    )  # fmt: skip


# -- 8. clocks 30 s apart ---------------------------------------------------------
PARTITION: Rules = ({"kind": "blackhole", "flag": "partition"},)  # every call of the host hangs, then times out


def _partition_then_kill(run: Injector, kills: int) -> None:
    """Cut host-a off from AWS while it runs long tasks. Its clock is 30 s behind the
    consumer's, so its stamps look long expired: only the lease floor, which the consumer
    measures on its own clock, stands between its tasks and a second run."""
    busy = run.busy_executor("host-a", timeout_s=40)
    if busy is None:
        run.missed("partition: host-a's executor was running no task")
    else:
        pid, running = busy
        run.sleep(2.5)  # a few heartbeats land: the tasks are processing, with fresh stamps
        run.arm("partition")
        reran = _reran(run, running)
        if not run.wait_for(lambda: pid not in run.cluster.executors() and reran(), 90):
            run.missed(f"partition: pid {pid} still lived, or its tasks had not run again elsewhere, after 90 s")
        run.disarm("partition")
    _kill_busy(run, kills, 2.0, host="host-b")


def clock_offsets(ci: bool) -> Scenario:
    count, over, kills = _size(ci, (24, 40.0, 2), (6, 10.0, 0))
    return Scenario(
        8, "clocks", "±30 s clock offsets between components, with a host partitioned and kill -9", ("slow",),
        loads=(
            Load("slow", 4, 2.0, {"seconds": 15.0}),
            # In CI, as long as the first four: where host-b had received all four, host-a's first task was a
            # 2 s one, over before the partition began (1 CI run in 6); one that ends before its heartbeats fail
            # leaves the executor nothing to end itself for
            Load("slow", count, over, {"seconds": 15.0} if ci else SLOW, start_s=2.0),
        ),
        hosts=(
            HostSpec("host-a", executors=1, threads=2, offset_s=-30, faults=Faults(rules=PARTITION)),
            HostSpec("host-b", executors=1, threads=2, offset_s=30),
        ),
        inject=lambda run: _partition_then_kill(run, kills),
        drain_bound_s=120,
        ci=ci,
        expect=(expect.partitioned_tasks_reran("host-a", "partition"), expect.signals_sent(signal.SIGKILL, kills)),
    )  # fmt: skip


# -- 9. a poison task ---------------------------------------------------------------
def poison(ci: bool) -> Scenario:
    poisons, count, over = _size(ci, (3, 30, 15.0), (2, 12, 6.0))
    return Scenario(
        9, "poison", "a poison task that kills its executor every time", ("poison", "steady"),
        loads=(Load("poison", poisons, over / 2), Load("steady", count, over, {"seconds": 0.2})),
        hosts=(HostSpec("host-a", executors=1, threads=2, restart=False),),
        drain_bound_s=100,
        ci=ci,
        expect=(expect.poison_bounded("poison"), expect.hosts_survive),
    )  # fmt: skip


# -- 10. a noisy neighbour -----------------------------------------------------------
def noisy(ci: bool) -> Scenario:
    quiet, over = _size(ci, (4, 40.0), (2, 16.0))
    return Scenario(
        10, "noisy", "a noisy lambda at 100x load with failures; the quiet lambda's start-lag", ("noisy", "quiet"),
        loads=(
            Load("noisy", quiet * 100, over, {"seconds": 0.05, "fail_rate": 0.3}),
            Load("quiet", quiet, over - 4.0, {"seconds": 0.05}, start_s=4.0),
        ),
        hosts=(HostSpec("host-a", executors=1, threads=4),),
        drain_bound_s=150,
        ci=ci,
        watched=("quiet",),
        targets=(expect.start_lag_within(5.0),),  # ATF's delivery target: tasks start within 5 s
    )  # fmt: skip


# -- 11. SIGTERM of a worker host during work ----------------------------------------
def _terminate_hosts(run: Injector, every_s: float) -> None:
    for old, new in (("host-a", "host-c"), ("host-b", "host-d")):
        run.sleep(every_s)
        pid = run.cluster.get(old).pid
        if pid is None:
            run.missed(f"SIGTERM: {old} had already exited")
        else:
            run.signal(pid, signal.SIGTERM)
        run.add_host(HostSpec(new, executors=1, threads=2, restart=False))


def sigterm(ci: bool) -> Scenario:
    count, over = _size(ci, (40, 20.0), (16, 8.0))
    return Scenario(
        11, "sigterm", "SIGTERM of a worker host during work (drain)", ("slow",),
        loads=(Load("slow", count, over, SLOW),),
        hosts=(HostSpec("host-a", threads=2, restart=False), HostSpec("host-b", threads=2, restart=False)),
        inject=lambda run: _terminate_hosts(run, over / 3),
        drain_bound_s=60,
        ci=ci,
        expect=(expect.no_duplicates, expect.hosts_exit_cleanly),
    )  # fmt: skip


# -- 12. the soak ---------------------------------------------------------------------
ONE_PERCENT: Rules = (
    {"kind": "throttle", "rate": 0.005},
    {"kind": "error5xx", "rate": 0.003},
    {"kind": "lost_response", "rate": 0.002},
)


def soak(ci: bool, minutes: float = 10.0) -> Scenario:
    over = minutes * 60
    errors = Faults(rules=ONE_PERCENT)
    return Scenario(
        12, "soak", f"soak: steady load for {minutes:g} min with 1% injected errors on all calls", ("steady", "slow"),
        loads=(
            Load("steady", int(over * 0.8), over, {"seconds": 0.1, "fail_rate": 0.1}),
            Load("slow", int(over * 0.1), over, {"seconds": 2.0}, start_s=1.0),
        ),
        hosts=(HostSpec("host-a", threads=3, faults=errors), HostSpec("host-b", threads=3, faults=errors)),
        consumers=(ConsumerSpec(faults=errors),),
        fault_window_s=over,
        drain_bound_s=60,
        ci=ci,
        harness_faults=ONE_PERCENT,
        soak_minutes=minutes,
    )  # fmt: skip


BUILDERS: dict[int, Callable[[bool], Scenario]] = {
    1: kill9, 2: sigstop, 3: controller_kill, 4: consumer_kill, 5: duplicates, 6: throttling,
    7: lost_response, 8: clock_offsets, 9: poison, 10: noisy, 11: sigterm, 12: soak,
}  # fmt: skip
CI_SUBSET = (1, 2, 4, 7, 8)
