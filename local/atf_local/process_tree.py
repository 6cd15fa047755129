"""A process's children, and a worker host's executors, as Linux's /proc shows them.

A worker host forks its executors from a fork server, a child of the host that imported their modules once
(atf_sdk.worker.host): the executors are the server's children, and the server is none of them. The fault
harness, the benchmarks and the e2e tests all find a host's executors here.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

FORK_SERVER_MARK = b"multiprocessing.forkserver"  # in the command line multiprocessing starts its server with


def children_of(pid: int) -> list[int]:
    found: list[int] = []
    for tasks in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError, ValueError):
            found += [int(c) for c in tasks.read_text().split()]
    return found


def fork_servers_of(host: int) -> list[int]:
    return [pid for pid in children_of(host) if FORK_SERVER_MARK in _cmdline(pid)]


def executors_of(host: int) -> list[int]:
    """A worker host's executors: the children of its fork server. The server itself runs no task, and a kill
    aimed at an executor that hit it would leave the host unable to start or follow any of them."""
    return [pid for server in fork_servers_of(host) for pid in children_of(server)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
