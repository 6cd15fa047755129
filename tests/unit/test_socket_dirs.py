"""The socket directories worker hosts killed outright leave in TMPDIR, removed by the next host to start."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from atf_sdk.worker import host
from atf_sdk.worker.socket_dirs import ABANDONED_AFTER_S, SOCKET_NAME, remove_abandoned

listening: list[socket.socket] = []  # the sockets host_directory listens on, closed after each test


@pytest.fixture(autouse=True)
def _close_listeners() -> Iterator[None]:
    yield
    while listening:
        listening.pop().close()


@pytest.fixture
def dead_pid() -> int:
    finished = subprocess.Popen(["true"])
    finished.wait()
    return finished.pid


def host_directory(where: Path, name: str, socket_state: str = "dead", age_s: float = 3600) -> Path:
    """A host's socket directory: its socket listened on ("live"), left by a dead process ("dead"), or none."""
    directory = where / name
    directory.mkdir()
    if socket_state != "none":
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(directory / SOCKET_NAME))
        if socket_state == "live":
            server.listen()
            listening.append(server)
        else:
            server.close()
        os.utime(directory / SOCKET_NAME, (time.time() - age_s,) * 2)
    os.utime(directory, (time.time() - age_s,) * 2)
    return directory


def test_only_the_directories_of_hosts_that_are_gone_are_removed(short_tmp: Path, dead_pid: int) -> None:
    # Given the socket directories of hosts gone an hour ago, and of hosts that may still be running
    gone = [
        host_directory(short_tmp, f"atf-host-{dead_pid}-abc"),
        host_directory(short_tmp, f"atf-host-{dead_pid}-empty", socket_state="none"),
        host_directory(short_tmp, "atf-host-k2j4x9qa"),  # named as hosts before the process id was added
    ]
    kept = [
        host_directory(short_tmp, f"atf-host-{os.getpid()}-self"),  # its process runs, whatever its socket
        host_directory(short_tmp, f"atf-host-{dead_pid}-listening", socket_state="live"),  # another PID namespace
        host_directory(short_tmp, f"atf-host-{dead_pid}-new", age_s=ABANDONED_AFTER_S / 2),  # about to listen
        host_directory(short_tmp, "other-abc"),
    ]
    (short_tmp / "atf-host-file").write_text("not a directory")
    (short_tmp / "atf-host-link").symlink_to(gone[0])
    # When a host starts
    removed = remove_abandoned(short_tmp)
    # Then it removed those of the hosts gone, and left everything else
    assert sorted(removed) == sorted(gone)
    assert sorted(p.name for p in short_tmp.iterdir()) == sorted(
        [p.name for p in kept] + ["atf-host-file", "atf-host-link"]
    )


def test_a_starting_host_removes_what_a_killed_one_left_and_names_its_own_for_its_process(
    short_tmp: Path, dead_pid: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the directory a host killed an hour ago left in TMPDIR
    left = host_directory(short_tmp, f"atf-host-{dead_pid}-abc")
    monkeypatch.setattr(tempfile, "tempdir", str(short_tmp))
    # When a host starts listening for its executors
    server = host._listen(None, b"key")  # type: ignore[arg-type]  # the controller is asked only once served
    try:
        # Then the left directory is gone, and its own is there, named for its process
        assert not left.exists()
        assert Path(server.address).parent.name.startswith(f"atf-host-{os.getpid()}-")
        assert [p.name for p in short_tmp.iterdir()] == [Path(server.address).parent.name]
    finally:
        server.close()
