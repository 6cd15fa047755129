"""A typed client of the frontend API, signed with SigV4 from the caller's boto3 credentials.

The same client talks to a deployed stack (API Gateway with IAM auth) and to
the local stack (`python -m atf_local serve`, which accepts any signed
request). Throttling (429) and server errors (5xx) are retried with jittered
exponential backoff; that is safe for scheduling because every task sent
carries an idempotency key: the caller's, or one generated here once per
task, so a retry of a request whose answer was lost finds the task it made.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import boto3
import urllib3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from atf_core.api import BatchItem, BatchResult, GateList, GateRequest, ScheduledTask
from atf_core.errors import AtfError, InputError, MissingAuthentication, Unavailable, from_wire
from atf_core.schema import Gate, GateAction, ScheduleRequest, Task
from atf_core.stats import LambdaStats
from atf_sdk.operations import ChainCalls, DeadLetterCalls, ScheduleCalls, checked
from atf_sdk.operations import segment as _segment

API_URL_ENV = "ATF_API_URL"
SERVICE = "execute-api"
RETRIABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
BATCH_SIZE = 100
_EXECUTE_API_HOST = re.compile(r"\.execute-api\.([a-z0-9-]+)\.amazonaws\.com")


@dataclass(frozen=True)
class RetryPolicy:
    """Full-jitter exponential backoff; Retry-After, when the server sends it, is a floor."""

    attempts: int = 5
    base_s: float = 0.2
    cap_s: float = 5.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        ceiling = min(self.cap_s, self.base_s * 2 ** (attempt - 1))
        return max(random.uniform(0, ceiling), min(retry_after or 0.0, self.cap_s))


Progress = Callable[[int], None]


class AtfClient(DeadLetterCalls, ScheduleCalls, ChainCalls):
    """Schedule, inspect, cancel and gate tasks through the frontend API; redrive or discard dead
    letters, manage periodic schedules and run chains (their calls are in atf_sdk.operations)."""

    def __init__(
        self,
        endpoint: str,
        region: str | None = None,
        *,
        session: boto3.Session | None = None,
        timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self._session = session or boto3.Session()
        self.region = region or _region_of(self.endpoint) or self._session.region_name or "us-east-1"
        self._timeout = urllib3.Timeout(connect=5.0, read=timeout_s)
        self._retry = retry or RetryPolicy()
        self._pool = urllib3.PoolManager(maxsize=4)
        self._sleep = time.sleep

    @classmethod
    def from_env(cls, **kwargs: Any) -> AtfClient:
        """The API named by ATF_API_URL; region and credentials from boto3's usual chain."""
        endpoint = os.environ.get(API_URL_ENV)
        if not endpoint:
            raise AtfError(f"set {API_URL_ENV} to the API's URL, e.g. http://127.0.0.1:8080 for the local stack")
        return cls(endpoint, **kwargs)

    def close(self) -> None:
        self._pool.clear()

    def __enter__(self) -> AtfClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- tasks ---------------------------------------------------------------
    def schedule(
        self,
        lambda_name: str,
        payload: dict[str, Any] | None = None,
        *,
        collection: str | None = None,
        priority: str | None = None,
        run_at: datetime | None = None,
        delay_seconds: float | None = None,
        key: str | None = None,
        max_attempts: int | None = None,
        expire_at: datetime | None = None,
    ) -> ScheduledTask:
        fields = {
            "lambda": lambda_name,
            "payload": {} if payload is None else payload,  # anything else given is checked, never replaced
            "collection": collection,
            "priority": priority,
            "run_at": run_at,
            "delay_seconds": delay_seconds,
            "key": key,
            "max_attempts": max_attempts,
            "expire_at": expire_at,
        }
        return self.submit(checked(ScheduleRequest, {k: v for k, v in fields.items() if v is not None}))

    def submit(self, request: ScheduleRequest | dict[str, Any]) -> ScheduledTask:
        """Schedule a task described by a ScheduleRequest (a key is added when it has none)."""
        body = _wire(keyed(checked(ScheduleRequest, request)))
        return ScheduledTask.model_validate(self._call("POST", "/v1/tasks", body))

    def schedule_many(
        self, requests: Iterable[ScheduleRequest | dict[str, Any]], on_progress: Progress | None = None
    ) -> list[BatchItem]:
        """Schedule tasks in batches of 100; one result per task, in order. Each task is
        checked here first, so a malformed one fails before anything is sent."""
        tasks = [keyed(checked(ScheduleRequest, r, f"tasks[{i}]")) for i, r in enumerate(requests)]
        results: list[BatchItem] = []
        for start in range(0, len(tasks), BATCH_SIZE):
            chunk = tasks[start : start + BATCH_SIZE]
            results += [item.model_copy(update={"index": start + item.index}) for item in self._batch(chunk, start)]
            if on_progress:
                on_progress(len(chunk))
        return results

    def _batch(self, tasks: Sequence[ScheduleRequest], offset: int) -> list[BatchItem]:
        """One batch, resending the items the store throttled until they are written or attempts run out."""
        done: dict[int, BatchItem] = {}
        pending = list(range(len(tasks)))
        for attempt in range(1, self._retry.attempts + 1):
            body = {"tasks": [_wire(tasks[i]) for i in pending]}
            try:
                reply = BatchResult.model_validate(self._call("POST", "/v1/tasks/batch", body))
            except AtfError as error:
                raise _renumbered(error, [offset + i for i in pending]) from None
            for item in reply.results:
                done[pending[item.index]] = item.model_copy(update={"index": pending[item.index]})
            pending = [i for i in pending if done[i].retriable]
            if not pending or attempt == self._retry.attempts:
                break
            self._sleep(self._retry.delay(attempt))
        return [done[i] for i in range(len(tasks))]

    def get(self, task_id: str) -> Task:
        return Task.model_validate(self._call("GET", f"/v1/tasks/{_segment(task_id)}"))

    def wait(self, task_id: str, timeout_s: float = 60.0, poll_s: float = 0.5) -> Task:
        """The task once it has settled (ended, or a dead letter); TimeoutError if it has not within timeout_s."""
        deadline = time.monotonic() + timeout_s
        while not (task := self.get(task_id)).status.settled:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"task {task_id} is still {task.status.value} after {timeout_s:g} s")
            self._sleep(min(poll_s, left))
        return task

    def cancel(self, task_id: str) -> Task:
        """Cancel a task that has not started (Conflict once it has)."""
        return Task.model_validate(self._call("DELETE", f"/v1/tasks/{_segment(task_id)}"))

    # -- gates ---------------------------------------------------------------
    def pause(
        self, lambda_name: str, collection: str | None = None, *, until: datetime | None = None, reason: str = ""
    ) -> Gate:
        return self._gate(lambda_name, collection, {"action": GateAction.PAUSE, "until": until, "reason": reason})

    def drop(
        self, lambda_name: str, collection: str | None = None, *, until: datetime | None = None, reason: str = ""
    ) -> Gate:
        return self._gate(lambda_name, collection, {"action": GateAction.DROP, "until": until, "reason": reason})

    def resume(self, lambda_name: str, collection: str | None = None) -> None:
        """Lift a gate (NotFound when there is none)."""
        self._call("DELETE", _gate_path(lambda_name, collection))

    def gates(self) -> list[Gate]:
        return GateList.model_validate(self._call("GET", "/v1/gates")).gates

    def _gate(self, lambda_name: str, collection: str | None, fields: dict[str, Any]) -> Gate:
        body = checked(GateRequest, fields).model_dump(mode="json", exclude_none=True)
        return Gate.model_validate(self._call("PUT", _gate_path(lambda_name, collection), body))

    # -- stats ---------------------------------------------------------------
    def stats(self, lambda_name: str) -> LambdaStats:
        return LambdaStats.model_validate(self._call("GET", f"/v1/lambdas/{_segment(lambda_name)}/stats"))

    def openapi(self) -> dict[str, Any]:
        document: dict[str, Any] = self._call("GET", "/v1/openapi.json")
        return document

    # -- transport -----------------------------------------------------------
    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """Send a signed request, retrying throttling, server errors and lost connections."""
        data = json.dumps(body).encode() if body is not None else None
        for attempt in range(1, self._retry.attempts + 1):
            last = attempt == self._retry.attempts
            try:
                response = self._send(method, path, data)
            except urllib3.exceptions.HTTPError as error:
                if last:
                    raise Unavailable(f"{method} {path}: {error}") from error
                self._sleep(self._retry.delay(attempt))
                continue
            if response.status in RETRIABLE_STATUSES and not last:
                self._sleep(self._retry.delay(attempt, _retry_after(response)))
                continue
            return _result(response)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _send(self, method: str, path: str, data: bytes | None) -> urllib3.BaseHTTPResponse:
        url = self.endpoint + path
        headers = {"Content-Type": "application/json"} if data is not None else {}
        request = AWSRequest(method=method, url=url, data=data, headers=headers)
        SigV4Auth(self._credentials(), SERVICE, self.region).add_auth(request)
        signed = dict(request.headers.items())
        return self._pool.request(
            method, url, body=data, headers=signed, timeout=self._timeout, retries=False, redirect=False
        )

    def _credentials(self) -> Any:
        credentials = self._session.get_credentials()
        if credentials is None:
            raise MissingAuthentication("no AWS credentials found: the API needs SigV4-signed requests")
        return credentials.get_frozen_credentials()


