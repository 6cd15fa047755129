"""The one task schema: statuses, the task record and the schedule request.

Every component (frontend, consumer, controller, executor, SDK, CLI) imports
these models; nothing else defines the shape of a task.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AllowInfNan,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationInfo,
    model_validator,
)
from pydantic_core import PydanticCustomError

from atf_core.tracing import TRACEPARENT_PATTERN
from atf_core.vocabulary import OnConflict

MAX_PAYLOAD_BYTES = 256 * 1024
# The deepest a payload or a result may nest objects and arrays. pydantic writes no JSON nested past 253
# levels, the task's own fields around its payload included: a task stored deeper could be written once
# and never read back.
MAX_JSON_DEPTH = 64
MAX_SCHEDULE_AHEAD = timedelta(days=366)
# The largest result a callback may return, as compact JSON: a task's item holds its payload and result.
MAX_RESULT_BYTES = 64 * 1024
# A task keeps its first MAX_KEPT_ERRORS attempts' errors, and always its latest (last_error): attempts
# have no bound across redrives, and the item, holding a payload and a result too, must fit DynamoDB's 400 KB
# (256 KiB + 64 KiB + 21 errors of at most ~2.5 KB each: atf_core.store.codec.error_to_plain).
MAX_KEPT_ERRORS = 20
# The longest time limit a lambda or a task may set on one attempt (a day).
MAX_TIMEOUT_SECONDS = 86_400.0
NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,39}$"
COLLECTION_PATTERN = r"^[A-Za-z0-9_.:-]{1,64}$"
# A flow-control key (say, a customer id) follows a collection's rules: 1-64 of A-Z a-z 0-9 _ . : -
FLOW_KEY_PATTERN = COLLECTION_PATTERN
# Segments an HTTP client or server resolves as steps of a URL's path (RFC 3986, 5.2.4), whatever their
# escaping: a collection or a chain link so named could never be put in a route's path (a gate's, a link's
# retry), so such a name is refused where it is given.
DOT_SEGMENTS = frozenset({".", ".."})


def reachable_by_path(name: str, info: ValidationInfo) -> str:
    """Refused as given (one stored by a version that took it still reads back)."""
    if name in DOT_SEGMENTS and not read_back(info):
        raise ValueError(f"{name!r} is a step of a URL's path: no route could name it")
    return name


# A collection as a task is given one: one a gate's path can name.
TaskCollection = Annotated[str, Field(pattern=COLLECTION_PATTERN), AfterValidator(reachable_by_path)]


class TaskStatus(StrEnum):
    NEW = "new"
    ENQUEUED = "enqueued"
    CLAIMED = "claimed"
    PROCESSING = "processing"
    RETRIABLE_FAILURE = "retriable_failure"
    SUCCESS = "success"
    FATAL_FAILURE = "fatal_failure"
    CANCELLED = "cancelled"
    DROPPED = "dropped"
    EXPIRED = "expired"
    DEAD_LETTER = "dead_letter"  # failed for good; waits for an operator to redrive or discard it
    WAITING = "waiting"  # a chain link whose parents have not all succeeded

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATUSES

    @property
    def settled(self) -> bool:
        """Nothing will run it again unless someone acts: it ended, or waits as a dead letter."""
        return self in TERMINAL_STATUSES or self is TaskStatus.DEAD_LETTER


TERMINAL_STATUSES = frozenset(
    {TaskStatus.SUCCESS, TaskStatus.FATAL_FAILURE, TaskStatus.CANCELLED, TaskStatus.DROPPED, TaskStatus.EXPIRED}
)


def utcnow() -> datetime:
    """The system clock: the default clock of every component (see atf_core.clock)."""
    return datetime.now(UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ENCODER = json.JSONEncoder(default=repr)  # json.dumps's own defaults


def start_lag_ms(scheduled_ms: int, first_claimed_ms: int) -> int:
    """How late a task started: its first claim minus the time it was scheduled for, never below zero.

    The first claim, not the latest: a retry keeps the scheduled time, so its claim would count the backoff.
    """
    return max(0, first_claimed_ms - scheduled_ms)


def to_ms(moment: datetime) -> int:
    """Epoch milliseconds, exact for times that came from from_ms."""
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def from_ms(millis: int | float) -> datetime:
    return _EPOCH + timedelta(milliseconds=int(millis))


def maybe_from_ms(millis: int | float | None) -> datetime | None:
    return None if millis is None else from_ms(millis)


def decode_json(text: str | bytes, unique_names: bool = True) -> Any:
    """JSON as RFC 8259 has it: Python's reader also takes NaN, Infinity and -Infinity, which JSON has no words
    for (a ValueError here, as for any text that is not JSON). With unique_names, an object that gives a name
    twice is refused too (I-JSON, RFC 7493), naming where: Python's reader keeps the last silently, so
    `{"lambda": "a", "lambda": "b"}` would schedule b for a caller who may have meant a."""
    if not unique_names:
        return json.loads(text, parse_constant=_not_json)
    marked: list[_Twice] = []  # this read's own: readers in other threads mark theirs

    def marking(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        named = dict(pairs)
        if len(named) < len(pairs):
            named = _Twice(named, _first_repeated(pairs))
            marked.append(named)
        return named

    value = json.loads(text, parse_constant=_not_json, object_pairs_hook=marking)
    if marked:  # only a text with a name given twice pays for the walk that finds where
        raise NameGivenTwice(_where_twice(value) or (marked[0].name,))
    return value


class NameGivenTwice(json.JSONDecodeError):
    """An object of a JSON text gives a name twice, at `loc` (as a validation error's: ("tasks", 0, "lambda"));
    the error any text that is not JSON raises."""

    def __init__(self, loc: tuple[str | int, ...]) -> None:
        super().__init__(f"{str(loc[-1])!r} is given twice in one object", str(loc[-1]), 0)
        self.loc = loc


class _Twice(dict[str, Any]):
    """An object read with a name given twice (the last value kept), marked so its place can be found."""

    def __init__(self, named: dict[str, Any], name: str) -> None:
        super().__init__(named)
        self.name = name


def _first_repeated(pairs: list[tuple[str, Any]]) -> str:
    seen: set[str] = set()
    for name, _ in pairs:
        if name in seen:
            return name
        seen.add(name)
    raise ValueError("no name is repeated")


def _where_twice(value: Any, loc: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    """The place of a name given twice: an object's own first, then what it holds, in order."""
    if isinstance(value, _Twice):
        return (*loc, value.name)
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        found = _where_twice(child, (*loc, key))
        if found is not None:
            return found
    return None


def _not_json(word: str) -> None:
    # The error a malformed text raises (a ValueError), so a reader catching that one takes this one too
    raise json.JSONDecodeError(f"{word} is not a JSON value", word, 0)


def encode_payload(payload: dict[str, Any]) -> str:
    return json.dumps(payload, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


# A request's fingerprint is a digest of it: the task's item holds it beside the payload, and both in full
# (256 KiB each) would be over DynamoDB's 400 KB item. 0.1.0 stored the request's JSON itself.
FINGERPRINT_PREFIX = "sha256:"


def digest(canonical: str) -> str:
    return FINGERPRINT_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()


class Fingerprint(str):
    """A request's fingerprint, carrying those an earlier version computed for the same request: what was stored
    then still matches (same_request). Stored, it is the current one."""

    earlier: tuple[str, ...] = ()

    @classmethod
    def of(cls, current: str, *earlier: str) -> Fingerprint:
        made = cls(current)
        made.earlier = tuple(fingerprint for fingerprint in earlier if fingerprint != current)
        return made


def same_request(stored: str, fingerprint: str) -> bool:
    """Whether a stored fingerprint is this one (or one an earlier version computed for it): a digest, or an
    item of 0.1.0's request JSON, digested here."""
    accepted = (fingerprint, *getattr(fingerprint, "earlier", ()))
    return stored in accepted or (not stored.startswith(FINGERPRINT_PREFIX) and digest(stored) in accepted)


def json_kind(value: Any) -> str:
    """What a JSON value is, in JSON's words: an array, a string, null, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    return f"a {type(value).__name__}"


def not_as_expected(expected: str, value: Any, kind: str | None = None) -> str:
    """'must be a number, not a string ("5")': what a field takes, and what JSON came instead (of `kind`, if
    JSON's own word for it would not say it), cut short."""
    return f"must be {expected}, not {kind or json_kind(value)} ({_shown(value)})"


def _shown(value: Any, width: int = 40) -> str:
    """`value` as JSON, cut to `width` characters. Encoded only as far as shown: a refused value may be most
    of a request's body."""
    given = ""
    for chunk in _ENCODER.iterencode(value):  # chunk by chunk, not the whole document first
        given += chunk
        if len(given) > width:
            return given[: width - 3] + "..."
    return given


def refusal(reason: str, *at: str | int) -> PydanticCustomError:
    """A check across a model's fields, refused at the field at fault rather than at the whole model.

    `at` is that field's place within the model; atf_core.errors adds it to the model's own place, so
    the API names, say, `links[2].after` and not the request's body.
    """
    return PydanticCustomError("value_error", "{reason}", {"reason": reason, "at": at})


def _a_json_object(value: Any) -> Any:
    # Checked before pydantic's own dict check, whose words ("a valid dictionary") are Python's, not JSON's.
    if not isinstance(value, Mapping):
        raise PydanticCustomError("payload_type", "must be a JSON object, not {kind}", {"kind": json_kind(value)})
    return value


def nested_too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether `value` nests objects and arrays more than `limit` levels deep ({"a": [1]} is 2). Walked
    without recursion: a value deep enough to refuse is deep enough to exhaust Python's stack."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, Mapping | list | tuple):
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, Mapping) else item))
    return False


