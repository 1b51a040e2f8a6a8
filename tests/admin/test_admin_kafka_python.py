"""Admin APIs through kafka-python 3's KafkaAdminClient, and its (default) idempotent producer."""

from __future__ import annotations

import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import InvalidPartitionsError, InvalidTopicError, TopicAlreadyExistsError

TIMEOUT_MS = 30_000


def unique(prefix: str = "kp") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def admin(odradek_broker):
    client = KafkaAdminClient(
        bootstrap_servers=odradek_broker.bootstrap_servers, request_timeout_ms=TIMEOUT_MS
    )
    yield client
    client.close()


def test_create_alter_describe_delete(admin: KafkaAdminClient) -> None:
    name = unique()
    admin.create_topics([NewTopic(name, 2, 1, topic_configs={"segment.bytes": "1048576"})])
    assert name in admin.list_topics()
    result = admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, name, configs={"retention.ms": "60000"})]
    )
    assert result["topic"][name] == "OK"
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
    configs = described["topic"][name]
    assert configs["retention.ms"]["value"] == "60000"
    assert configs["segment.bytes"]["value"] == "1048576"
    admin.create_partitions({name: NewPartitions(total_count=5)})
    (topic,) = admin.describe_topics([name])
    assert len(topic["partitions"]) == 5
    admin.delete_topics([name])
    assert name not in admin.list_topics()


def test_errors(admin: KafkaAdminClient) -> None:
    name = unique()
    admin.create_topics([NewTopic(name, 1, 1)])
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic(name, 1, 1)])
    with pytest.raises(InvalidTopicError):
        admin.create_topics([NewTopic("no spaces allowed", 1, 1)])
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({name: NewPartitions(total_count=1)})


def test_validate_only(admin: KafkaAdminClient) -> None:
    name = unique()
    admin.create_topics([NewTopic(name, 1, 1)], validate_only=True)
    assert name not in admin.list_topics()


def test_describe_cluster_and_log_dirs(admin: KafkaAdminClient, odradek_broker) -> None:
    cluster = admin.describe_cluster()
    assert len(cluster["brokers"]) == 1
    assert cluster["controller_id"] == cluster["brokers"][0]["broker_id"]
    name = unique()
    admin.create_topics([NewTopic(name, 2, 1)])
    producer = KafkaProducer(bootstrap_servers=odradek_broker.bootstrap_servers)
    producer.send(name, b"x" * 1000, partition=1).get(timeout=30)
    producer.close()
    (per_broker,) = admin.describe_log_dirs()
    sizes = {
        (t["name"], p["partition_index"]): p["partition_size"]
        for log_dir in per_broker["log_dirs"]
        for t in log_dir["topics"]
        for p in t["partitions"]
    }
    assert sizes[(name, 1)] > 1000
    assert sizes[(name, 0)] == 0


def test_default_idempotent_producer_no_duplicates(admin: KafkaAdminClient, odradek_broker) -> None:
    name = unique()
    admin.create_topics([NewTopic(name, 1, 1)])
    producer = KafkaProducer(bootstrap_servers=odradek_broker.bootstrap_servers)
    futures = [producer.send(name, str(i).encode()) for i in range(300)]
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close()
    assert offsets == list(range(300))
    consumer = KafkaConsumer(
        bootstrap_servers=odradek_broker.bootstrap_servers,
        enable_auto_commit=False,
        consumer_timeout_ms=5000,
    )
    consumer.assign([TopicPartition(name, 0)])
    consumer.seek_to_beginning()
    values = [int(m.value) for m in consumer]
    consumer.close()
    assert values == list(range(300))


def test_legacy_alter_configs_replaces_overrides_and_validates(admin: KafkaAdminClient) -> None:
    name = unique()
    admin.create_topics([NewTopic(name, 1, 1, topic_configs={"segment.bytes": "1048576"})])
    resource = ConfigResource(ConfigResourceType.TOPIC, name, configs={"retention.ms": "-5"})
    result = admin.alter_configs([resource], incremental=False)
    assert (
        "InvalidConfiguration" in result["topic"][name]
        or "INVALID_CONFIG" in result["topic"][name].upper()
    )
    resource = ConfigResource(ConfigResourceType.TOPIC, name, configs={"retention.ms": "1000"})
    assert admin.alter_configs([resource], incremental=False)["topic"][name] == "OK"
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])["topic"][
        name
    ]
    assert configs["retention.ms"]["value"] == "1000"
