"""What every API verb of the CLI shares: the client, JSON or table output, error reporting, argument types."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atf_core.errors import AtfError, input_error
from atf_core.schema import json_kind

if TYPE_CHECKING:
    from rich.console import Console

    from atf_sdk.client import AtfClient

Command = Callable[[argparse.Namespace], int]


def client(args: argparse.Namespace) -> AtfClient:
    from atf_sdk.client import API_URL_ENV, AtfClient

    endpoint = args.api_url or os.environ.get(API_URL_ENV)
    if not endpoint:
        raise SystemExit(f"atf: set {API_URL_ENV} or pass --api-url (the local stack: http://127.0.0.1:8080)")
    return AtfClient(endpoint, region=args.region)


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


def when(moment: datetime | None) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z") if moment else "-"


def guarded(run: Command) -> Command:
    """API and input errors as one line (or a JSON object with --json) and exit status 1."""

    def guarded_run(args: argparse.Namespace) -> int:
        from pydantic import ValidationError

        try:
            return run(args)
        except AtfError as error:
            body = error.to_dict()
        except ValidationError as error:  # a model the verb checks itself, named as the API would
            body = input_error(error).to_dict()
        if args.json:
            print(json.dumps(body), file=sys.stderr)
        else:
            where = f" ({body['field']})" if body.get("field") else ""
            print(f"atf: {body['code']}: {body['message']}{where}", file=sys.stderr)
        return 1

    return guarded_run


def json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, not {json_kind(value)}")
    return value


def json_file(path: str) -> dict[str, Any]:
    """A JSON object from a file, or from stdin for '-'."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {error.strerror}") from None
    return json_object(text)


def moment(text: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not an RFC 3339 time: {error}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def common() -> argparse.ArgumentParser:
    """The options every API verb takes."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parent.add_argument("--api-url", help="the API's URL (default: $ATF_API_URL)")
    parent.add_argument("--region", help="region to sign for (default: from the URL or boto3's configuration)")
    return parent