# Validation context of a model read back from the table (a chain's or a schedule's spec): a check added since
# it was accepted must not make it unreadable.
STORED = {"stored": True}


def read_back(info: ValidationInfo) -> bool:
    """Whether the model being validated was read from the table (validated with context STORED)."""
    return isinstance(info.context, Mapping) and bool(info.context.get("stored"))


def _fits(payload: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
    if nested_too_deep(payload) and not read_back(info):
        raise PydanticCustomError(
            "payload_depth", "nests objects and arrays over the limit of {limit} levels", {"limit": MAX_JSON_DEPTH}
        )
    try:
        size = len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode())
    except (TypeError, ValueError) as error:  # a datetime, a set, NaN: nothing JSON can carry
        raise PydanticCustomError("payload_type", "must be JSON: {error}", {"error": str(error)}) from None
    if size > MAX_PAYLOAD_BYTES:
        raise PydanticCustomError(
            "payload_too_large",
            "{size} bytes as JSON, over the limit of {limit}",
            {"size": size, "limit": MAX_PAYLOAD_BYTES},
        )
    return payload


# A task's payload wherever a request carries one (a task, a schedule, a chain's link):
# a JSON object of at most MAX_PAYLOAD_BYTES as compact JSON. The error types name the
# API's codes: payload_type is a wrong_type, payload_too_large is itself.
Payload = Annotated[dict[str, Any], BeforeValidator(_a_json_object), AfterValidator(_fits)]


