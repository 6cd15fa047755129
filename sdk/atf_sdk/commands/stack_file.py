"""The stack configuration a command is given: its --config file, else the process's ATF_CONFIG / ATF_CONFIG_FILE.

The --config file is a stack configuration, or one of the CDK app's environment files
(infra/environments/<env>.json), whose `config` is the stack configuration every deployed process is given.
ATF_CONFIG and ATF_CONFIG_FILE hold a stack configuration alone, as the deployed processes read them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from atf_sdk.commands.support import usage

if TYPE_CHECKING:  # imported as a command runs: the CLI's parser is built without pydantic
    from atf_core.config import StackConfig

CONFIG_HELP = (
    "stack configuration file, or an environment file of infra/environments "
    "(default: $ATF_CONFIG, a stack configuration's JSON, else the file $ATF_CONFIG_FILE names)"
)
# The keys that tell an environment file from a stack configuration, which has neither
ENVIRONMENT_KEYS = frozenset({"environment", "config"})


def stack_config(path: Path | None, verb: str) -> StackConfig | None:
    """The configuration, or None where neither --config nor the environment gives one; where it does not read,
    one line (`atf VERB: ...`) naming the file and the field, and exit status 2, as a wrong argument."""
    from pydantic import ValidationError

    from atf_core.config import StackConfig

    where, within = str(path) if path else "ATF_CONFIG / ATF_CONFIG_FILE", ""
    try:
        if path is None:
            return StackConfig.from_env()
        document, within = _stack_part(json.loads(path.read_text()))
        return StackConfig.model_validate(document)
    except RuntimeError:
        return None
    except OSError as error:
        usage(f"atf {verb}: cannot read the configuration {where}: {error.strerror or error}")
    except ValueError as error:  # invalid JSON, or a field pydantic refuses
        if isinstance(error, ValidationError):
            problem = error.errors()[0]
            field = (within + ".".join(str(part) for part in problem["loc"])).rstrip(".") or "configuration"
            usage(f"atf {verb}: configuration {where}: {field}: {problem['msg']}")
        usage(f"atf {verb}: configuration {where} is not valid JSON: {error}")


def _stack_part(document: object) -> tuple[object, str]:
    """The stack configuration in a file's JSON, and where it sits (a prefix for the fields it names)."""
    if isinstance(document, dict) and document.keys() >= ENVIRONMENT_KEYS:
        return document["config"], "config."
    return document, ""
