"""What every API verb of the CLI shares: the client, JSON or table output, error reporting, argument types."""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from atf_core.vocabulary import CatchUp, OnConflict, Overlap
from atf_sdk.extras import install_hint

if TYPE_CHECKING:
    from pydantic import TypeAdapter
    from rich.console import Console

    from atf_core.errors import AtfError
    from atf_sdk.client import AtfClient

Command = Callable[[argparse.Namespace], int]
T = TypeVar("T")

# The core's values that the verbs' options take or show in their help come from atf_core.vocabulary, which
# loads no model: every `atf` command, `atf --help` included, builds every verb's parser.
# As their values: argparse names a refused choice's options by their repr (<OnConflict.REFUSE: 'refuse'>).
ON_CONFLICT = tuple(choice.value for choice in OnConflict)
OVERLAP = tuple(choice.value for choice in Overlap)
CATCH_UP = tuple(choice.value for choice in CatchUp)


class Exit(IntEnum):
    """The CLI's exit statuses (docs/api.md), so a script can tell a typo from a missing task from an outage."""

    OK = 0
    FAILED = 1  # the verb ran and part of it failed: a batch item refused, a wait that ran out, an internal error
    USAGE = 2  # the arguments or the input: argparse's own status, and the API's 400 and 415
    NOT_FOUND = 3
    CONFLICT = 4  # the task, key, gate or schedule is not in a state that allows it
    REFUSED = 5  # no credentials, or credentials that may not do this
    UNAVAILABLE = 6  # throttled, unavailable or unreachable after the client's retries: try again later


_EXIT_BY_STATUS = {400: Exit.USAGE, 413: Exit.USAGE, 415: Exit.USAGE, 404: Exit.NOT_FOUND, 409: Exit.CONFLICT}
_EXIT_BY_STATUS |= {401: Exit.REFUSED, 403: Exit.REFUSED, 429: Exit.UNAVAILABLE}
_EXIT_BY_STATUS |= {502: Exit.UNAVAILABLE, 503: Exit.UNAVAILABLE, 504: Exit.UNAVAILABLE}


def exit_status(error: AtfError) -> Exit:
    return _EXIT_BY_STATUS.get(error.status, Exit.FAILED)


# A task's own refusal (not found, not in a state that allows it): a verb given several ids goes on with the
# others. Any other error (credentials, an outage, the input) would be every id's, and ends the verb.
_ONE_TASKS = (404, 409)


def each_id(
    ids: list[str], act: Callable[[str], T], advance: Callable[[int], None] = lambda _: None
) -> tuple[list[T], list[tuple[str, AtfError]]]:
    """`act` on every id, in order: what it gave, and the ids whose task refused it, with why. One id is no
    exception: its refusal is reported as any of several is, so --json prints a list and an error with its id
    whatever the number of ids (report_refused gives it its own exit status)."""
    from atf_core.errors import AtfError

    done, failed = [], []
    for one in ids:
        try:
            done.append(act(one))
        except AtfError as error:
            if error.status not in _ONE_TASKS:
                raise
            failed.append((one, error))
        advance(1)
    return done, failed


def report_refused(args: argparse.Namespace, failed: list[tuple[str, AtfError]], done: int) -> Exit:
    """Each refused id a line on stderr (an object with --json); the exit status: OK if none was refused, that
    error's own if every id was refused for the same, else FAILED (part of it failed)."""
    for one, error in failed:
        body = {"id": one, **error.to_dict()}
        line = json.dumps(body) if getattr(args, "json", False) else f"atf: {one}: {body['code']}: {body['message']}"
        print(line, file=sys.stderr)
    if not failed:
        return Exit.OK
    statuses = {exit_status(error) for _, error in failed}
    return statuses.pop() if not done and len(statuses) == 1 else Exit.FAILED


def usage(message: str) -> NoReturn:
    """A mistake in how the verb was called: one line on stderr and exit status 2, as argparse does."""
    print(message, file=sys.stderr)
    sys.exit(Exit.USAGE)


def client(args: argparse.Namespace) -> AtfClient:
    from atf_core.errors import InputError
    from atf_sdk.client import API_URL_ENV, AtfClient

    endpoint = args.api_url or os.environ.get(API_URL_ENV)
    if not endpoint:  # refused as the API refuses input: one line, or its error object with --json (exit 2)
        raise InputError(f"set {API_URL_ENV} or pass --api-url (the local stack: http://127.0.0.1:8080)", "api_url")
    timeout = getattr(args, "api_timeout", None)
    return AtfClient(endpoint, region=args.region, **({"timeout_s": timeout} if timeout is not None else {}))


def json_out(value: Any) -> None:
    print(json.dumps(plain(value), indent=None if isinstance(value, list) else 2, sort_keys=False))


def plain(value: Any) -> Any:
    """Models (and the core's dataclasses) as the JSON the API sends."""
    from dataclasses import is_dataclass

    from pydantic import BaseModel, TypeAdapter

    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if is_dataclass(value) and not isinstance(value, type):
        return TypeAdapter(type(value)).dump_python(value, mode="json")
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


# Wide enough for any row a verb prints: a pipe or a file has no width, and rich would assume 80 columns.
UNBOUNDED_WIDTH = 1000


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() or os.environ.get("COLUMNS") else UNBOUNDED_WIDTH
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=width)


def when(moment: datetime | None, timespec: str = "seconds") -> str:
    return moment.isoformat(timespec=timespec).replace("+00:00", "Z") if moment else "-"


