"""The synthesis service (atf_local.iam.synth_service): one process synthesizes the local stacks' templates for
every caller, started by the first, replaced when killed, ended when idle, full or asked; a refused
configuration is an error that names it, and writes nothing."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from atf_core.config import StackConfig
from atf_local.iam.synth_service import SynthService
from atf_local.iam.template import synth_service

LAMBDAS = ("alpha", "bravo", "charlie", "delta")


@pytest.fixture
def service() -> Iterator[SynthService]:
    # A directory of its own, short enough for a socket's path: not the service the other tests share.
    home = Path(tempfile.mkdtemp(prefix="atf-st-"))
    own = dataclasses.replace(synth_service(), address=home / "s.sock", lock=home / "s.lock", log=home / "s.log")
    yield own
    own.stop()
    shutil.rmtree(home)


def config_json(lambda_name: str) -> str:
    return StackConfig.model_validate({"name": f"st-{lambda_name}", "lambdas": {lambda_name: {}}}).model_dump_json()


def worker_lambdas(template: dict[str, Any]) -> set[str]:
    """The ATF_LAMBDA of each task definition's containers."""
    return {
        variable["Value"]
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::ECS::TaskDefinition"
        for container in resource["Properties"]["ContainerDefinitions"]
        for variable in container.get("Environment", [])
        if variable["Name"] == "ATF_LAMBDA"
    }


def is_running(pid: int) -> bool:
    """Alive, and not a zombie that an init which reaps nothing keeps (a service's parent is init)."""
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


def wait_until(condition: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def start_directly(service: SynthService, idle: float, most: int) -> int:
    """Starts a service the way a caller does, without a request; the starter's exit status."""
    arguments = [str(service.address), str(service.lock), str(idle), str(most)]
    command = [sys.executable, "-m", "atf_local.iam.synth", *arguments]
    return subprocess.run(command, cwd=service.cwd, env=service.env, timeout=60, check=False).returncode


def refuse(service: SynthService, tmp_path: Path) -> str:
    """A request refused at validation: answered at once, before aws-cdk-lib loads; the error it raised."""
    with pytest.raises(RuntimeError, match="cdk synth of the local stack failed") as refused:
        service.synthesize(json.dumps({"name": "Not A Name"}), tmp_path / "refused.json")
    return str(refused.value)


def test_callers_at_once_start_one_service_that_answers_each(service: SynthService, tmp_path: Path) -> None:
    # Given no service, when four callers ask at once for four configurations
    def ask(name: str) -> int:
        return service.synthesize(config_json(name), tmp_path / f"{name}.json")

    with ThreadPoolExecutor(len(LAMBDAS)) as pool:
        pids = list(pool.map(ask, LAMBDAS))
    # Then one service answered them all, each with its own configuration's template
    assert len(set(pids)) == 1 and is_running(pids[0])
    for name in LAMBDAS:
        assert worker_lambdas(json.loads((tmp_path / f"{name}.json").read_text())) == {name}
    # And a later caller is answered by the same one
    assert service.synthesize(config_json("echo"), tmp_path / "echo.json") == pids[0]


def test_a_refused_configuration_is_an_error_naming_the_field_and_writes_nothing(
    service: SynthService, tmp_path: Path
) -> None:
    assert start_directly(service, idle=60, most=10) == 0
    listening = service.ping()
    assert re.search(r"validation error for StackConfig\nname\n.*pattern", refuse(service, tmp_path))
    assert list(tmp_path.iterdir()) == []
    assert listening is not None and service.ping() == listening  # and the service goes on


def test_a_killed_service_is_replaced_at_the_next_request(service: SynthService, tmp_path: Path) -> None:
    assert start_directly(service, idle=60, most=10) == 0
    killed = service.ping()
    assert killed is not None
    os.kill(killed, signal.SIGKILL)
    wait_until(lambda: not is_running(killed))
    assert service.address.exists()  # left behind: nothing listens on it
    refuse(service, tmp_path)  # answered: by a service started anew
    assert service.ping() not in (None, killed)


def test_stop_ends_the_service_and_starts_none(service: SynthService) -> None:
    assert start_directly(service, idle=60, most=10) == 0
    stopped = service.stop()
    assert stopped is not None
    wait_until(lambda: not is_running(stopped) and not service.address.exists())
    assert service.stop() is None and service.ping() is None  # none listens: none is started
    assert not service.address.exists()


def test_a_terminated_service_removes_its_address(service: SynthService) -> None:
    assert start_directly(service, idle=60, most=10) == 0
    listening = service.ping()
    assert listening is not None
    os.kill(listening, signal.SIGTERM)  # a test run's teardown, a machine shutting down
    wait_until(lambda: not is_running(listening))
    assert not service.address.exists()  # it was left behind, a socket nothing listens on


def test_an_idle_service_ends_and_removes_its_address(service: SynthService) -> None:
    assert start_directly(service, idle=0.5, most=10) == 0
    wait_until(lambda: not service.address.exists())
    assert service.ping() is None


def test_a_service_ends_after_its_most_requests(service: SynthService, tmp_path: Path) -> None:
    assert start_directly(service, idle=60, most=2) == 0
    first = service.ping()
    refuse(service, tmp_path)
    refuse(service, tmp_path)
    assert first is not None
    wait_until(lambda: not is_running(first))
    refuse(service, tmp_path)  # the next request starts another
    assert service.ping() not in (None, first)


def test_a_second_service_leaves_the_address_to_the_one_holding_the_lock(service: SynthService) -> None:
    assert start_directly(service, idle=60, most=10) == 0
    holder = service.ping()
    assert holder is not None
    assert start_directly(service, idle=60, most=10) == 0
    assert service.ping() == holder


def test_a_copy_of_the_environment_made_of_links_shares_the_service_and_another_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = synth_service().address
    (tmp_path / "linked").symlink_to(Path(sys.prefix).resolve())
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "linked"))
    assert synth_service().address == own
    (tmp_path / "other").mkdir()
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "other"))
    assert synth_service().address != own
