"""POST /v1/tasks/batch: check every task, then write them all, each with its own result.

Nothing is written unless the whole batch is valid, so a bad item never
leaves its neighbours half scheduled (and `dry_run` only checks). Once writing starts, each item stands
alone: a reused key is that item's 409, a throttled write that item's 503
(the SDK resends only those, safe because every item has a key).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from botocore.exceptions import BotoCoreError, ClientError

from atf_core.api import BatchItem, BatchRequest, BatchResult, ErrorBody, ScheduledTask
from atf_core.config import StackConfig
from atf_core.errors import AtfError, Conflict, Unavailable
from atf_core.schema import ScheduleRequest, from_ms, to_ms
from atf_core.store.base import CreateResult
from atf_core.tasks import Scheduling, build_task, fingerprint_of, task_id_for
from functions.frontend.errors import from_client_error

# Writes are independent conditional puts: a few at a time keep a batch of
# 100 well inside API Gateway's 29 s even when DynamoDB is slow.
WRITERS = 16


def scheduled(result: CreateResult) -> ScheduledTask:
    task = result.task
    run_at = from_ms(to_ms(task.scheduled_at))  # as stored, so a replay answers the same time
    return ScheduledTask(
        id=task.id,
        status=task.status,
        run_at=run_at,
        key=task.key,
        created=result.created,
        replaced=result.replaced,
        debounced=result.debounced,
    )


def validate(config: StackConfig, tasks: list[ScheduleRequest], now: datetime) -> dict[str, int]:
    """Raise the first problem, naming the item; map each task id to the first item that writes it."""
    first: dict[str, int] = {}
    for index, request in enumerate(tasks):
        try:
            build_task(config, request, now)
        except AtfError as error:
            raise type(error)(error.message, f"tasks[{index}]" + (f".{error.field}" if error.field else "")) from None
        if request.key is None:
            continue
        task_id = task_id_for(request.lambda_, request.key)
        if task_id not in first:
            first[task_id] = index
        elif fingerprint_of(config, tasks[first[task_id]]) != fingerprint_of(config, request):
            raise Conflict(
                f"tasks[{first[task_id]}] and tasks[{index}] use key {request.key!r} differently", f"tasks[{index}].key"
            )
    return first


def schedule_batch(scheduling: Scheduling, config: StackConfig, batch: BatchRequest, now: datetime) -> BatchResult:
    first = validate(config, batch.tasks, now)
    if batch.dry_run:
        return BatchResult(results=[])
    tasks = batch.tasks
    leader_of = [i if r.key is None else first[task_id_for(r.lambda_, r.key)] for i, r in enumerate(tasks)]
    leaders = [i for i, leader in enumerate(leader_of) if leader == i]
    lines = _lines(config, tasks, leaders)
    with ThreadPoolExecutor(max_workers=min(WRITERS, len(lines))) as pool:
        outcomes = pool.map(lambda line: [(i, _write(scheduling, i, tasks[i], now)) for i in line], lines)
        written = {i: item for line in outcomes for i, item in line}
    return BatchResult(results=[written.get(i) or _repeat(written[leader_of[i]], i) for i in range(len(tasks))])


def _lines(config: StackConfig, tasks: list[ScheduleRequest], leaders: list[int]) -> list[list[int]]:
    """The items to write, in lines written in parallel. Those of one flow key that its lambda makes a
    singleton or debounces share a line, in the batch's order: the first takes the key and the next is
    refused or replaces it, or the burst's last payload is the batch's last, as sent one by one."""
    lines: dict[object, list[int]] = {}
    for index in leaders:
        request = tasks[index]
        limits = config.lambdas[request.lambda_].key_limits  # the lambda exists: validate() checked
        in_turn = request.flow_key is not None and limits is not None and limits.act_when_scheduled
        lines.setdefault((request.lambda_, request.flow_key) if in_turn else index, []).append(index)
    return list(lines.values())


def _repeat(leader: BatchItem, index: int) -> BatchItem:
    """A repeat of an earlier item of the same batch: the same task, not created again."""
    if leader.task is None:
        return leader.model_copy(update={"index": index})
    task = leader.task.model_copy(update={"created": False})
    return leader.model_copy(update={"index": index, "task": task, "status": 200})


def _write(scheduling: Scheduling, index: int, request: ScheduleRequest, now: datetime) -> BatchItem:
    try:
        result = scheduling.schedule(request, now)
    except AtfError as error:
        return BatchItem(index=index, status=error.status, error=_body(error))
    except ClientError as error:
        failure = from_client_error(error)
        return BatchItem(index=index, status=failure.status, error=_body(failure))
    except BotoCoreError as error:  # a read timeout, a closed connection: this item's 503, not the batch's 502
        failure = Unavailable(f"the task store did not answer: {type(error).__name__}; retry this item")
        return BatchItem(index=index, status=failure.status, error=_body(failure))
    return BatchItem(index=index, status=201 if result.created else 200, task=scheduled(result))


def _body(error: AtfError) -> ErrorBody:
    return ErrorBody(code=error.code, message=error.message, field=error.field)
