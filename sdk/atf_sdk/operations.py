"""The client's calls for dead letters, periodic schedules and chains, mixed into AtfClient.

Results are the core's own types (DeadLetter, Selection, Schedule, ChainView,
...), read back from JSON with pydantic, so a caller holds exactly what the
server's core returned. Input checked here before sending is refused with the
errors the API would answer (atf_core.errors, naming the field), never
pydantic's own ValidationError.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

from pydantic import BaseModel, TypeAdapter, ValidationError

from atf_core.api import (
    MAX_DEAD_LETTER_ACTION,
    DeadLetterList,
    DeadLetterSelection,
    RedriveRequest,
    ScheduleList,
    ScheduleView,
)
from atf_core.chains import ChainSpec, ChainView
from atf_core.deadletters import DeadLetter, Selection
from atf_core.errors import input_error
from atf_core.periodic import Schedule, ScheduleSpec

_SELECTION = TypeAdapter(Selection)
Model = TypeVar("Model", bound=BaseModel)


def checked(model: type[Model], value: Model | Any, within: str | None = None) -> Model:
    """`value` as `model` (a model given as one is taken as it is); bad input raises the
    atf_core.errors class the API would answer, with the field (inside `within`, e.g. tasks[3])."""
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValidationError as error:
        raise input_error(error, within) from None


def segment(value: str) -> str:
    # Valid ids, lambdas and collections need no escaping (":" is allowed in a path segment);
    # anything else is escaped so it stays one segment and the server refuses it, naming it.
    return quote(str(value), safe=":")


def with_query(path: str, params: dict[str, Any]) -> str:
    given = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in params.items() if v is not None}
    return f"{path}?{urlencode(given)}" if given else path


class Calls:
    """What the mixins need of the client: one signed call, retried as the client retries."""

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        raise NotImplementedError


class DeadLetterCalls(Calls):
    def dead_letters(
        self,
        lambda_name: str,
        *,
        collection: str | None = None,
        error_type: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 100,
    ) -> list[DeadLetter]:
        """A lambda's dead letters, oldest first; each task's errors are on client.get(id).errors."""
        filters = {"collection": collection, "error_type": error_type, "since": since, "until": until, "limit": limit}
        path = with_query(f"/v1/lambdas/{segment(lambda_name)}/dead-letters", filters)
        return DeadLetterList.model_validate(self._call("GET", path)).dead_letters

    def redrive(
        self,
        lambda_name: str,
        *,
        collection: str | None = None,
        error_type: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = MAX_DEAD_LETTER_ACTION,
        dry_run: bool = False,
        per_second: float | None = None,
        budget: int | None = None,
    ) -> Selection:
        """Back to new with `budget` more attempts each (default: the lambda's max_attempts), the n-th
        starting n / per_second seconds from now; the oldest `limit` (at most 1000) of the selection."""
        filters = {"collection": collection, "error_type": error_type, "since": since, "until": until, "limit": limit}
        fields = {**filters, "dry_run": dry_run, "per_second": per_second, "budget": budget}
        return self._select(lambda_name, "redrive", checked(RedriveRequest, fields))

    def discard(
        self,
        lambda_name: str,
        *,
        collection: str | None = None,
        error_type: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = MAX_DEAD_LETTER_ACTION,
        dry_run: bool = False,
    ) -> Selection:
        """End the selected dead letters as fatal_failure."""
        filters = {"collection": collection, "error_type": error_type, "since": since, "until": until, "limit": limit}
        return self._select(lambda_name, "discard", checked(DeadLetterSelection, {**filters, "dry_run": dry_run}))

    def _select(self, lambda_name: str, action: str, request: DeadLetterSelection) -> Selection:
        body = request.model_dump(mode="json", exclude_none=True)
        return _SELECTION.validate_python(
            self._call("POST", f"/v1/lambdas/{segment(lambda_name)}/dead-letters/{action}", body)
        )


class ScheduleCalls(Calls):
    def put_schedule(self, name: str, spec: ScheduleSpec | dict[str, Any]) -> Schedule:
        """Create or replace a schedule (a dict is checked as a ScheduleSpec first)."""
        body = checked(ScheduleSpec, spec).model_dump(mode="json", by_alias=True, exclude_none=True)
        return Schedule.model_validate(self._call("PUT", f"/v1/schedules/{segment(name)}", body))

    def schedules(self, lambda_name: str | None = None) -> list[Schedule]:
        reply = self._call("GET", with_query("/v1/schedules", {"lambda": lambda_name}))
        return ScheduleList.model_validate(reply).schedules

    def get_schedule(self, name: str, upcoming: int = 5) -> ScheduleView:
        """The schedule with its next `upcoming` occurrences (none while paused)."""
        path = with_query(f"/v1/schedules/{segment(name)}", {"upcoming": upcoming})
        return ScheduleView.model_validate(self._call("GET", path))

    def delete_schedule(self, name: str) -> None:
        self._call("DELETE", f"/v1/schedules/{segment(name)}")

    # Pausing takes no fields, but an empty object keeps the POST acceptable to API
    # Gateway's body validation (every POST there is checked as a JSON object).
    def pause_schedule(self, name: str) -> Schedule:
        return Schedule.model_validate(self._call("POST", f"/v1/schedules/{segment(name)}/pause", {}))

    def resume_schedule(self, name: str) -> Schedule:
        """Resume from the next occurrence; what fell due while paused follows the catch-up policy."""
        return Schedule.model_validate(self._call("POST", f"/v1/schedules/{segment(name)}/resume", {}))


class ChainCalls(Calls):
    def create_chain(self, spec: ChainSpec | dict[str, Any]) -> ChainView:
        """Create a chain; one without a key gets one here, so a retried request finds its chain."""
        chain = checked(ChainSpec, spec)
        if chain.key is None:
            chain = chain.model_copy(update={"key": uuid.uuid4().hex})
        body = chain.model_dump(mode="json", by_alias=True, exclude_none=True)
        return ChainView.model_validate(self._call("POST", "/v1/chains", body))

    def get_chain(self, chain_id: str) -> ChainView:
        return ChainView.model_validate(self._call("GET", f"/v1/chains/{segment(chain_id)}"))

    def cancel_chain(self, chain_id: str) -> ChainView:
        """Cancel the links not started; running links finish."""
        return ChainView.model_validate(self._call("DELETE", f"/v1/chains/{segment(chain_id)}"))

    def retry_link(self, chain_id: str, link: str, budget: int | None = None) -> ChainView:
        """Run a dead-letter link again (Conflict for a link in any other state); its chain then carries on."""
        path = f"/v1/chains/{segment(chain_id)}/links/{segment(link)}/retry"
        return ChainView.model_validate(self._call("POST", path, {} if budget is None else {"budget": budget}))
