"""A worker host's health: what the host reports, and the probe that reads it.

A host can half-die: a receiver thread that ended or hangs leaves its queue unread (and, for a
higher priority, holds the lower ones back), and an executor that dies each time it starts leaves
its lambda without hands while the host respawns it forever. Neither ends the process, so nothing
outside would notice. The host therefore rewrites a small JSON report every REPORT_EVERY_S seconds
(atomically, by rename) naming what is wrong, and a probe reads it: `atf worker-health`, or
`python -m atf_sdk.worker.health` (the same check, a third of the start-up cost) in a container's
HEALTHCHECK and the ECS task definition's health check. The probe makes no AWS call and opens no
port; it fails when the report names a problem, when the host that wrote it is gone, and when the
report has gone stale (the host's supervising loop is stuck).

What a restart cannot cure is not a failed health check: a queue that keeps refusing receives (a
missing grant, an outage) is retried with backoff and logged, and the report only notes it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

HEALTH_FILE_ENV = "ATF_HEALTH_FILE"  # read by both the host and the probe, so one setting moves both
DEFAULT_HEALTH_FILE = Path("/tmp/atf-worker-health.json")  # /tmp: the one writable path in the image
REPORT_EVERY_S = 2.0
STALE_AFTER_S = 30.0  # a report this old means the host's supervising loop has stopped turning
# An executor that exits sooner than SETTLE_S after it started, before it was handed any task, failed to start;
# CRASH_LOOP_EXITS such exits in a row, with its replacement not yet settled either, and its pool is dead. One
# that died running a task did start: the task killed it (its attempts are recorded as lost, and retried after
# their backoff, seconds apart), and a new host would fare no better.
SETTLE_S = 30.0
CRASH_LOOP_EXITS = 5
# The status of an executor ended on purpose because a callback ran over its time limit (time_limits): not a
# failure to start, however soon it comes. Defined here so the probe imports nothing heavier.
EXIT_TIMED_OUT = 71


def health_file(given: Path | None = None) -> Path:
    """Where the report goes: the path given, else $ATF_HEALTH_FILE, else /tmp/atf-worker-health.json."""
    return given or Path(os.environ.get(HEALTH_FILE_ENV) or DEFAULT_HEALTH_FILE)


# -- what the host knows ---------------------------------------------------------


@dataclass(frozen=True)
class ReceiverStatus:
    """One receiver thread as its controller sees it."""

    name: str  # lambda/priority
    alive: bool
    idle_s: float  # since its loop last began a turn
    failures: int  # receives failed in a row


def receiver_problems(receivers: Iterable[ReceiverStatus], stuck_after_s: float) -> list[str]:
    """A receiver that ended, or whose current turn has outlasted the longest a turn can take."""
    problems = []
    for receiver in receivers:
        if not receiver.alive:
            problems.append(f"receiver {receiver.name} has ended")
        elif receiver.idle_s > stuck_after_s:
            problems.append(f"receiver {receiver.name} is stuck: no turn of its loop for {receiver.idle_s:.0f} s")
    return problems


def receiver_notes(receivers: Iterable[ReceiverStatus]) -> list[str]:
    return [f"receiver {r.name}: {r.failures} receives failed in a row" for r in receivers if r.alive and r.failures]


@dataclass
class _Slot:
    started_at: float
    quick_exits: int = 0
    last_exit_code: int | None = None


class ExecutorStarts:
    """The starts and exits of each executor slot (lambda, number), to tell a pool whose executors keep
    dying as they start (it is dead, however often it is respawned) from one that lost an executor now and
    then (its replacement settles)."""

    def __init__(
        self,
        settle_s: float = SETTLE_S,
        crash_loop_exits: int = CRASH_LOOP_EXITS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settle_s = settle_s
        self._limit = crash_loop_exits
        self._clock = clock
        self._slots: dict[tuple[str, int], _Slot] = {}

    def started(self, lambda_name: str, slot: int) -> None:
        known = self._slots.get((lambda_name, slot))
        now = self._clock()
        if known is None:
            self._slots[(lambda_name, slot)] = _Slot(now)
        else:
            known.started_at = now

    def exited(self, lambda_name: str, slot: int, exit_code: int | None, ran_a_task: bool = False) -> None:
        known = self._slots[(lambda_name, slot)]
        lived = self._clock() - known.started_at
        quick = lived < self._settle_s and exit_code != EXIT_TIMED_OUT and not ran_a_task
        known.quick_exits = known.quick_exits + 1 if quick else 0
        known.last_exit_code = exit_code

    def problems(self) -> list[str]:
        """One line per pool with a slot in a crash loop."""
        now = self._clock()
        worst: dict[str, _Slot] = {}
        for (name, _), slot in self._slots.items():
            looping = slot.quick_exits >= self._limit and now - slot.started_at < self._settle_s
            if looping and (name not in worst or slot.quick_exits > worst[name].quick_exits):
                worst[name] = slot
        return [
            f"executor pool {name}: its executors exited {slot.quick_exits} times in a row within"
            f" {self._settle_s:g} s of starting (last exit code {slot.last_exit_code})"
            for name, slot in worst.items()
        ]


# -- the report ------------------------------------------------------------------


@dataclass(frozen=True)
class HealthReport:
    pid: int
    at: float  # time.time() when written: the probe runs in another process
    state: str  # "serving" or "draining"
    lambdas: list[str]
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # worth a look, not worth a restart

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> HealthReport:
        data = json.loads(text)
        return cls(
            pid=int(data["pid"]),
            at=float(data["at"]),
            state=str(data["state"]),
            lambdas=[str(n) for n in data["lambdas"]],
            problems=[str(p) for p in data.get("problems", [])],
            notes=[str(n) for n in data.get("notes", [])],
        )


class HealthFile:
    """The report on disk, replaced whole so that a probe never reads half of one."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, report: HealthReport) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        temporary.write_text(report.to_json(), encoding="utf-8")
        os.replace(temporary, self.path)

    def remove(self, pid: int) -> None:
        """Remove the report if `pid` wrote it (another host may share the path)."""
        try:
            if HealthReport.from_json(self.path.read_text(encoding="utf-8")).pid == pid:
                self.path.unlink()
        except (OSError, ValueError, KeyError, TypeError):
            return


