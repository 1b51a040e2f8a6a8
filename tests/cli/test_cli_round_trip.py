"""`odradek topics|produce|consume|configs` as a user runs them, against a real broker process."""

from __future__ import annotations

import json
import uuid


def test_create_produce_consume_round_trip(odradek, odradek_broker) -> None:
    topic = f"cli-{uuid.uuid4().hex[:10]}"
    created = odradek(
        odradek_broker,
        "topics",
        "create",
        "--topic",
        topic,
        "--partitions",
        "1",
        "--config",
        "retention.ms=600000",
    )
    assert created.returncode == 0, created.stderr
    listed = odradek(odradek_broker, "topics", "list")
    assert topic in listed.stdout.split()
    described = odradek(odradek_broker, "topics", "describe", "--topic", topic)
    assert "PartitionCount: 1" in described.stdout and "retention.ms=600000" in described.stdout

    produced = odradek(
        odradek_broker,
        "produce",
        "--topic",
        topic,
        "--key-separator",
        ":",
        stdin="k1:hello\nk2:wörld\n:empty key\n",
    )
    assert produced.returncode == 0, produced.stderr

    consumed = odradek(
        odradek_broker,
        "consume",
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "3",
        "--format",
        "json",
        "--timeout-ms",
        "20000",
    )
    assert consumed.returncode == 0, consumed.stderr
    records = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert [(r["key"], r["value"], r["offset"]) for r in records] == [
        ("k1", "hello", 0),
        ("k2", "wörld", 1),
        ("", "empty key", 2),
    ]

    from_offset = odradek(
        odradek_broker,
        "consume",
        "--topic",
        topic,
        "--partition",
        "0",
        "--offset",
        "1",
        "--max-messages",
        "2",
        "--property",
        "print.key=true",
        "--property",
        "key.separator=|",
        "--timeout-ms",
        "20000",
    )
    assert from_offset.stdout.splitlines() == ["k2|wörld", "|empty key"]

    by_time = odradek(
        odradek_broker,
        "consume",
        "--topic",
        topic,
        "--timestamp",
        "0",
        "--max-messages",
        "1",
        "--timeout-ms",
        "20000",
    )
    assert by_time.stdout.splitlines() == ["hello"]


def test_configs_alter_and_describe(odradek, odradek_broker) -> None:
    topic = f"cli-{uuid.uuid4().hex[:10]}"
    assert odradek(odradek_broker, "topics", "create", "--topic", topic).returncode == 0
    altered = odradek(
        odradek_broker,
        "configs",
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
        "--add-config",
        "retention.ms=1000,cleanup.policy=[compact,delete]",
    )
    assert altered.returncode == 0, altered.stderr
    described = odradek(
        odradek_broker, "configs", "describe", "--entity-type", "topics", "--entity-name", topic
    )
    assert "retention.ms=1000" in described.stdout
    assert "cleanup.policy=compact,delete" in described.stdout
    removed = odradek(
        odradek_broker,
        "configs",
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
        "--delete-config",
        "retention.ms",
    )
    assert removed.returncode == 0, removed.stderr
    after = odradek(
        odradek_broker, "configs", "describe", "--entity-type", "topics", "--entity-name", topic
    )
    assert "retention.ms" not in after.stdout


def test_topics_alter_delete_and_errors(odradek, odradek_broker) -> None:
    topic = f"cli-{uuid.uuid4().hex[:10]}"
    assert odradek(odradek_broker, "topics", "create", "--topic", topic).returncode == 0
    again = odradek(odradek_broker, "topics", "create", "--topic", topic)
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr
    assert (
        odradek(odradek_broker, "topics", "create", "--topic", topic, "--if-not-exists").returncode
        == 0
    )
    assert (
        odradek(odradek_broker, "topics", "alter", "--topic", topic, "--partitions", "3").returncode
        == 0
    )
    assert (
        "PartitionCount: 3"
        in odradek(odradek_broker, "topics", "describe", "--topic", topic).stdout
    )
    assert odradek(odradek_broker, "topics", "delete", "--topic", topic).returncode == 0
    missing = odradek(odradek_broker, "topics", "delete", "--topic", topic)
    assert missing.returncode == 1
    assert (
        odradek(odradek_broker, "topics", "delete", "--topic", topic, "--if-exists").returncode == 0
    )
