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


def extra_for(missing: ModuleNotFoundError) -> str | None:
    """The extra that would have installed the module this import could not find, if it is one of ours."""
    top = (missing.name or "").split(".")[0]
    return EXTRA_OF_MODULE.get(top)


def install_hint(missing: ModuleNotFoundError, what: str) -> str:
    extra = extra_for(missing)
    if extra is None:
        return f"{what} cannot import {missing.name}: {missing}"
    return f"{what} needs atf-sdk's {extra!r} extra (no module {missing.name!r}): pip install 'atf-sdk[{extra}]'"


def needs_extra(missing: ModuleNotFoundError, what: str) -> ModuleNotFoundError:
    """The error to raise instead: the same kind (so `except ImportError` still catches it), one line that
    names the extra to install."""
    return ModuleNotFoundError(install_hint(missing, what), name=missing.name)
