"""The suite's embedded AWS makes conditional writes atomic, as DynamoDB does.

Plain moto checks a condition and applies the write in separate steps, so
racing writers on one item can both win (seen as a heartbeat landing on top
of a task's result); the checker would then report moto's race as the
framework's. Here eight writers race for each of 25 versions of one item:
exactly one may win each round.
"""

from __future__ import annotations

import threading
from collections import Counter

from botocore.config import Config
from botocore.exceptions import ClientError

from atf_core.aws import make_clients
from tests.conftest import TEST_CONFIG

WRITERS, ROUNDS = 8, 25
# Set before the version: moto applies the actions in turn, so its check and its write of `v` lie further
# apart, and a race moto would lose shows in most runs, not one in three (checked without the lock).
FILLERS = ", ".join(f"f{n} = :next" for n in range(15))


def test_racing_conditional_writes_on_one_item_have_one_winner(endpoint: str) -> None:
    table = TEST_CONFIG["table_name"]
    clients = make_clients(endpoint, config=Config(retries={"mode": "standard", "max_attempts": 1}))
    clients.dynamodb.put_item(TableName=table, Item={"id": {"S": "race"}, "v": {"N": "0"}})
    wins: Counter[int] = Counter()
    counting = threading.Lock()
    start = threading.Barrier(WRITERS)

    def writer() -> None:
        db = make_clients(endpoint, config=Config(retries={"mode": "standard", "max_attempts": 1})).dynamodb
        for version in range(ROUNDS):
            start.wait()
            try:
                db.update_item(
                    TableName=table, Key={"id": {"S": "race"}}, UpdateExpression=f"SET {FILLERS}, v = :next",
                    ConditionExpression="v = :seen",
                    ExpressionAttributeValues={":next": {"N": str(version + 1)}, ":seen": {"N": str(version)}},
                )  # fmt: skip
            except ClientError:
                continue
            with counting:
                wins[version] += 1

    threads = [threading.Thread(target=writer) for _ in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert [wins[v] for v in range(ROUNDS)] == [1] * ROUNDS


def test_a_read_sees_a_write_whole_or_not_at_all(endpoint: str) -> None:
    # Given an item whose attributes one writer sets together, version after version, as a task's result
    # write sets its status, result and end time in one UpdateItem
    table, names = TEST_CONFIG["table_name"], tuple(f"a{i}" for i in range(16))
    db = make_clients(endpoint).dynamodb
    db.put_item(TableName=table, Item={"id": {"S": "whole"}, **{n: {"N": "0"} for n in names}})
    written = threading.Event()

    def writer() -> None:
        db = make_clients(endpoint).dynamodb
        for version in range(1, 300):
            db.update_item(
                TableName=table, Key={"id": {"S": "whole"}},
                UpdateExpression="SET " + ", ".join(f"#{n} = :v" for n in names),
                ExpressionAttributeNames={f"#{n}": n for n in names},
                ExpressionAttributeValues={":v": {"N": str(version)}},
            )  # fmt: skip
        written.set()

    torn: list[dict[str, str]] = []

    def reader() -> None:
        db = make_clients(endpoint).dynamodb
        while not written.is_set():
            item = db.get_item(TableName=table, Key={"id": {"S": "whole"}}, ConsistentRead=True)["Item"]
            seen = {n: item[n]["N"] for n in names}
            if len(set(seen.values())) > 1:
                torn.append(seen)

    # When readers read it all the while
    # (daemons: should the writer fail, they must not keep the session alive; its assertion reports it)
    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader, daemon=True) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    # Then no read saw some of a write's attributes without the others, as DynamoDB never shows one
    assert written.is_set() and torn == [], f"{len(torn)} torn reads, e.g. {torn[:3]}"
