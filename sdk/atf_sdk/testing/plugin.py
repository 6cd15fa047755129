"""pytest fixtures for a team's integration tests: the local stack, clients of its API, a worker host.

pytest loads this plugin wherever atf-sdk is installed (entry point `atf` in the group pytest11;
`-p no:atf` turns it off). It starts nothing by itself: the stack starts, once per test session, when
the first test asks for one of its fixtures, and stops at the end of the session. Say which stack and
which lambdas in your pytest configuration (paths relative to its file), or override the fixtures
`atf_config` and `atf_lambdas` in a conftest.py:

    [tool.pytest.ini_options]
    atf_config = "stack.json"               # the stack configuration the local stack serves
    atf_lambdas = "shop.lambdas:lambdas"    # the Lambdas the worker host runs

Fixtures: `atf_stack` (a RunningStack: api_url, aws_endpoint, environment()), `atf_client` (an
AtfClient), `atf_async_client` (an AsyncAtfClient, for async tests run by anyio's pytest plugin, which
comes with httpx: mark them `@pytest.mark.anyio`), `atf_worker` (a worker host running your lambdas,
so scheduled tasks run; ask for it in the tests that need that). They need atf-local, which brings
moto: `pip install 'atf-sdk[testing]'`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from atf_core.config import StackConfig
    from atf_sdk.async_client import AsyncAtfClient
    from atf_sdk.client import AtfClient
    from atf_sdk.testing.stack import RunningStack, RunningWorker

CONFIG_INI = "atf_config"
LAMBDAS_INI = "atf_lambdas"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(CONFIG_INI, "the stack configuration (JSON) the atf_stack fixture serves", default="")
    parser.addini(LAMBDAS_INI, "module:attribute of the Lambdas the atf_worker fixture's host runs", default="")


@pytest.fixture(scope="session")
def atf_config(pytestconfig: pytest.Config) -> StackConfig:
    """The stack configuration named by the `atf_config` setting; override this fixture to build one."""
    from atf_core.config import StackConfig

    given = str(pytestconfig.getini(CONFIG_INI))
    if not given:
        pytest.fail(f"set {CONFIG_INI} (a stack configuration file) in your pytest configuration", pytrace=False)
    return StackConfig.from_file(_configured_dir(pytestconfig) / given)


@pytest.fixture(scope="session")
def atf_lambdas(pytestconfig: pytest.Config) -> str:
    """The `atf_lambdas` setting: module:attribute of your Lambdas registry."""
    given = str(pytestconfig.getini(LAMBDAS_INI))
    if not given:
        pytest.fail(f"set {LAMBDAS_INI} (module:attribute of your Lambdas) in your pytest configuration", pytrace=False)
    return given


@pytest.fixture(scope="session")
def atf_stack(atf_config: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """The local stack serving atf_config on free loopback ports, for the whole session."""
    from atf_sdk.testing.stack import local_stack

    with local_stack(atf_config, tmp_path_factory.mktemp("atf-stack")) as stack:
        yield stack


@pytest.fixture(scope="session")
def atf_worker(atf_stack: RunningStack, atf_lambdas: str, pytestconfig: pytest.Config) -> Iterator[RunningWorker]:
    """A worker host running atf_lambdas on the stack, for the whole session; it imports them from the
    directory of your pytest configuration, or from wherever the tests import from."""
    from atf_sdk.testing.stack import worker_host

    with worker_host(atf_stack, atf_lambdas, cwd=_configured_dir(pytestconfig)) as worker:
        yield worker


@pytest.fixture(scope="session")
def atf_client(atf_stack: RunningStack) -> Iterator[AtfClient]:
    with atf_stack.client() as client:
        yield client


@pytest.fixture
async def atf_async_client(atf_stack: RunningStack) -> AsyncIterator[AsyncAtfClient]:
    """A client for one async test: made and closed in that test's event loop."""
    async with atf_stack.async_client() as client:
        yield client


def _configured_dir(config: pytest.Config) -> Path:
    return config.inipath.parent if config.inipath is not None else config.rootpath