def keyed(request: ScheduleRequest) -> ScheduleRequest:
    """The request with an idempotency key, so resending it cannot schedule it twice."""
    return request if request.key is not None else request.model_copy(update={"key": uuid.uuid4().hex})


def _wire(request: ScheduleRequest) -> dict[str, Any]:
    return request.model_dump(mode="json", by_alias=True, exclude_none=True)


def _result(response: urllib3.BaseHTTPResponse) -> Any:
    try:
        body = json.loads(response.data) if response.data else None
    except ValueError:
        body = {"message": response.data[:200].decode(errors="replace")}
    if response.status >= 400:
        raise from_wire(response.status, body if isinstance(body, dict) else {"message": str(body)})
    return body


def _retry_after(response: urllib3.BaseHTTPResponse) -> float | None:
    try:
        return float(response.headers.get("Retry-After", ""))
    except ValueError:
        return None


def _renumbered(error: AtfError, indices: list[int]) -> AtfError:
    """A batch error names tasks[i] of what was sent; name the caller's index instead."""
    match = re.match(r"tasks\[(\d+)\](.*)", error.field or "")
    if match and int(match.group(1)) < len(indices):
        error.field = f"tasks[{indices[int(match.group(1))]}]{match.group(2)}"
    return error


def _gate_path(lambda_name: str, collection: str | None) -> str:
    path = f"/v1/gates/{_segment(lambda_name)}"
    if collection is None:
        return path
    if collection == "":  # the path would end in "/", which routes to the whole lambda's gate
        raise InputError("collection: an empty name; leave it out to gate every collection of the lambda", "collection")
    return f"{path}/{_segment(collection)}"


def _region_of(endpoint: str) -> str | None:
    match = _EXECUTE_API_HOST.search(endpoint)
    return match.group(1) if match else None


__all__ = ["AtfClient", "BatchItem", "RetryPolicy", "ScheduledTask"]
