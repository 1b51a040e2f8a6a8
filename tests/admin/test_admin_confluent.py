"""Admin APIs driven by confluent-kafka (librdkafka) against a real broker process."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

TIMEOUT = 30


def unique(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def admin(odradek_broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": odradek_broker.bootstrap_servers})


def create(admin: AdminClient, topic: NewTopic, validate_only: bool = False) -> None:
    admin.create_topics([topic], validate_only=validate_only)[topic.topic].result(TIMEOUT)


def create_error(admin: AdminClient, topic: NewTopic) -> int:
    with pytest.raises(KafkaException) as info:
        create(admin, topic)
    return info.value.args[0].code()


def topic_configs(admin: AdminClient, name: str) -> dict:
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)]).values()
    return future.result(TIMEOUT)


def test_create_describe_delete(admin: AdminClient) -> None:
    name = unique()
    create(
        admin,
        NewTopic(name, num_partitions=3, replication_factor=1, config={"retention.ms": "123456"}),
    )
    metadata = admin.list_topics(name, timeout=TIMEOUT)
    assert sorted(metadata.topics[name].partitions) == [0, 1, 2]
    configs = topic_configs(admin, name)
    retention = configs["retention.ms"]
    assert retention.value == "123456"
    assert ConfigSource(retention.source) is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert ConfigSource(configs["segment.bytes"].source) is not ConfigSource.DYNAMIC_TOPIC_CONFIG
    admin.delete_topics([name])[name].result(TIMEOUT)
    assert name not in admin.list_topics(timeout=TIMEOUT).topics


@pytest.mark.parametrize("name", ["bad name", "x" * 250, ".", "..", "slash/es"])
def test_illegal_names_rejected(admin: AdminClient, name: str) -> None:
    assert create_error(admin, NewTopic(name, 1, 1)) == KafkaError.TOPIC_EXCEPTION


def test_longest_legal_name_accepted(admin: AdminClient) -> None:
    name = "n" * 239 + uuid.uuid4().hex[:10]
    create(admin, NewTopic(name, 1, 1))
    assert name in admin.list_topics(timeout=TIMEOUT).topics


def test_exists_and_dot_underscore_collision(admin: AdminClient) -> None:
    base = unique("coll")
    create(admin, NewTopic(f"{base}.a", 1, 1))
    assert create_error(admin, NewTopic(f"{base}.a", 1, 1)) == KafkaError.TOPIC_ALREADY_EXISTS
    assert create_error(admin, NewTopic(f"{base}_a", 1, 1)) == KafkaError.TOPIC_EXCEPTION


def test_bad_partitions_replication_and_configs(admin: AdminClient) -> None:
    assert create_error(admin, NewTopic(unique(), 0, 1)) == KafkaError.INVALID_PARTITIONS
    assert create_error(admin, NewTopic(unique(), 1, 2)) == KafkaError.INVALID_REPLICATION_FACTOR
    bad_value = NewTopic(unique(), 1, 1, config={"retention.ms": "soon"})
    assert create_error(admin, bad_value) == KafkaError.INVALID_CONFIG
    unknown = NewTopic(unique(), 1, 1, config={"no.such.config": "1"})
    assert create_error(admin, unknown) == KafkaError.INVALID_CONFIG


def test_validate_only_creates_nothing(admin: AdminClient) -> None:
    name = unique()
    create(admin, NewTopic(name, 2, 1), validate_only=True)
    assert name not in admin.list_topics(timeout=TIMEOUT).topics
    with pytest.raises(KafkaException) as info:
        create(admin, NewTopic(name, 0, 1), validate_only=True)
    assert info.value.args[0].code() == KafkaError.INVALID_PARTITIONS


def test_create_partitions(admin: AdminClient) -> None:
    name = unique()
    create(admin, NewTopic(name, 1, 1))
    admin.create_partitions([NewPartitions(name, 4)])[name].result(TIMEOUT)
    assert len(admin.list_topics(name, timeout=TIMEOUT).topics[name].partitions) == 4
    with pytest.raises(KafkaException) as info:
        admin.create_partitions([NewPartitions(name, 2)])[name].result(TIMEOUT)
    assert info.value.args[0].code() == KafkaError.INVALID_PARTITIONS


def test_delete_unknown_topic(admin: AdminClient) -> None:
    name = unique()
    with pytest.raises(KafkaException) as info:
        admin.delete_topics([name])[name].result(TIMEOUT)
    assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_incremental_alter_set_append_subtract_delete(admin: AdminClient) -> None:
    name = unique()
    create(admin, NewTopic(name, 1, 1))

    def alter(*entries: ConfigEntry) -> None:
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=list(entries))
        (future,) = admin.incremental_alter_configs([resource]).values()
        future.result(TIMEOUT)

    alter(ConfigEntry("retention.ms", "5000", incremental_operation=AlterConfigOpType.SET))
    alter(ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND))
    configs = topic_configs(admin, name)
    assert configs["retention.ms"].value == "5000"
    assert configs["cleanup.policy"].value == "delete,compact"
    alter(ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT))
    alter(ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE))
    configs = topic_configs(admin, name)
    assert configs["cleanup.policy"].value == "compact"
    assert ConfigSource(configs["retention.ms"].source) is not ConfigSource.DYNAMIC_TOPIC_CONFIG
    with pytest.raises(KafkaException) as info:
        alter(ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND))
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_max_message_bytes_applies_live(admin: AdminClient, odradek_broker) -> None:
    name = unique()
    create(admin, NewTopic(name, 1, 1, config={"max.message.bytes": "1000"}))
    producer = Producer({"bootstrap.servers": odradek_broker.bootstrap_servers, "linger.ms": 0})
    errors: list = []

    def produce(size: int) -> None:
        errors.clear()
        producer.produce(name, b"x" * size, on_delivery=lambda err, msg: errors.append(err))
        assert producer.flush(TIMEOUT) == 0

    produce(3000)
    assert errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    resource = ConfigResource(
        ResourceType.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry("max.message.bytes", "100000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    (future,) = admin.incremental_alter_configs([resource]).values()
    future.result(TIMEOUT)
    produce(3000)
    assert errors == [None]


def test_broker_configs_describe(admin: AdminClient, odradek_broker) -> None:
    cluster = admin.describe_cluster().result(TIMEOUT)
    assert len(cluster.nodes) == 1
    node = cluster.nodes[0]
    assert cluster.controller.id == node.id and cluster.cluster_id
    (future,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, str(node.id))]).values()
    configs = future.result(TIMEOUT)
    assert configs["num.partitions"].value == "1"
    assert configs["log.retention.hours"].is_read_only is False
    # As Kafka: read-only unless the config is one of Kafka's dynamic broker configs.
    assert configs["log.dirs"].is_read_only is True
    assert configs["listeners"].is_read_only is False
    assert configs["sasl.kerberos.min.time.before.relogin"].is_read_only is False
    assert configs["ssl.keystore.password"].is_sensitive is True
    assert configs["ssl.keystore.password"].value is None


def test_delete_records_moves_low_watermark(admin: AdminClient, odradek_broker) -> None:
    name = unique()
    create(admin, NewTopic(name, 1, 1))
    producer = Producer({"bootstrap.servers": odradek_broker.bootstrap_servers})
    for i in range(10):
        producer.produce(name, str(i).encode())
    assert producer.flush(TIMEOUT) == 0
    (future,) = admin.delete_records([TopicPartition(name, 0, 4)]).values()
    assert future.result(TIMEOUT).low_watermark == 4
    consumer = Consumer(
        {
            "bootstrap.servers": odradek_broker.bootstrap_servers,
            "group.id": unique("g"),
            "enable.auto.commit": False,
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(name, 0), timeout=TIMEOUT)
    finally:
        consumer.close()
    assert (low, high) == (4, 10)


def test_idempotent_producer_no_duplicates(admin: AdminClient, odradek_broker) -> None:
    name = unique()
    create(admin, NewTopic(name, 2, 1))
    producer = Producer(
        {"bootstrap.servers": odradek_broker.bootstrap_servers, "enable.idempotence": True}
    )
    for i in range(200):
        producer.produce(name, str(i).encode(), key=str(i % 7).encode())
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": odradek_broker.bootstrap_servers,
            "group.id": unique("g"),
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(name, p, 0) for p in (0, 1)])
    seen: list[int] = []
    try:
        while len(seen) < 200:
            msg = consumer.poll(TIMEOUT)
            assert msg is not None, f"only {len(seen)} records arrived"
            assert msg.error() is None
            seen.append(int(msg.value()))
    finally:
        consumer.close()
    assert sorted(seen) == list(range(200))
