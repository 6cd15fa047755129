"""The `aws` fixture's boto3 clients, built once per worker and handed from test to test while no test has
changed them.

Building the framework's four clients costs ~30 ms of CPU (botocore builds each one's class, endpoint
resolver and event handlers anew), and ~900 tests ask for them. What a client holds of one test is not moto's
state (its backends live apart, reset by each mock_aws, and every client reaches them through moto's one hook)
but what a test may do to the client itself: register event handlers (a recorder of the calls sent), stub or
patch its methods, spend its retry quota on retried errors. A client comes back from a test for the next
one only if none of that changed, compared with a fingerprint taken when it was built; otherwise it is
dropped and the next test gets new ones, exactly as when every test built its own. Clients are also kept
apart by the environment they were built in (endpoints, region, credentials all come from AWS_* variables).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

from atf_core.aws import AwsClients

Fingerprint = list[tuple[str, Any]]


def _handlers(client: Any) -> Iterator[tuple[str, Any]]:
    """Every event handler the client's emitter holds, by event, in its calling order."""
    emitter = client.meta.events._emitter  # botocore's HierarchicalEmitter behind the EventAliaser
    stack: list[tuple[str, dict[str, Any]]] = [("", emitter._handlers._root)]
    while stack:
        path, node = stack.pop()
        values = node["values"]
        if values is not None and (values.first or values.middle or values.last):  # one unregistered is empty
            yield path, (tuple(values.first), tuple(values.middle), tuple(values.last))
        stack.extend((f"{path}.{chunk}", child) for chunk, child in sorted(node["children"].items()))
    yield "unique ids", dict(emitter._unique_id_handlers)


def _quota_spent(client: Any) -> bool:
    """Whether standard retry mode's quota (a bucket per client that retried errors drain) is below full."""
    for _, (first, middle, last) in (entry for entry in _handlers(client) if entry[0] != "unique ids"):
        for handler in (*first, *middle, *last):
            quota = getattr(getattr(handler, "__self__", None), "_quota", None)
            if quota is not None and quota.available_capacity != quota._max_capacity:
                return True
    return False


def fingerprint(client: Any) -> Fingerprint:
    """What a test can change on a client: its handlers, its own and its class's attributes, its meta's."""
    return [
        *_handlers(client),
        ("attributes", dict(vars(client))),
        ("class", dict(vars(type(client)))),
        ("meta", dict(vars(client.meta))),
    ]


def _same(a: Fingerprint, b: Fingerprint) -> bool:
    """Equal handlers (bound methods compare by their object and function) and the very same attributes."""
    if [name for name, _ in a] != [name for name, _ in b]:
        return False
    for (name, before), (_, after) in zip(a, b, strict=True):
        if name in ("attributes", "class", "meta"):
            if before.keys() != after.keys() or any(before[k] is not after[k] for k in before):
                return False
        elif before != after:
            return False
    return True


def environment() -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_")))


class ReusedClients:
    """One set of clients at a time, kept while it is pristine (see the module's docstring)."""

    def __init__(self, build: Callable[[], AwsClients]) -> None:
        self._build = build
        self._made: tuple[tuple[tuple[str, str], ...], AwsClients, list[Fingerprint]] | None = None
        self._kept = False
        self.built = 0

    def take(self) -> AwsClients:
        """The kept clients if they were built in this environment, else new ones."""
        if self._kept and self._made is not None and self._made[0] == environment():
            self._kept = False
            return self._made[1]
        self._kept = False
        made = environment()  # before the build: the environment the clients read
        clients = self._build()
        self.built += 1
        for client in _each(clients):
            client.exceptions  # noqa: B018 - botocore builds it on first use: built now, a test's use changes nothing
        self._made = (made, clients, [fingerprint(c) for c in _each(clients)])
        return clients

    def give_back(self, clients: AwsClients) -> None:
        """Keep `clients` for the next test if they are the last built and no test changed them."""
        if self._made is None or self._made[1] is not clients:
            return
        now = [fingerprint(c) for c in _each(clients)]
        pristine = all(_same(p, n) for p, n in zip(self._made[2], now, strict=True))
        self._kept = pristine and not any(_quota_spent(c) for c in _each(clients))


def _each(clients: AwsClients) -> list[Any]:
    return [clients.dynamodb, clients.sqs, clients.sqs_long_poll, clients.dynamodb_heartbeat]
