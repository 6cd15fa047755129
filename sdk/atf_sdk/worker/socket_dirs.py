"""The directory of a worker host's executor socket, and the removal of those hosts killed outright left.

A host listens for its executors on a Unix socket in a directory of its own under TMPDIR, and removes it
when it stops (host.py). A host killed with SIGKILL, or by the kernel for memory, cannot: the fault tests
alone leave about eight a run. So each host holds a lock (flock) on a file in its directory for as long as
it lives, and the kernel lets go of it when the process ends, however it ends. A host, as it starts,
removes the directories of its user whose lock it can take. The lock is taken before its file gets its
name, so no directory is ever seen with its lock free while its host lives; it holds across PID
namespaces (containers sharing the directory), and a live host's socket is never touched. Directories
without a lock file (made by hosts before this one) are left alone: nothing tells whether theirs lives.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import stat
import tempfile
from pathlib import Path

log = logging.getLogger("atf.worker")

PREFIX = "atf-host-"
SOCKET_NAME = "controller.sock"
LOCK_NAME = "host.lock"


class SocketDirectory:
    """A directory of this host's own under TMPDIR, locked until `remove` (or the process's end)."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
        staged = self.path / f"{LOCK_NAME}.new"
        self._lock = -1
        try:
            self._lock = os.open(staged, os.O_CREAT | os.O_WRONLY, 0o600)
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(staged, self.path / LOCK_NAME)
        except OSError:
            self.remove()
            raise

    @property
    def socket_path(self) -> Path:
        return self.path / SOCKET_NAME

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        if self._lock >= 0:
            with contextlib.suppress(OSError):
                os.close(self._lock)
            self._lock = -1


def remove_abandoned(where: Path) -> list[Path]:
    """Remove the socket directories under `where` whose hosts are gone; the ones removed. Never raises: a
    directory it cannot read or remove is left, and the host starts all the same."""
    removed = []
    try:
        candidates = sorted(where.glob(f"{PREFIX}*"))
    except OSError:
        return []
    for directory in candidates:
        try:
            if _remove_if_abandoned(directory):
                removed.append(directory)
        except OSError as error:
            log.debug("left %s: %s", directory, error)
    if removed:
        log.info("removed %d socket directories of worker hosts no longer running from %s", len(removed), where)
    return removed


def _remove_if_abandoned(directory: Path) -> bool:
    """Remove the directory if it is its user's and its lock is free (its host is gone), holding the lock
    meanwhile; False if it is left. Raises OSError where it cannot tell or cannot remove."""
    status = directory.lstat()
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.getuid():
        return False
    try:
        lock = os.open(directory / LOCK_NAME, os.O_RDONLY)
    except FileNotFoundError:
        return False  # made before hosts locked their directories (or being removed): nothing tells
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # its host lives
        shutil.rmtree(directory)
        return True
    finally:
        os.close(lock)