# -- the probe -------------------------------------------------------------------


def check(path: Path, now: float | None = None, running: Callable[[int], bool] | None = None) -> tuple[bool, str]:
    """Whether the host that reports at `path` is healthy, and one line saying why (or why not)."""
    try:
        report = HealthReport.from_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False, f"no health report at {path}: the worker host has not started, or has stopped"
    except OSError as error:
        return False, f"cannot read the health report {path}: {error.strerror or error}"
    except (ValueError, KeyError, TypeError) as error:
        return False, f"the health report {path} does not read: {error}"
    if not (running or _running)(report.pid):
        return False, f"the worker host (pid {report.pid}) that wrote {path} is not running"
    age = (time.time() if now is None else now) - report.at
    if age > STALE_AFTER_S:
        return False, f"the worker host (pid {report.pid}) last reported {age:.0f} s ago: it is stuck"
    if report.state != "serving":
        return False, f"the worker host (pid {report.pid}) is {report.state}"
    if report.problems:
        return False, "; ".join(report.problems)
    served = f"serving {', '.join(report.lambdas)} (pid {report.pid})"
    return True, "; ".join([served, *report.notes])


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def probe(path: Path | None = None) -> int:
    """Print one line, healthy or unhealthy and why; 0 if healthy, else 1."""
    healthy, line = check(health_file(path))
    print(f"{'healthy' if healthy else 'unhealthy'}: {line}")
    return 0 if healthy else 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m atf_sdk.worker.health", description="check a worker host")
    parser.add_argument("--health-file", type=Path, help=f"default: ${HEALTH_FILE_ENV}, else {DEFAULT_HEALTH_FILE}")
    sys.exit(probe(parser.parse_args(argv).health_file))


if __name__ == "__main__":
    main()
