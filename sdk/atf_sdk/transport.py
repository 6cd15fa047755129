"""How a call of the API is carried out, whatever carries it: plans of steps, run by two small drivers.

Every call is written once (atf_sdk.operations) as a plan: a generator that checks its input, yields
the requests it needs and the pauses between retries, and turns the answers into the core's models or
the core's errors. A driver carries the steps out: `Blocking` sends with urllib3 (AtfClient),
`Asynchronous` awaits httpx (AsyncAtfClient). So both clients have the same methods, input checks,
retries, errors and models by construction, and a plan never touches a socket or a clock's sleep.

    @api_call
    def get(self, task_id: str) -> Plan[Task]:
        return Task.model_validate((yield from self._request("GET", routes.task(task_id))))

`AtfClient().get(id)` returns a Task; `await AsyncAtfClient().get(id)` too.

Throttling (429) and server errors (5xx) are retried with jittered exponential backoff; that is safe
for scheduling because every task sent carries an idempotency key: the caller's, or one generated
once per task, so a retry of a request whose answer was lost finds the task it made.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import random
import re
import time
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine, Generator, Mapping
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, cast, overload
from urllib.parse import urlsplit

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from atf_core.backoff import full_jitter
from atf_core.errors import AtfError, InputError, Internal, MissingAuthentication, Unavailable, from_wire

API_URL_ENV = "ATF_API_URL"
SERVICE = "execute-api"
RETRIABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
CONNECT_TIMEOUT_S = 5.0
_EXECUTE_API_HOST = re.compile(r"\.execute-api\.([a-z0-9-]+)\.amazonaws\.com")

T = TypeVar("T")
P = ParamSpec("P")


# -- the steps a plan yields, and what a driver sends back ----------------------------------


@dataclass(frozen=True)
class Send:
    """One HTTP request to the API; the driver signs it and answers with a Reply, or Lost."""

    method: str
    path: str
    body: bytes | None = None
    timeout_s: float | None = None  # the time left to a caller's deadline, if shorter than the client's timeouts

    def timeouts(self, read_s: float) -> tuple[float, float]:
        """(connect, read) seconds for this request: the client's, within the time left."""
        left = self.timeout_s if self.timeout_s is not None else float("inf")
        return min(CONNECT_TIMEOUT_S, left), min(read_s, left)


@dataclass(frozen=True)
class Sleep:
    """Wait before the next step (the driver answers None)."""

    seconds: float


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Mapping[str, str]  # the HTTP library's own, case-insensitive
    data: bytes


@dataclass(frozen=True)
class Lost:
    """No answer: the connection failed, or timed out."""

    reason: str


Step = Send | Sleep
Answer = Reply | Lost | None
Plan = Generator[Step, Answer, T]


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter (atf_core.backoff); Retry-After, when the server sends it, is a floor."""

    attempts: int = 5
    base_s: float = 0.2
    cap_s: float = 5.0
    # No attempt starts past this long after the call did: an API that takes connections and never answers
    # would otherwise hold a call for every attempt's read timeout (5 x 30 s).
    budget_s: float = 60.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        drawn = full_jitter(attempt, self.base_s, self.cap_s, random.random())
        return max(drawn, min(retry_after or 0.0, self.cap_s))


def request(method: str, path: str, body: Any, retry: RetryPolicy, deadline: float | None = None) -> Plan[Any]:
    """One call of the API: sent, and sent again on throttling, server errors and lost connections
    (with the same body, so a task keeps its key); the decoded JSON answer, or the error it names. With a
    `deadline` (time.monotonic()), no attempt, wait or pause runs past it: Unavailable then."""
    data = json.dumps(body).encode() if body is not None else None
    budget = time.monotonic() + retry.budget_s
    deadline = budget if deadline is None else min(deadline, budget)
    lost = "no attempt made"
    for attempt in range(1, retry.attempts + 1):
        left = deadline - time.monotonic()
        if left <= 0:
            raise Unavailable(f"{method} {path}: out of time for another attempt ({lost})")
        last = attempt == retry.attempts
        answer = yield Send(method, path, data, left)
        if isinstance(answer, Lost):
            lost = answer.reason
            if last:
                raise Unavailable(f"{method} {path}: {answer.reason}")
            yield Sleep(_within(retry.delay(attempt), deadline))
        elif isinstance(answer, Reply) and (not _retriable(answer) or last):
            return decoded(answer)
        elif isinstance(answer, Reply):
            lost = f"HTTP {answer.status}"
            yield Sleep(_within(retry.delay(attempt, _retry_after(answer)), deadline))
    raise AssertionError("unreachable: the last attempt returns or raises")


def _within(seconds: float, deadline: float) -> float:
    return max(0.0, min(seconds, deadline - time.monotonic()))


def decoded(reply: Reply) -> Any:
    """The JSON of a reply; the atf_core.errors class it describes for an HTTP error."""
    try:
        body = json.loads(reply.data) if reply.data else None
    except ValueError:
        body = {"message": reply.data[:200].decode(errors="replace")}
    if reply.status >= 400:
        raise from_wire(reply.status, body if isinstance(body, dict) else {"message": str(body)})
    return body


def _retriable(reply: Reply) -> bool:
    """Throttling and server errors, but not the framework's own `internal` (a missing grant): it stays."""
    if reply.status not in RETRIABLE_STATUSES:
        return False
    try:
        return bool(json.loads(reply.data).get("code") != Internal.code)
    except (ValueError, AttributeError):
        return True  # API Gateway's or a proxy's own answer: a passing fault


