"""State writes and sends as the wire shows them, recorded for the checker and the benchmarks.

Attached to a boto3 client as botocore event hooks, from outside the framework:
each UpdateItem that moves a task (the store's conditional write of a lifecycle
transition) is recorded with how it ended, each task message a
SendMessageBatch delivered as sent, and each one a receive returned as
received. The request is read back with the store's own vocabulary
(atf_core.definitions' attribute names, the lifecycle's transitions, the codec
for items), so a record says what the framework did, in its words:

    write  task, transition, attempt (the one the write is fenced by), writer (its
           token), result (applied | rejected | error), reconciled (a retry that
           found its own earlier write), status and current_attempt (the task after
           the write, or as it stood when the write was refused)
    sent     task, attempt (of the message)
    received task, attempt (of a message a receive returned, to a worker host's controller)

A write is recorded once its call has ended, after botocore's retries, as the
framework sees its result. The store names a transition's target status
`:target` and its writer token `:w`; the transition itself is the one of the
lifecycle with that target, those source statuses and that index effect. Two
pairs share all three, a consumer's recovery of a stuck task and an executor's
result (exhaust and fail_fatal, exhaust_to_dead_letter and fail_to_dead_letter):
a recovery is guarded by the timestamp the consumer watched stay unchanged
(`:o_<attr>`), a result never is. tests/faults/test_wire.py writes every
transition through the store and checks that each is read back as itself.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from atf_core import lifecycle
from atf_core.definitions import Attr
from atf_core.lifecycle import IndexEffect, Transition
from atf_core.queues import TaskMessage
from atf_core.schema import TaskStatus
from atf_core.store import codec
from atf_local.instruments.history import History

log = logging.getLogger("atf.instruments")
_PARAMS = "atf_wire_params"  # where the request waits in botocore's per-call context for the answer
# The consumer's recoveries of a stuck task: the only writes guarded by a stamp it observed.
RECOVERIES = frozenset({lifecycle.REQUEUE.name, lifecycle.EXHAUST.name, lifecycle.EXHAUST_TO_DEAD_LETTER.name})


def transition_of(params: Mapping[str, Any]) -> Transition | None:
    """The lifecycle transition an UpdateItem applies, or None for an update that moves no task."""
    values: Mapping[str, Any] = params.get("ExpressionAttributeValues") or {}
    if ":target" not in values:
        return None  # gates, schedules, chains, limits: items that are not tasks
    names = set((params.get("ExpressionAttributeNames") or {}).values())
    target = TaskStatus(values[":target"]["S"])
    sources = frozenset(TaskStatus(v["S"]) for k, v in values.items() if k.startswith(":from"))
    index = IndexEffect.MOVE if ":pk" in values else IndexEffect.REMOVE if Attr.INDEX_PK in names else IndexEffect.KEEP
    found = [t for t in lifecycle.TRANSITIONS if (t.target, t.sources, t.index) == (target, sources, index)]
    if len(found) > 1:
        guarded = any(key.startswith(":o_") for key in values)
        found = [t for t in found if (t.name in RECOVERIES) == guarded]
    return found[0] if len(found) == 1 else None


class WireRecorder:
    """Records the state writes and sends of the clients it is attached to."""

    def __init__(self, history: History) -> None:
        self._history = history

    def attach(self, client: Any) -> None:
        events = client.meta.events
        service = client.meta.service_model.service_id.hyphenize()
        if service == "dynamodb":
            events.register("before-parameter-build.dynamodb.UpdateItem", _remember)
            # last: an injected exit after the call ends the process before the write is recorded, as the
            # framework itself never learns of it
            events.register_last("after-call.dynamodb.UpdateItem", self._written)
            events.register_last("after-call-error.dynamodb.UpdateItem", self._failed)
        elif service == "sqs":
            events.register("before-parameter-build.sqs.SendMessageBatch", _remember)
            events.register_last("after-call.sqs.SendMessageBatch", self._sent)
            events.register_last("after-call.sqs.ReceiveMessage", self._received)

    def _written(self, parsed: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
        self._guarded(self._write, context, parsed=parsed)

    def _failed(self, exception: BaseException, context: dict[str, Any], **_: Any) -> None:
        self._guarded(self._write, context, error=type(exception).__name__)

    def _sent(self, parsed: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
        self._guarded(self._messages, context, parsed=parsed)

    def _received(self, parsed: Mapping[str, Any], **_: Any) -> None:
        try:
            for message in parsed.get("Messages") or []:
                task = TaskMessage.decode(message["Body"])
                self._history.record("received", task=task.task_id, attempt=task.attempt)
        except Exception:
            log.exception("recording a receive failed")

    def _guarded(self, record: Any, context: dict[str, Any], **answer: Any) -> None:
        """A recorder that fails must not fail the framework's call: it logs, and the record is missing."""
        params = context.get(_PARAMS)
        if params is None:
            return
        try:
            record(params, **answer)
        except Exception:
            log.exception("recording %s failed", sorted(answer))

    def _write(self, params: Mapping[str, Any], parsed: Mapping[str, Any] | None = None, error: str = "") -> None:
        transition = transition_of(params)
        if transition is None:
            return
        values = params["ExpressionAttributeValues"]
        writer = values[":w"]["S"]
        attempt = int(values[":attempt"]["N"]) if ":attempt" in values else None
        fields = {"task": params["Key"][Attr.ID]["S"], "transition": transition.name, "attempt": attempt}
        fields["writer"] = writer
        if f":{Attr.ERROR}" in values:  # a loss the host recorded is told from a failure the callback asked a retry for
            written = codec.from_item({Attr.ERROR: values[f":{Attr.ERROR}"]})[Attr.ERROR]
            fields["error_type"] = codec.error_type_of(written)
        code = str(((parsed or {}).get("Error") or {}).get("Code", ""))
        if error or (code and code != "ConditionalCheckFailedException"):
            self._history.record("write", **fields, result="error", error=error or code)
            return
        item = (parsed or {}).get("Item" if code else "Attributes") or {}
        task = codec.item_to_task(item) if Attr.STATUS in item else None
        reconciled = bool(code) and task is not None and _writer_of(item) == writer and task.status is transition.target
        self._history.record(
            "write",
            **fields,
            result="applied" if not code or reconciled else "rejected",
            reconciled=reconciled,
            status=task.status.value if task else None,
            current_attempt=task.attempt if task else None,
        )

    def _messages(self, params: Mapping[str, Any], parsed: Mapping[str, Any]) -> None:
        delivered = {str(entry["Id"]) for entry in parsed.get("Successful") or []}
        for entry in params.get("Entries") or []:
            if str(entry["Id"]) in delivered:
                message = TaskMessage.decode(entry["MessageBody"])
                self._history.record("sent", task=message.task_id, attempt=message.attempt)


def _remember(params: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
    context[_PARAMS] = params


def _writer_of(item: Mapping[str, Any]) -> Any:
    return codec.from_item({Attr.WRITER: item[Attr.WRITER]}).get(Attr.WRITER) if Attr.WRITER in item else None
