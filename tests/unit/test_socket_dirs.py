"""The socket directories worker hosts killed outright leave in TMPDIR, removed by the next host to start."""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from atf_sdk.worker import host
from atf_sdk.worker.socket_dirs import LOCK_NAME, SOCKET_NAME, SocketDirectory, remove_abandoned


@pytest.fixture
def in_short_tmp(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """TMPDIR for this process's tempfile calls: where SocketDirectory makes its directories."""
    monkeypatch.setattr(tempfile, "tempdir", str(short_tmp))
    return short_tmp


@pytest.fixture
def held() -> Iterator[list[SocketDirectory]]:
    """Directories of hosts that live on through the test (their locks held), removed after it."""
    directories: list[SocketDirectory] = []
    yield directories
    for directory in directories:
        directory.remove()


def left_by_a_killed_host(where: Path) -> Path:
    """A host's directory as a host killed outright leaves it: its lock file there, no longer held."""
    directory = SocketDirectory()
    path = directory.path
    os.close(directory._lock)  # what the kernel does as the process ends
    (path / SOCKET_NAME).touch()
    return path


def test_only_the_directories_of_hosts_that_are_gone_are_removed(
    in_short_tmp: Path, held: list[SocketDirectory]
) -> None:
    # Given the directories of two hosts killed outright, and those of hosts that may still be running
    gone = [left_by_a_killed_host(in_short_tmp) for _ in range(2)]
    held.append(SocketDirectory())  # a live host: its lock held
    held.append(SocketDirectory())
    os.unlink(held[1].path / LOCK_NAME)  # ...and one whose lock file a /tmp cleaner removed
    before = in_short_tmp / "atf-host-k2j4x9qa"  # made by a host before the lock: nothing tells if it lives
    before.mkdir()
    (before / SOCKET_NAME).touch()
    (in_short_tmp / "atf-host-file").write_text("not a directory")
    (in_short_tmp / "atf-host-link").symlink_to(gone[0])
    kept = sorted(p.name for p in in_short_tmp.iterdir() if p not in gone)
    # When a host starts
    removed = remove_abandoned(in_short_tmp)
    # Then it removed those of the hosts gone, and left everything else
    assert sorted(removed) == sorted(gone)
    assert sorted(p.name for p in in_short_tmp.iterdir()) == kept


def test_a_locked_directory_is_left_even_as_its_lock_is_asked_for_elsewhere(
    in_short_tmp: Path, held: list[SocketDirectory]
) -> None:
    # Given a live host's directory, and a process holding the lock of a gone host's (another sweep, say)
    held.append(SocketDirectory())
    gone = left_by_a_killed_host(in_short_tmp)
    other_sweep = os.open(gone / LOCK_NAME, os.O_RDONLY)
    fcntl.flock(other_sweep, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        # When a host starts meanwhile, Then it removes neither: the lock decides
        assert remove_abandoned(in_short_tmp) == []
    finally:
        os.close(other_sweep)
    # And once that lock is let go, the next host to start removes the gone host's alone
    assert remove_abandoned(in_short_tmp) == [gone]


def test_directories_of_another_user_are_left(in_short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gone = left_by_a_killed_host(in_short_tmp)
    monkeypatch.setattr(os, "getuid", lambda: os.stat(gone).st_uid + 1)
    assert remove_abandoned(in_short_tmp) == []
    assert gone.exists()


def test_a_starting_host_removes_what_a_killed_one_left_and_holds_its_own(
    in_short_tmp: Path, held: list[SocketDirectory]
) -> None:
    # Given the directory a killed host left, and a host that runs (in this process)
    gone = left_by_a_killed_host(in_short_tmp)
    held.append(SocketDirectory())
    # When another host starts listening for its executors
    server, directory = host._listen(None, b"key", lambda task, how, held_s: None)  # type: ignore[arg-type]  # the controller is asked once served
    try:
        # Then the killed one's directory is gone, the running one's is not, and its own is locked and named
        # for its process
        assert not gone.exists() and held[0].path.exists()
        assert Path(server.address) == directory.socket_path
        assert directory.path.name.startswith(f"atf-host-{os.getpid()}-")
        assert remove_abandoned(in_short_tmp) == []
    finally:
        server.close()
        directory.remove()
    assert not directory.path.exists()
