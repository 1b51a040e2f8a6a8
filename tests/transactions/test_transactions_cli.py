"""`odradek transactions list|describe|abort` against a real broker.

The command's module is imported here, at collection: imported first inside a test (main()
loads subcommands lazily), pytest's assertion rewriting parses it deep in the stack, where
CPython 3.11.7's ast.parse can fail with "AST constructor recursion depth mismatch".
"""

from __future__ import annotations

from confluent_kafka import Producer

import odradek.cli.transactions  # noqa: F401
from odradek import EmbeddedBroker
from odradek.cli.main import main

from .conftest import create_topic, new_id


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_list_and_describe_follow_a_transaction(broker: EmbeddedBroker, capsys) -> None:
    bs = ("--bootstrap-server", broker.bootstrap_servers)
    topic = create_topic(broker.bootstrap_servers, 2)
    tid = new_id("cli")
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": tid})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"x", partition=1)
    producer.flush(30)

    status, out, _ = run(capsys, "transactions", "describe", "--transactional-id", tid, *bs)
    assert status == 0
    header, row = (line.split() for line in out.splitlines())
    fields = dict(zip(header, row, strict=True))
    assert fields["TransactionState"] == "Ongoing"
    assert fields["TopicPartitions"] == f"{topic}-1"
    assert fields["ProducerEpoch"] == "0"
    assert int(fields["TransactionDurationMs"]) >= 0

    status, out, _ = run(capsys, "transactions", "list", *bs)
    assert status == 0
    assert [tid, "1", fields["ProducerId"], "Ongoing"] in [
        line.split() for line in out.splitlines()
    ]

    producer.commit_transaction(30)
    status, out, _ = run(capsys, "transactions", "describe", "--transactional-id", tid, *bs)
    fields = dict(zip(*(line.split() for line in out.splitlines()), strict=True))
    assert (fields["TransactionState"], fields["TopicPartitions"]) == ("CompleteCommit", "None")


def test_errors_are_one_line(broker: EmbeddedBroker, capsys) -> None:
    bs = ("--bootstrap-server", broker.bootstrap_servers)
    topic = create_topic(broker.bootstrap_servers, 1)
    status, _, err = run(capsys, "transactions", "describe", "--transactional-id", "nope", *bs)
    assert status == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in err
    args = ("transactions", "abort", "--topic", topic, "--partition", "0")
    status, _, err = run(capsys, *args, "--start-offset", "0", *bs)
    assert status == 1 and "no open transaction" in err and "offset 0" in err
    status, _, err = run(capsys, *args, "--producer-id", "5", *bs)
    assert status == 1 and "--producer-epoch" in err