def _retry_after(reply: Reply) -> float | None:
    try:
        return float(reply.headers.get("Retry-After", ""))
    except ValueError:
        return None


# -- the clients' common part, and the two drivers ------------------------------------------


class ApiClient:
    """The endpoint, the region and the credentials requests are signed with (boto3's usual chain).

    AtfClient(endpoint, region=None, *, session=None, timeout_s=30.0, retry=None), and AsyncAtfClient
    alike: the region defaults to the one in an execute-api URL, else the session's."""

    def __init__(
        self,
        endpoint: str,
        region: str | None = None,
        *,
        session: boto3.Session | None = None,
        timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.endpoint = _checked_endpoint(endpoint).rstrip("/")
        if not timeout_s > 0:  # also refuses NaN
            raise InputError(f"timeout_s must be more than 0 seconds, not {timeout_s!r}", "timeout_s")
        self._session = session or boto3.Session()
        self.region = region or _region_of(self.endpoint) or self._session.region_name or "us-east-1"
        self.timeout_s = timeout_s  # to read an answer; connecting has CONNECT_TIMEOUT_S
        self._retry = retry or RetryPolicy()
        self._open()

    def _open(self) -> None:
        """Set up the HTTP library's connection pool (each driver its own)."""

    @classmethod
    def from_env(cls, **kwargs: Any) -> Self:
        """The API named by ATF_API_URL; region and credentials from boto3's usual chain."""
        endpoint = os.environ.get(API_URL_ENV)
        if not endpoint:
            raise AtfError(f"set {API_URL_ENV} to the API's URL, e.g. http://127.0.0.1:8080 for the local stack")
        return cls(endpoint, **kwargs)

    def _request(self, method: str, path: str, body: Any = None, deadline: float | None = None) -> Plan[Any]:
        return request(method, path, body, self._retry, deadline)

    def _credentials(self) -> Any:
        """Frozen credentials; a refresh (an assumed role's, the instance's) may call AWS."""
        credentials = self._session.get_credentials()
        if credentials is None:
            raise MissingAuthentication("no AWS credentials found: the API needs SigV4-signed requests")
        return credentials.get_frozen_credentials()

    def _signed(self, send: Send, credentials: Any) -> tuple[str, dict[str, str]]:
        """The URL and the headers, with botocore's SigV4 signature for execute-api."""
        url = self.endpoint + send.path
        headers = {"Content-Type": "application/json"} if send.body is not None else {}
        request = AWSRequest(method=send.method, url=url, data=send.body, headers=headers)
        SigV4Auth(credentials, SERVICE, self.region).add_auth(request)
        return url, dict(request.headers.items())


def _checked_endpoint(endpoint: str) -> str:
    """The API's URL, refused naming api_url unless it is http(s) with a host and a valid port: botocore's signer
    and the HTTP libraries fail on anything else with tracebacks that do not say what was wrong."""
    example = "e.g. http://127.0.0.1:8080 or https://ID.execute-api.REGION.amazonaws.com/STAGE"
    try:
        parts = urlsplit(endpoint)
        parts.port  # noqa: B018 - reading it checks it: a port out of range or not a number raises
    except ValueError as error:
        raise InputError(f"API URL {endpoint!r} is not a URL ({error}); {example}", "api_url") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"API URL {endpoint!r} needs http:// or https:// and a host; {example}", "api_url")
    return endpoint


