"""`atf cost`: the lifecycles it runs bill as the state machine says (embedded AWS, a few tasks)."""

from __future__ import annotations

import argparse
import json

import pytest

from atf_core.config import StackConfig
from atf_local.cost.command import add_cost_command, measure
from atf_local.cost.lifecycles import SCENARIOS
from atf_local.cost.report import Estimate

CONFIG = StackConfig.model_validate({"name": "cost", "shards": 1, "lambdas": {"work": {"priorities": ["normal"]}}})


def test_the_happy_path_and_a_dropped_task_bill_as_the_state_machine_says() -> None:
    report = measure(CONFIG, Estimate(batch=2), only=("happy path", "dropped by a gate"))
    happy, dropped = report.scenarios
    # put + index add, a send with no write, claim, success + index removal
    assert happy.steps == {"schedule": 2, "claim": 1, "succeed": 2}  # steps that write nothing are left out
    # the consumer read each task it sent, eventually consistent: half a unit
    assert (happy.write_units, happy.index_units, happy.read_units) == (5, 2, 0.5)
    # one send, one receive, one delete for the two tasks
    assert happy.sqs_requests == pytest.approx(1.5)
    # put + index add, then a drop that removes the index entry
    assert dropped.steps == {"schedule": 2, "drop": 2} and dropped.sqs_requests == 0


def test_a_minute_of_heartbeats_moves_the_index_entry_one_beat_in_four() -> None:
    [long] = measure(CONFIG, Estimate(batch=2), only=("60 s with heartbeats",)).scenarios
    # 12 beats at 5 s with a 30 s timeout: 3 move the entry (3 units), 9 only stamp (1 unit)
    assert long.steps["heartbeat"] == 3 * 3 + 9 * 1


def test_a_consumer_that_records_enqueued_pays_one_write_more() -> None:
    config = CONFIG.model_copy(update={"record_enqueued": True})
    [happy] = measure(config, Estimate(batch=2), only=("happy path",)).scenarios
    assert happy.steps == {"schedule": 2, "enqueue": 1, "claim": 1, "succeed": 2}
    assert (happy.write_units, happy.read_units) == (6, 0)


def test_the_verb_prints_json_for_a_stack_config(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "stack.json"
    path.write_text(CONFIG.model_dump_json())
    parser = argparse.ArgumentParser()
    add_cost_command(parser.add_subparsers())
    argv = ["cost", "--config", str(path), "--json", "--tasks-per-request", "100", "--batch", "1"]
    args = parser.parse_args(argv)
    assert args.run(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in printed["scenarios"]] == ["happy path", *SCENARIOS[1:]]
    assert printed["frontend_dollars_per_million"]["API Gateway REST"] == pytest.approx(0.035)


def test_the_verb_names_a_configuration_that_does_not_read_in_one_line(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "stack.json"
    path.write_text(json.dumps({"environment": "dev", "config": {**json.loads(CONFIG.model_dump_json()), "shards": 0}}))
    parser = argparse.ArgumentParser()
    add_cost_command(parser.add_subparsers())
    args = parser.parse_args(["cost", "--config", str(path)])
    with pytest.raises(SystemExit) as exited:  # an environment file's stack configuration, read as atf worker reads it
        args.run(args)
    assert exited.value.code == 2  # as a wrong argument
    assert capsys.readouterr().err.startswith(f"atf cost: configuration {path}: config.shards: ")
