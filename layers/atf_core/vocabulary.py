"""The API's words and bounds that need no model, defined once: the core validates with them, and the CLI
offers them in its options' choices and help, which every `atf` command builds whole, without loading the
core's pydantic models or boto3 (tests/unit/test_cli_startup.py)."""

from __future__ import annotations

from enum import StrEnum

# The lambdas (comma-separated) a worker host serves by default; the CDK app sets it on each worker service.
LAMBDA_ENV = "ATF_LAMBDA"
MAX_BULK = 1000  # a bulk change writes each task it selects, inside API Gateway's 29 s
MAX_UPCOMING = 100  # the next occurrences a schedule's view may list
MAX_DEAD_LETTER_ACTION = 1000  # a redrive or discard writes each task it selects, inside API Gateway's 29 s
MAX_CHOSEN_DEAD_LETTERS = 100  # dead letters a redrive or discard names by id: one BatchGetItem reads them


class OnConflict(StrEnum):
    """What a new task does when its flow key is held (the lambda's key_limits.singleton)."""

    REFUSE = "refuse"  # it is refused (409 flow_key_busy), naming the task that holds the key
    REPLACE = "replace"  # the holder, if not started, is cancelled and the new task takes the key


class Overlap(StrEnum):
    """What a periodic schedule does when its previous task still runs."""

    SKIP = "skip"
    ALLOW = "allow"


class CatchUp(StrEnum):
    """What a periodic schedule fires for the occurrences it missed (downtime, a pause)."""

    SKIP = "skip"
    ONCE = "once"
    ALL = "all"
