"""A bounded workload: a fixed number of tasks per lambda, spread over a fixed time.

Each task is scheduled with an idempotency key, so a schedule call that
failed (an injected fault in the soak) is simply repeated; a task counts as
accepted once a call returned it, and the history says so with its due time.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from atf_core.schema import ScheduleRequest
from atf_core.tasks import Scheduling
from atf_local.instruments.history import History

log = logging.getLogger("atf.faults")


@dataclass(frozen=True)
class Load:
    lambda_name: str
    count: int
    over_s: float
    payload: dict[str, Any] = field(default_factory=dict)
    max_attempts: int | None = None
    start_s: float = 0.0

    def offsets(self) -> list[float]:
        step = self.over_s / self.count if self.count else 0.0
        return [self.start_s + i * step for i in range(self.count)]


class Workload:
    def __init__(self, scheduling: Scheduling, history: History, loads: tuple[Load, ...], run_id: str) -> None:
        self._scheduling = scheduling
        self._history = history
        plan = [(offset, load, i) for load in loads for i, offset in enumerate(load.offsets())]
        self._plan = sorted(plan, key=lambda item: item[0])
        self._run_id = run_id
        self.accepted: list[str] = []
        self.done = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="workload", daemon=True)

    @property
    def duration_s(self) -> float:
        return max((load.start_s + load.over_s for _, load, _ in self._plan), default=0.0)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        began = time.monotonic()
        try:
            for offset, load, index in self._plan:
                if self._stop.wait(max(0.0, began + offset - time.monotonic())):
                    return
                self._schedule(load, index)
        finally:
            self.done.set()

    def _schedule(self, load: Load, index: int) -> None:
        key = f"{self._run_id}-{load.lambda_name}-{load.start_s:g}-{index}"
        body: dict[str, Any] = {"lambda": load.lambda_name, "payload": load.payload, "key": key}
        if load.max_attempts is not None:
            body["max_attempts"] = load.max_attempts
        request = ScheduleRequest.model_validate(body)
        for attempt in range(10):
            try:
                task = self._scheduling.schedule(request).task
            except Exception as error:  # noqa: BLE001 - an injected fault; the key makes the repeat safe
                log.warning("scheduling %s failed (try %d: %s); again", request.key, attempt + 1, error)
                time.sleep(0.2)
                continue
            self.accepted.append(task.id)
            self._history.record(
                "accepted", task=task.id, scheduled_t=task.scheduled_at.timestamp(), max_attempts=task.max_attempts,
                **{"lambda": task.lambda_},
            )  # fmt: skip
            return
        log.error("could not schedule %s; it is not counted as accepted", request.key)
