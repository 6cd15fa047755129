"""The local web console: the local stack's tasks, gates and dead letters in a browser."""

from atf_local.console.server import ConsoleServer

__all__ = ["ConsoleServer"]