def guarded(run: Command) -> Command:
    """API and input errors as one line (or a JSON object with --json) and the exit status of their kind."""

    def guarded_run(args: argparse.Namespace) -> int:
        from pydantic import ValidationError

        from atf_core.errors import AtfError, input_error

        notes: list[str] = []  # what the verb had done before the error
        if not getattr(args, "json", False) and importlib.util.find_spec("rich") is None:
            # Said before the verb acts: one that did its work and then could not print it would look failed.
            hint = install_hint("rich", f"atf {getattr(args, 'verb', '')}".rstrip())
            sys.exit(f"{hint}, or add --json")
        try:
            return run(args)
        except AtfError as error:
            body, status, notes = error.to_dict(), exit_status(error), getattr(error, "__notes__", [])
        except ValidationError as error:  # a model the verb checks itself, named as the API would
            body, status = input_error(error).to_dict(), Exit.USAGE
        if getattr(args, "json", False):  # `python -m atf_sdk.top` has no --json at all
            print(json.dumps(body), file=sys.stderr)
        else:
            where = f" ({body['field']})" if body.get("field") else ""
            print(f"atf: {body['code']}: {body['message']}{where}", file=sys.stderr)
            for note in notes:
                print(f"atf: {note}", file=sys.stderr)
        return status

    return guarded_run


def at_least_one(text: str) -> int:
    """A count of things to start (processes, threads): 0 would start none and still look healthy."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not 1 or more")
    return value


def wait_seconds(text: str) -> float:
    """How long a verb waits for an outcome: 0 is not to wait."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value < float("inf"):  # NaN too
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds, 0 or more")
    return value


def positive_seconds(text: str) -> float:
    """A time limit: 0 would allow nothing."""
    value = wait_seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError("0 seconds would allow no time at all")
    return value


def json_object(text: str) -> dict[str, Any]:
    from atf_core.schema import NameGivenTwice, decode_json

    try:
        value = decode_json(text)  # as the API reads it: NaN, or a name given twice, is refused
    except NameGivenTwice as twice:
        raise argparse.ArgumentTypeError(f"not JSON: {twice.msg}") from None
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error}") from None
    if not isinstance(value, dict):
        from atf_core.schema import json_kind

        raise argparse.ArgumentTypeError(f"must be a JSON object, not {json_kind(value)}")
    return value


def given_once(line: str, within: str) -> None:
    """MalformedJson naming the place within `within` where an object of the line gives a name twice, as the
    API refuses it (pydantic's reader, which checks the rest as the API does, keeps the last silently)."""
    from atf_core.errors import MalformedJson
    from atf_core.schema import NameGivenTwice, decode_json

    try:
        decode_json(line)
    except NameGivenTwice as twice:
        raise MalformedJson.given_twice(twice, "the line", (within,)) from None
    except ValueError:
        return  # not JSON: the model's reader says what is wrong


def json_file(path: str) -> dict[str, Any]:
    """A JSON object from a file, or from stdin for '-'."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {error.strerror}") from None
    return json_object(text)


def moment(text: str) -> datetime:
    """An RFC 3339 time with its offset, read by the API's own rules (atf_core.schema.Moment): one without an
    offset, or a number, is refused here as the API would refuse it. Read as UTC, a time without an offset
    would be hours off for whoever typed their own clock's time."""
    from pydantic import ValidationError

    try:
        return _moment_type().validate_python(text)
    except ValidationError as refused:
        raise argparse.ArgumentTypeError(f"{text!r}: {refused.errors()[0]['msg']}") from None


@functools.cache
def _moment_type() -> TypeAdapter[datetime]:
    from pydantic import TypeAdapter

    from atf_core.schema import Moment

    return TypeAdapter(Moment)


def common(*, where: str = "verb") -> argparse.ArgumentParser:
    """The options every API verb takes, before the verb (where="atf") or after it. After it they default to
    nothing at all, so that a subcommand's parse does not reset what was given before the verb."""
    parent = argparse.ArgumentParser(add_help=False)
    unset: dict[str, Any] = {"default": argparse.SUPPRESS} if where == "verb" else {}
    parent.add_argument("--json", action="store_true", help="print JSON instead of tables", **unset)
    parent.add_argument("--api-url", help="the API's URL (default: $ATF_API_URL)", **unset)
    parent.add_argument("--region", help="region to sign for (default: from the URL or boto3's configuration)", **unset)
    parent.add_argument(
        "--api-timeout", type=positive_seconds, metavar="SECONDS",
        help="wait this long for each answer of the API, and retry within 60 s (default: 30)",
        **unset,
    )  # fmt: skip
    return parent


def confirmed(args: argparse.Namespace, question: str) -> bool:
    """Whether a destructive verb may go on: --yes, or a "y" typed at the terminal. With no terminal to ask
    and no --yes it stops (exit status 2, the error object with --json) rather than guess."""
    from atf_core.errors import InputError

    if args.yes:
        return True
    if not sys.stdin.isatty():
        raise InputError(f"{question} - no terminal to ask: add --yes to go ahead", "yes")
    answer = input(f"{question} [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def add_lambda(verb: argparse.ArgumentParser) -> None:
    """--lambda: call the lambda's own route (all a principal granted only that lambda may call); without
    it, the all-lambdas route. Something of another lambda is then not found."""
    verb.add_argument("--lambda", dest="lambda_name", metavar="LAMBDA", help="the lambda it belongs to")


def add_yes(verb: argparse.ArgumentParser) -> None:
    verb.add_argument("-y", "--yes", action="store_true", help="do it without asking")


@contextmanager
def progress(label: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """A bar on stderr while a long verb runs (a spinner when the total is unknown), gone when it ends. Gives the
    function that advances it. With no terminal there, no bar: rich would still end it with an empty line."""
    if not sys.stderr.isatty() or importlib.util.find_spec("rich") is None:  # --json needs no extra
        yield lambda _: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)