def _zoned(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise PydanticCustomError("timezone_aware", "needs a time zone offset (RFC 3339), e.g. 2026-01-01T00:00:00Z")
    try:
        moment.astimezone(UTC)
    except OverflowError:
        raise PydanticCustomError("datetime_range", "is outside the representable range of times") from None
    return moment


def _a_time(value: Any) -> Any:
    # pydantic's lax mode reads a number, or a string of one, as seconds since 1970: JSON carries a time as an
    # RFC 3339 string, and "1795740000" is not one.
    if isinstance(value, int | float):
        problem = not_as_expected("an RFC 3339 time (a string)", value)
    elif isinstance(value, str) and _a_number(value):
        problem = not_as_expected("an RFC 3339 time such as 2030-01-01T00:00:00Z", value, "a number in a string")
    else:
        return value
    raise PydanticCustomError("moment_type", "{problem}", {"problem": problem})


def _a_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# A moment a request names (a task's run_at and expire_at, a gate's until, a dead-letter window's
# ends): an RFC 3339 string (or a datetime, from Python) with its time zone, and one that can be taken to UTC.
Moment = Annotated[datetime, BeforeValidator(_a_time), AfterValidator(_zoned)]


# A request's numbers and flags as JSON gives them: "5" or true for a delay, 2.0 for a count or "yes" for a
# flag is a wrong_type, not read as 5, 1, 2 or True (pydantic's lax mode would convert them, and the task would
# be written with a value its caller never sent). A whole number is still a number. Times stay lax: JSON
# carries them as strings.
JsonInt = Annotated[int, Strict()]
# Not NaN nor an infinity: neither is a number JSON can carry, and NaN compares false with every bound.
JsonNumber = Annotated[float, Strict(), AllowInfNan(False)]
JsonBool = Annotated[bool, Strict()]

# An attempt's time limit wherever one is set (a lambda, a task, a chain's link, a periodic schedule).
TimeoutSeconds = Annotated[JsonNumber, Field(gt=0, le=MAX_TIMEOUT_SECONDS)]


# The error type of an attempt whose executor died or fell silent while running it: recorded by its host when it
# saw the executor's connection close, or by the consumer once the attempt's lease lapsed.
LOST_EXECUTION = "LostExecution"


class TaskError(BaseModel):
    """Why an attempt failed, kept on the task record."""

    model_config = ConfigDict(frozen=True)

    type: str
    message: str
    attempt: int
    at: datetime
    host: str | None = None


class Task(BaseModel):
    """A task as the store holds it; returned by every read."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    id: str
    lambda_: str = Field(alias="lambda")
    collection: str
    priority: str
    payload: dict[str, Any]
    status: TaskStatus
    attempt: int = Field(description="Executions started so far; the fencing token.")
    max_attempts: int
    scheduled_at: datetime
    created_at: datetime
    enqueued_at: datetime | None = None
    claimed_at: datetime | None = None
    claimed_by: str | None = Field(default=None, description="The executor (host:pid) that claimed the attempt.")
    first_claimed_at: datetime | None = Field(
        default=None, description="When its first attempt was claimed: claimed_at is the latest attempt's."
    )
    heartbeat_at: datetime | None = None
    finished_at: datetime | None = None
    last_error: TaskError | None = None
    errors: list[TaskError] = Field(
        default_factory=list,
        description=f"The first {MAX_KEPT_ERRORS} failed attempts' errors, oldest first (last_error is the latest).",
    )
    reason: str | None = Field(default=None, description="Why a task was dropped or cancelled.")
    key: str | None = None
    flow_key: str | None = Field(default=None, description="The flow-control key its lambda's key_limits apply to.")
    expire_at: datetime | None = None
    chain: str | None = Field(default=None, description="The chain this task is a link of.")
    timeout_seconds: float | None = Field(
        default=None, description="This task's time limit per attempt; none: its lambda's (timeout_seconds)."
    )
    result: Any = Field(default=None, description="What the successful attempt's callback returned (JSON).")
    traceparent: str | None = Field(default=None, description="The W3C trace context it was scheduled in.")
    next_at: datetime | None = Field(
        default=None,
        description="When the consumer next looks at it: while it waits, when it runs (a retry's time after a "
        "failure); none once it has ended.",
    )

    @property
    def start_lag_ms(self) -> int | None:
        """How late it started (see start_lag_ms); none until it has."""
        if self.first_claimed_at is None:
            return None
        return start_lag_ms(to_ms(self.scheduled_at), to_ms(self.first_claimed_at))

    def error_history(self) -> list[TaskError]:
        """The errors it keeps, oldest first: its first attempts', and its latest where that is past them."""
        latest = self.last_error
        past_them = latest is not None and (not self.errors or latest.attempt > self.errors[-1].attempt)
        return [*self.errors, latest] if past_them and latest is not None else list(self.errors)


class ScheduleRequest(BaseModel):
    """What a client asks for when it schedules a task.

    Checks that need no configuration live here; whether the lambda and
    priority exist is checked against the stack's configuration by
    `atf_core.tasks`.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    lambda_: str = Field(alias="lambda", pattern=NAME_PATTERN)
    payload: Payload = Field(default_factory=dict)
    collection: TaskCollection = "default"
    priority: str | None = Field(default=None, pattern=NAME_PATTERN)  # one of the lambda's: the frontend checks
    run_at: Moment | None = None
    delay_seconds: JsonNumber | None = Field(default=None, ge=0, le=MAX_SCHEDULE_AHEAD.total_seconds())
    key: str | None = Field(default=None, min_length=1, max_length=128)
    flow_key: str | None = Field(
        default=None,
        pattern=FLOW_KEY_PATTERN,
        description="Flow-control key (say, a customer id; a collection's rules: 1-64 of A-Z a-z 0-9 _ . : -): the "
        "lambda's key_limits cap each key's tasks apart, and due tasks are taken round-robin across keys. Not the "
        "idempotency key (key).",
    )
    on_conflict: OnConflict | None = Field(
        default=None,
        description="For a lambda whose key_limits set singleton, while another task with this flow_key waits or "
        "runs: refuse (the default; 409 flow_key_busy) or replace (that task, if not started, is cancelled).",
    )
    max_attempts: JsonInt | None = Field(default=None, ge=1, le=100)
    expire_at: Moment | None = Field(default=None, description="If not started by then, end as expired.")
    timeout_seconds: TimeoutSeconds | None = Field(
        default=None,
        description="Stop an attempt running longer than this (a retriable failure); default: the lambda's.",
    )
    traceparent: str | None = Field(
        default=None,
        pattern=TRACEPARENT_PATTERN,
        description="W3C trace context of the caller's span (the SDK sets it when OpenTelemetry is installed): "
        "the claim and each attempt are spans of that trace.",
    )

    @model_validator(mode="after")
    def _one_way_to_say_when(self) -> ScheduleRequest:
        if self.run_at is not None and self.delay_seconds is not None:
            raise refusal("give run_at or delay_seconds, not both", "delay_seconds")
        if self.on_conflict is not None and self.flow_key is None:
            raise refusal("on_conflict applies to a task with a flow_key", "on_conflict")
        return self

    def in_utc(self) -> ScheduleRequest:
        """The request with its times as UTC instants (itself where they are already): the offset a time is
        written with is not what the request asks for, so a repeat from another time zone is the same one."""
        times = {name: at.astimezone(UTC) for name in ("run_at", "expire_at") if (at := getattr(self, name))}
        if all(at.utcoffset() == getattr(self, name).utcoffset() for name, at in times.items()):
            return self
        return self.model_copy(update=times)

    def due_time(self, now: datetime) -> datetime:
        if self.run_at is not None:
            return self.run_at.astimezone(UTC)
        return now + timedelta(seconds=self.delay_seconds or 0)

    def fingerprint(self) -> str:
        """What makes two requests with one idempotency key the same request: a digest of `canonical()`."""
        return digest(self.canonical())

    def canonical(self) -> str:
        """The request as JSON, without what a repeat of it may change."""
        # The trace context is where a request was made from, not what it asks for: a retry from another span
        # is still the same request. So is one that would have replaced another holder of its flow key.
        body = self.model_dump(mode="json", by_alias=True, exclude={"key", "traceparent", "on_conflict"})
        return encode_payload(body)


# A gate's scope names its lambda and its collection, or every collection of the lambda.
ANY_COLLECTION = "*"


def gate_scope(lambda_name: str, collection: str | None) -> str:
    return f"{lambda_name}/{collection or ANY_COLLECTION}"


class GateAction(StrEnum):
    PAUSE = "pause"
    DROP = "drop"


class Gate(BaseModel):
    """A pause or drop on a lambda, or on one collection of a lambda."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    lambda_: str = Field(alias="lambda", pattern=NAME_PATTERN)
    collection: str | None = Field(default=None, pattern=COLLECTION_PATTERN)
    action: GateAction
    until: datetime | None = None
    reason: str = ""
    created_at: datetime

    def active(self, now: datetime) -> bool:
        return self.until is None or now < self.until

    @property
    def scope(self) -> str:
        return gate_scope(self.lambda_, self.collection)
