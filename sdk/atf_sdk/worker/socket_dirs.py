"""The directory of a worker host's executor socket, and the removal of those hosts killed outright left.

A host listens for its executors on a Unix socket in a directory of its own under TMPDIR, and removes it
when it stops (host.py). A host killed with SIGKILL, or by the kernel for memory, cannot: the fault tests
alone leave about eight a run. So a host, as it starts, removes the directories of its user's hosts that
are gone: the process named in the directory's name is not running, its socket (if any) refuses
connections, and it is older than a minute. The socket's answer guards a host in another PID namespace
(a container sharing the directory), whose process id means nothing here; the age, a host between
making its directory and listening in it.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import socket
import stat
import tempfile
import time
from pathlib import Path

log = logging.getLogger("atf.worker")

PREFIX = "atf-host-"
SOCKET_NAME = "controller.sock"
ABANDONED_AFTER_S = 60.0


def make_socket_directory() -> Path:
    """A new directory for this host's socket, named for its process."""
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))


def remove_abandoned(where: Path, now: float | None = None) -> list[Path]:
    """Remove the socket directories under `where` that hosts now gone left; the ones removed. Never raises:
    a directory it cannot read or remove is left, and the host starts all the same."""
    now = time.time() if now is None else now
    removed = []
    try:
        candidates = sorted(where.glob(f"{PREFIX}*"))
    except OSError:
        return []
    for directory in candidates:
        try:
            if _abandoned(directory, now):
                shutil.rmtree(directory)
                removed.append(directory)
        except OSError as error:
            log.debug("left %s: %s", directory, error)
    if removed:
        log.info("removed %d socket directories of worker hosts no longer running from %s", len(removed), where)
    return removed


def _abandoned(directory: Path, now: float) -> bool:
    status = directory.lstat()
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.getuid() or _running(_pid_of(directory.name)):
        return False
    sock = directory / SOCKET_NAME
    youngest = max(status.st_mtime, sock.lstat().st_mtime if sock.exists() else 0.0)
    return now - youngest >= ABANDONED_AFTER_S and _refuses(sock)


def _pid_of(name: str) -> int | None:
    """The process id in a directory's name (None in the names of hosts before it was added)."""
    head = name.removeprefix(PREFIX).split("-", 1)
    return int(head[0]) if len(head) == 2 and head[0].isdigit() else None


def _running(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _refuses(sock: Path) -> bool:
    """Whether nothing listens on the socket (or there is none)."""
    if not sock.exists():
        return True
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(sock))
        except OSError as error:
            return error.errno in (errno.ECONNREFUSED, errno.ENOENT)
        with contextlib.suppress(OSError):
            probe.shutdown(socket.SHUT_RDWR)
        return False
