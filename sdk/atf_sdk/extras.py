"""The optional parts of atf-sdk and the extra that installs each, so a missing one is named in one line.

`pip install atf-sdk` is the client and its models; a worker host needs `atf-sdk[worker]`, the CLI's
tables `atf-sdk[cli]`, the asyncio client `atf-sdk[async]`, the pytest plugin's stack `atf-sdk[testing]`.
"""

from __future__ import annotations

# The top-level module each extra brings, by the extra's name.
EXTRA_OF_MODULE = {
    "aws_lambda_powertools": "worker",
    "rich": "cli",
    "shtab": "cli",
    "httpx": "async",
    "anyio": "async",
    "atf_local": "testing",
    "moto": "testing",
}


def extra_for(module: str | None) -> str | None:
    """The extra that installs `module` (a dotted name, as ModuleNotFoundError.name gives it), if one of ours."""
    return EXTRA_OF_MODULE.get((module or "").split(".")[0])


def install_hint(module: str | None, what: str) -> str:
    """One line saying that `what` needs `module`, and the extra to install when it is one of ours."""
    extra = extra_for(module)
    if extra is None:
        return f"{what} cannot import {module!r}"
    return f"{what} needs atf-sdk's {extra!r} extra (no module {module!r}): pip install 'atf-sdk[{extra}]'"


def needs_extra(missing: ModuleNotFoundError, what: str) -> ModuleNotFoundError:
    """The error to raise instead: the same kind (so `except ImportError` still catches it), one line that
    names the extra to install."""
    return ModuleNotFoundError(install_hint(missing.name, what), name=missing.name)
