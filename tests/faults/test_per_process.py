"""A per-process value: built on first use in each process, built again in a forked child, never locked out there.

History and the benchmarks' meter keep what they write to in one (atf_local.instruments.per_process)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from itertools import count

from atf_local.instruments.per_process import PerProcess


def _in_a_forked_child(run: Callable[[], str]) -> str:
    """What `run` returns in a child forked here; the child is killed if it does not exit within 30 s."""
    reading, writing = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: whatever happens, it leaves through os._exit and never returns into pytest
        status = 1
        try:
            os.close(reading)
            os.write(writing, run().encode())
            status = 0
        finally:
            os._exit(status)
    os.close(writing)
    deadline = time.monotonic() + 30
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("the child did not finish: it waited for a lock its parent held as it forked")
        time.sleep(0.05)
    with os.fdopen(reading) as output:
        return output.read()


def test_the_value_is_built_on_first_use_and_once_in_a_process() -> None:
    built = count()
    slot = PerProcess(lambda: next(built))
    assert next(built) == 0, "nothing built before the first use"
    assert (slot.get(), slot.get()) == (1, 1)
    with slot.hold() as value:
        assert value == 1


def test_a_forked_child_builds_its_own_value_and_the_parent_keeps_its_own() -> None:
    slot = PerProcess(lambda: {"pid": os.getpid()})
    parents = slot.get()  # built before the fork: the child inherits a copy of it
    child = _in_a_forked_child(lambda: f"{slot.get()['pid']} {slot.get() is parents} {slot.get() is slot.get()}")
    pid, inherited, kept = child.split()
    assert int(pid) != os.getpid()
    assert (inherited, kept) == ("False", "True"), "the child builds one value of its own and keeps it"
    assert slot.get() is parents and parents == {"pid": os.getpid()}


def test_a_child_forked_while_another_thread_holds_the_value_is_not_locked_out() -> None:
    slot = PerProcess(os.getpid)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with slot.hold():
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(30)
        child = _in_a_forked_child(lambda: str(slot.get()))
    finally:
        release.set()
        holder.join(30)
    assert int(child) != os.getpid()
    assert slot.get() == os.getpid()