class Blocking(ApiClient, ABC):
    """Runs a plan in the calling thread."""

    @abstractmethod
    def _send(self, send: Send) -> Reply | Lost: ...

    @abstractmethod
    def _sleep(self, seconds: float) -> None: ...

    def _drive(self, plan: Plan[T]) -> T:
        step, result = _advance(plan, None)
        while step is not None:
            step, result = _advance(plan, self._send(step) if isinstance(step, Send) else self._sleep(step.seconds))
        return result


class Asynchronous(ApiClient, ABC):
    """Runs a plan in the running event loop, never blocking it."""

    @abstractmethod
    async def _send(self, send: Send) -> Reply | Lost: ...

    @abstractmethod
    async def _sleep(self, seconds: float) -> None: ...

    async def _drive(self, plan: Plan[T]) -> T:
        step, result = _advance(plan, None)
        while step is not None:
            answer = await (self._send(step) if isinstance(step, Send) else self._sleep(step.seconds))
            step, result = _advance(plan, answer)
        return result


def _advance(plan: Plan[T], answer: Answer) -> tuple[Step | None, T]:
    """The plan's next step for this answer; or no step, and what the plan returned."""
    try:
        return plan.send(answer), cast(T, None)
    except StopIteration as done:
        return None, cast(T, done.value)


class api_call(Generic[P, T]):  # noqa: N801 - a decorator, named as functions are
    """A call of the API, defined once as a plan: a method of a Blocking client returning T, of an
    Asynchronous one a coroutine returning T, with the plan's name, parameters and docstring."""

    def __init__(self, plan: Callable[Concatenate[Any, P], Plan[T]]) -> None:
        self._plan = plan
        functools.update_wrapper(cast(Any, self), plan)  # its name and docstring, for help() and docs
        self.__signature__ = _returning_the_result(plan)

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Self: ...

    @overload
    def __get__(self, client: Blocking, owner: type[Any]) -> Callable[P, T]: ...

    @overload
    def __get__(self, client: Asynchronous, owner: type[Any]) -> Callable[P, Coroutine[Any, Any, T]]: ...

    def __get__(self, client: object, owner: type[Any]) -> Any:
        if client is None:
            return self
        plan = self._plan
        if isinstance(client, Asynchronous):

            async def method(*args: P.args, **kwargs: P.kwargs) -> T:
                return await client._drive(plan(client, *args, **kwargs))

        elif isinstance(client, Blocking):

            def method(*args: P.args, **kwargs: P.kwargs) -> T:  # type: ignore[misc]
                return client._drive(plan(client, *args, **kwargs))

        else:
            raise TypeError(f"{type(client).__name__} is neither a Blocking nor an Asynchronous client")
        functools.update_wrapper(method, plan)
        params = list(self.__signature__.parameters.values())[1:]  # bound: without the client
        method.__signature__ = self.__signature__.replace(parameters=params)  # type: ignore[attr-defined]
        return method

    def __call__(self, client: Blocking | Asynchronous, *args: P.args, **kwargs: P.kwargs) -> Any:
        """Called on the class, as AtfClient.get(client, task_id): the same as client.get(task_id)."""
        return self.__get__(client, type(client))(*args, **kwargs)


def _returning_the_result(plan: Callable[..., Any]) -> inspect.Signature:
    """A plan's signature as its methods have it: returning what the plan returns (Plan[Task] -> Task)."""
    signature = inspect.signature(plan, eval_str=True)
    returns = typing.get_args(signature.return_annotation)
    return signature.replace(return_annotation=returns[2]) if len(returns) == 3 else signature


def _region_of(endpoint: str) -> str | None:
    match = _EXECUTE_API_HOST.search(endpoint)
    return match.group(1) if match else None
