"""A newcomer's first hour: the CLI's failures are one clear line, never a hang or a traceback.

Each test runs the real `odradek` command in a subprocess against a real broker process (the
session's ``odradek_broker``, group.initial.rebalance.delay.ms at Kafka's 3000 ms default).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import uuid

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

TIMEOUT = 60


def _assert_one_line_error(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for text in expected:
        assert text in lines[0]


def _new_topic(odradek, broker, records: int = 0, width: int = 10) -> str:
    topic = f"cli-{uuid.uuid4().hex[:10]}"
    assert odradek(broker, "topics", "create", "--topic", topic).returncode == 0
    if records:
        lines = "".join(f"{i:0{width}d}\n" for i in range(records))
        assert odradek(broker, "produce", "--topic", topic, stdin=lines).returncode == 0
    return topic


def test_consume_timeout_counts_from_the_group_assignment(odradek, odradek_broker) -> None:
    """A new group's first join waits out the initial rebalance delay (3 s) before any record
    can be read; a shorter --timeout-ms must not end the tool during that wait."""
    topic = _new_topic(odradek, odradek_broker, records=2)
    consumed = odradek(
        odradek_broker,
        "consume",
        "--topic",
        topic,
        "--group",
        f"g-{uuid.uuid4().hex[:8]}",
        "--from-beginning",
        "--timeout-ms",
        "1000",
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["0000000000", "0000000001"]
    assert "Processed a total of 2 messages" in consumed.stderr


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("7", ("broker 7 is not in the cluster", "its brokers: ")),
        # librdkafka refuses a resource without a name (Kafka's cluster-wide default)
        ("", ("librdkafka cannot address the cluster-wide default",)),
    ],
)
def test_unknown_broker_entity_is_one_line(
    odradek, odradek_broker, name: str, expected: tuple[str, ...]
) -> None:
    for action in (("describe",), ("alter", "--add-config", "log.retention.ms=1000")):
        result = odradek(
            odradek_broker,
            "configs",
            action[0],
            "--entity-type",
            "brokers",
            "--entity-name",
            name,
            *action[1:],
        )
        _assert_one_line_error(result, *expected)


def test_broker_entity_name_must_be_a_number(odradek, odradek_broker) -> None:
    not_a_number = odradek(
        odradek_broker, "configs", "describe", "--entity-type", "brokers", "--entity-name", "x"
    )
    _assert_one_line_error(not_a_number, "must be a valid integer broker id, found: x")


def test_unknown_topic_and_group_are_one_line(odradek, odradek_broker) -> None:
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    _assert_one_line_error(
        odradek(
            odradek_broker,
            "configs",
            "describe",
            "--entity-type",
            "topics",
            "--entity-name",
            missing,
        ),
        "UNKNOWN_TOPIC_OR_PART",
    )
    _assert_one_line_error(
        odradek(odradek_broker, "groups", "describe", "--group", missing),
        f"Consumer group '{missing}' does not exist.",
    )
    _assert_one_line_error(
        odradek(
            odradek_broker,
            "groups",
            "reset-offsets",
            "--group",
            missing,
            "--topic",
            missing,
            "--to-earliest",
        ),
        f"topic {missing} does not exist",
    )
    _assert_one_line_error(
        odradek(odradek_broker, "consume", "--topic", missing, "--timeout-ms", "1000"), missing
    )


class _Down:
    """A bootstrap address where nothing listens: a port bound, then released."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.bootstrap_servers = f"127.0.0.1:{s.getsockname()[1]}"


def test_broker_down_is_one_line_for_every_tool(odradek) -> None:
    down = _Down()
    for argv in (
        ("topics", "list"),
        ("topics", "describe"),
        ("topics", "create", "--topic", "t"),
        ("configs", "describe", "--entity-type", "brokers", "--entity-name", "1"),
        ("groups", "list"),
        ("groups", "describe", "--group", "g"),
        ("consume", "--topic", "t", "--timeout-ms", "1000"),
        ("consume", "--topic", "t", "--group", "g", "--timeout-ms", "1000"),
        ("perf", "produce", "--topic", "t", "--records", "10"),
        ("perf", "consume", "--topic", "t"),
    ):
        result = odradek(down, *argv)
        _assert_one_line_error(result, f"cannot reach any broker at {down.bootstrap_servers}")
    produced = odradek(
        down, "produce", "--topic", "t", "-X", "message.timeout.ms=2000", stdin="one\n"
    )
    _assert_one_line_error(produced, "cannot reach any broker")


def test_closed_stdout_ends_consume_quietly(odradek, odradek_broker) -> None:
    """`odradek consume ... | head -1`: more output than a pipe buffers, then the reader leaves."""
    topic = _new_topic(odradek, odradek_broker, records=2000, width=100)
    argv = ["consume", "--bootstrap-server", odradek_broker.bootstrap_servers, "--topic", topic]
    consumer = subprocess.Popen(
        [sys.executable, "-m", "odradek", *argv, "--from-beginning", "--timeout-ms", "20000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert consumer.stdout.readline() == f"{0:0100d}\n"
    consumer.stdout.close()
    stderr = consumer.stderr.read()
    assert consumer.wait(TIMEOUT) == 128 + signal.SIGPIPE
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr


def test_a_config_without_value_is_null_as_kafka_shows_it(odradek, odradek_broker) -> None:
    """log.flush.interval.ms has no default (log.flush.scheduler.interval.ms stands in): Kafka's
    DescribeConfigs answers value null, DEFAULT_CONFIG, no synonyms; kafka-configs prints null."""
    admin = AdminClient({"bootstrap.servers": odradek_broker.bootstrap_servers})
    resource = ConfigResource(ResourceType.BROKER, "1")
    entry = admin.describe_configs([resource])[resource].result(TIMEOUT)["log.flush.interval.ms"]
    assert entry.value is None
    assert entry.source == ConfigSource.DEFAULT_CONFIG.value and entry.is_default
    assert entry.synonyms == {}
    described = odradek(
        odradek_broker,
        "configs",
        "describe",
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
        "--all",
    )
    assert described.returncode == 0, described.stderr
    assert "  log.flush.interval.ms=null source=DEFAULT_CONFIG" in described.stdout.splitlines()
    assert "=None" not in described.stdout
