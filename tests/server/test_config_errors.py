"""Bad config values are answered in Kafka's ConfigException words: key, value, expected type."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from odradek.server.config import BrokerConfig, ConfigError
from odradek.storage.config import COMPRESSION_TYPES


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("num.partitions", "x", "Not a number of type INT"),
        ("num.partitions", "1_000", "Not a number of type INT"),
        ("num.partitions", "99999999999", "Not a number of type INT"),
        ("log.retention.ms", "1.5", "Not a number of type LONG"),
        ("offsets.topic.replication.factor", "40000", "Not a number of type SHORT"),
        ("log.cleaner.io.buffer.load.factor", "abc", "Not a number of type DOUBLE"),
        ("log.cleaner.enable", "maybe", "Expected value to be either true or false"),
        ("num.partitions", "0", "Value must be at least 1"),
        ("group.max.size", "many", "Not a number of type INT"),
        ("group.consumer.session.timeout.ms", "0", "Value must be at least 1"),
        ("compression.lz4.level", "18", "Value must be no more than 17"),
        ("log.cleaner.min.cleanable.ratio", "1.5", "Value must be no more than 1"),
        ("log.cleaner.io.buffer.load.factor", "0", "Value must be above 0"),
        ("compression.type", "brotli", "String must be one of: " + ", ".join(COMPRESSION_TYPES)),
        ("log.cleanup.policy", "delete,shred", "String must be one of: compact, delete"),
        (
            "group.consumer.migration.policy",
            "sideways",
            "String must be one of: disabled, upgrade, downgrade, bidirectional",
        ),
    ],
)
def test_bad_value_message(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        BrokerConfig({key: value})
    assert str(raised.value) == f"Invalid value {value} for configuration {key}: {message}"


def test_serve_prints_one_line_and_exits_non_zero(tmp_path) -> None:
    argv = ["serve", "--data-dir", str(tmp_path), "--port", "0", "-o", "num.partitions=x"]
    result = subprocess.run(
        [sys.executable, "-m", "odradek", *argv], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "odradek: invalid configuration: "
        "Invalid value x for configuration num.partitions: Not a number of type INT"
    ]


def _alter_error(admin: AdminClient, resource: ConfigResource) -> KafkaException:
    (future,) = admin.alter_configs([resource]).values()
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=30)
    return raised.value


def test_alter_configs_answers_invalid_config_in_kafkas_words(odradek_broker) -> None:
    admin = AdminClient({"bootstrap.servers": odradek_broker.bootstrap_servers})
    broker = ConfigResource(ResourceType.BROKER, "1", set_config={"log.retention.ms": "abc"})
    error = _alter_error(admin, broker).args[0]
    assert error.name() == "INVALID_CONFIG"
    assert "Invalid value abc for configuration log.retention.ms: Not a number of type LONG" in (
        error.str()
    )
    topic = f"cfg-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    bad = ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.ms": "abc"})
    error = _alter_error(admin, bad).args[0]
    assert error.name() == "INVALID_CONFIG"
    assert "Invalid value abc for configuration retention.ms: Not a number of type LONG" in (
        error.str()
    )
