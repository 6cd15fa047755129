"""Fault injection through botocore's event hooks, for the guarantees suite.

Inert unless ATF_FAULTS holds a JSON plan; the start-up hook
(atf_local.instruments.startup) then installs the plan on every DynamoDB and
SQS client the process builds. A plan is {"seed": 7, "rules": [...]}, and a
rule is:

    kind        throttle | error5xx | lost_response | blackhole | duplicate | exit_before | exit_after
    service     "dynamodb" or "sqs" (default: both)
    operations  e.g. ["UpdateItem"] (default: all)
    clients     AwsClients fields, e.g. ["dynamodb_heartbeat"] (default: all; see startup.client_label)
    targets     UpdateItem only: the statuses the write moves a task to, e.g. ["claimed"]
    rate        chance per matching HTTP attempt (default 1)
    nth         fire on the nth matching attempt of this process only (exits)
    max         at most this many injections per process
    while_exists  a path: the rule is armed only while that file exists, so the
                harness opens and heals a fault at a moment of its choosing

Throttling and 5xx come back as fake error responses from `before-send`, so
botocore's own retries (standard mode) run exactly as they would on AWS. A
lost response really reaches the server, then fails like a read timeout,
which standard mode retries for every operation: the retry carries the same
writer token and must reconcile. A blackhole is a partition: the attempt
hangs for the client's connect + read timeouts (what `retry_budget_s`
allows per attempt) and fails like a timeout without reaching the server. Each injection, and each exit, is recorded
in the history (ATF_HISTORY_DIR) so the checker can count and place it.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import ReadTimeoutError
from botocore.httpsession import URLLib3Session

from atf_local.instruments.history import History

FAULTS_ENV = "ATF_FAULTS"
EXIT_CODE = 86  # distinguishes an injected exit from a crash or a heartbeat guard (70)
KINDS = frozenset({"throttle", "error5xx", "lost_response", "blackhole", "duplicate", "exit_before", "exit_after"})
_TARGET = "atf_fault_target"
_BEFORE_SEND = ("throttle", "error5xx", "lost_response", "blackhole", "duplicate", "exit_before")
_ERRORS = {
    "throttle": (400, "ThrottlingException", "Rate exceeded (injected)"),
    "error5xx": (500, "InternalServerError", "Internal server error (injected)"),
}


@dataclass
class Rule:
    kind: str
    service: str | None = None
    operations: frozenset[str] = frozenset()
    clients: frozenset[str] = frozenset()
    targets: frozenset[str] = frozenset()
    rate: float = 1.0
    nth: int | None = None
    max: int | None = None
    while_exists: str | None = None
    matched: int = 0
    injected: int = 0

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Rule:
        kind = str(raw["kind"])
        if kind not in KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; known: {sorted(KINDS)}")
        return cls(
            kind=kind,
            service=raw.get("service"),
            operations=frozenset(raw.get("operations", ())),
            clients=frozenset(raw.get("clients", ())),
            targets=frozenset(raw.get("targets", ())),
            rate=float(raw.get("rate", 1.0)),
            nth=raw.get("nth"),
            max=raw.get("max"),
            while_exists=raw.get("while_exists"),
        )

    def applies(self, label: str, service: str, operation: str, target: str | None) -> bool:
        return (
            (self.service is None or self.service == service)
            and (not self.operations or operation in self.operations)
            and (not self.clients or label in self.clients)
            and (not self.targets or target in self.targets)
            and (self.while_exists is None or os.path.exists(self.while_exists))
        )


@dataclass
class Plan:
    seed: int
    rules: list[Rule]
    lock: threading.Lock = field(default_factory=threading.Lock)
    _history: History | None = None

    @property
    def history(self) -> History:
        """Opened on the first injection: a process that never fails leaves no file."""
        with self.lock:
            if self._history is None:
                self._history = History.from_env("faults")
            return self._history

    @classmethod
    def from_json(cls, text: str) -> Plan:
        raw = json.loads(text)
        return cls(seed=int(raw.get("seed", 0)), rules=[Rule.parse(r) for r in raw.get("rules", [])])

    def fires(self, index: int, rng: random.Random) -> bool:
        """Count a matching attempt against rule `index` and decide whether it fails."""
        rule = self.rules[index]
        with self.lock:
            rule.matched += 1
            if rule.max is not None and rule.injected >= rule.max:
                return False
            hit = rule.matched == rule.nth if rule.nth is not None else rng.random() < rule.rate
            if hit:
                rule.injected += 1
            return hit


class ClientFaults:
    """The plan as seen by one client: its own random streams, so a seed replays."""

    def __init__(self, plan: Plan, label: str, service: str, hang_s: float = 2.0) -> None:
        self._plan = plan
        self._label = label
        self._service = service
        self._hang_s = hang_s
        self._rngs = [random.Random(f"{plan.seed}/{i}/{label}") for i in range(len(plan.rules))]

    def before_send(self, request: AWSPreparedRequest, event_name: str, **_: Any) -> AWSResponse | None:
        operation = event_name.rsplit(".", 1)[-1]
        target = _target_of(request, operation)
        context = getattr(request, "context", None)  # the call's context dict (missing from the stubs)
        if isinstance(context, dict):
            context[_TARGET] = target  # after-call sees the same context, not the body
        for index in self._firing(operation, target, _BEFORE_SEND):
            kind = self._plan.rules[index].kind
            self._record(kind, operation, target)
            if kind in _ERRORS:
                return _error_response(request, *_ERRORS[kind])
            if kind == "lost_response":
                _session().send(request)  # the write happens; the caller never hears of it
                raise ReadTimeoutError(endpoint_url=request.url)
            if kind == "blackhole":
                time.sleep(self._hang_s)
                raise ReadTimeoutError(endpoint_url=request.url)
            if kind == "duplicate":
                _session().send(request)  # one extra copy; botocore sends the original next
            if kind == "exit_before":
                _exit(self._plan.history, operation)
        return None

    def after_call(
        self, event_name: str, http_response: AWSResponse, context: dict[str, Any] | None = None, **_: Any
    ) -> None:
        if http_response.status_code >= 300:
            # botocore fires after-call before it raises for the status: "exit right after its nth claim" counts
            # the claims that were made, not a claim refused by its condition
            return
        operation = event_name.rsplit(".", 1)[-1]
        target = (context or {}).get(_TARGET)
        for _index in self._firing(operation, target, ("exit_after",)):
            self._record("exit_after", operation, target)
            _exit(self._plan.history, operation)

    def _firing(self, operation: str, target: str | None, kinds: Iterable[str]) -> list[int]:
        wanted = set(kinds)
        return [
            i
            for i, rule in enumerate(self._plan.rules)
            if rule.kind in wanted
            and rule.applies(self._label, self._service, operation, target)
            and self._plan.fires(i, self._rngs[i])
        ]

    def _record(self, kind: str, operation: str, target: str | None) -> None:
        self._plan.history.record(
            "fault", fault=kind, service=self._service, operation=operation, client=self._label, target=target
        )


class _Body:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterable[bytes]:
        yield self._body


def _error_response(request: AWSPreparedRequest, status: int, code: str, message: str) -> AWSResponse:
    body = json.dumps({"__type": code, "message": message}).encode()
    headers = {"Content-Type": "application/x-amz-json-1.0", "Content-Length": str(len(body))}
    return AWSResponse(request.url, status, cast(Any, headers), _Body(body))


def _target_of(request: AWSPreparedRequest, operation: str) -> str | None:
    """The status an UpdateItem moves a task to (the store names it :target)."""
    if operation != "UpdateItem" or not isinstance(request.body, str | bytes | bytearray):
        return None
    try:
        body = json.loads(request.body)
        return str(body["ExpressionAttributeValues"][":target"]["S"])
    except (ValueError, KeyError, TypeError):
        return None


_SESSION: URLLib3Session | None = None
_SESSION_LOCK = threading.Lock()


def _session() -> URLLib3Session:
    global _SESSION
    with _SESSION_LOCK:
        if _SESSION is None:
            _SESSION = URLLib3Session(timeout=5)
        return _SESSION


def _exit(history: History, operation: str) -> None:
    history.record("exit", operation=operation, code=EXIT_CODE)
    os._exit(EXIT_CODE)


_PLAN: Plan | None = None


def plan_from_env() -> Plan | None:
    """The process's plan, parsed once so counters (nth, max) span all its clients."""
    global _PLAN
    text = os.environ.get(FAULTS_ENV)
    if not text:
        return None
    if _PLAN is None:
        _PLAN = Plan.from_json(text)
    return _PLAN


def install(client: Any, label: str, plan: Plan) -> None:
    service = client.meta.service_model.service_id.hyphenize()
    config = client.meta.config
    faults = ClientFaults(plan, label, service, float(config.connect_timeout) + float(config.read_timeout))
    client.meta.events.register(f"before-send.{service}", faults.before_send)
    client.meta.events.register(f"after-call.{service}", faults.after_call)
