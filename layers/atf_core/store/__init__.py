"""The task store: the only package that calls DynamoDB.

- base.py: the contract (TaskStore) and what crosses it (Change, Outcome, DueEntry, TaskRef).
- codec.py: Task models <-> DynamoDB items; the index partition key.
- table.py: Table, the one door: a get, conditional writes with one condition check, one paging
  loop, one batch read. The stores below use it; nothing else does.
- tasks.py: DynamoTaskStore, the contract on DynamoDB: tasks, transitions, gates.
- update.py: the conditional UpdateItem a transition declares (stamp, guards, index move).
- index.py: IndexStore, reads of the scheduling index (due entries, windows, counts).
- items.py: ItemStore, schedule and chain items with optimistic versions; the schedule item's format.
- counters.py: Counters, the limiter's start windows and running slots.
- scan.py: TaskScan, every task in the table, for local tools only.

Each public method of a store declares the AWS actions it calls (atf_core.calls), from which a
component's IAM policy can be derived; tests/unit/test_declared_calls.py proves each declaration.
"""
