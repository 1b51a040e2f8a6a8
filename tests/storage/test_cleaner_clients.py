"""Batches the cleaner rebuilt (recompressed, with delete horizons, emptied) read by real clients
through a running broker: librdkafka (confluent-kafka) and kafka-python's own parser."""

from __future__ import annotations

import time
import uuid

import pytest
from codec_spec import parse


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_clients_read_a_compacted_compressed_topic(odradek_broker, codec):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    topic = f"compacted-{codec}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": odradek_broker.bootstrap_servers})
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": "2048",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "600000",
    }
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(timeout=30)
    producer = Producer(
        {
            "bootstrap.servers": odradek_broker.bootstrap_servers,
            "compression.type": codec,
            "linger.ms": 5,
            "enable.idempotence": True,
            "batch.num.messages": 7,
        }
    )
    latest: dict[bytes, bytes | None] = {}
    for i in range(300):
        key = b"key-%d" % (i % 12)
        value = None if i % 25 == 24 else b"value-%d-" % i + b"x" * 30
        if i in (40, 120):  # a key deleted for good: its tombstone stays, with a delete horizon
            key, value = b"deleted", None if i == 120 else b"soon gone"
        producer.produce(topic, value, key)
        latest[key] = value
        if i % 20 == 19:
            producer.flush(30)
    assert producer.flush(30) == 0
    partition_dir = next(odradek_broker.data_dir.rglob(f"{topic}-0"))

    def stored_records() -> int:
        return sum(
            len(b.records)
            for seg in sorted(partition_dir.glob("*.log"))
            for b in parse(seg.read_bytes())
        )

    deadline = time.monotonic() + 60
    while (
        stored_records() >= 100 and time.monotonic() < deadline
    ):  # the background cleaner, once a second
        time.sleep(0.2)
    assert stored_records() < 100
    batches = [b for seg in sorted(partition_dir.glob("*.log")) for b in parse(seg.read_bytes())]
    assert {b.codec for b in batches if b.records} == {
        ["none", "gzip", "snappy", "lz4", "zstd"].index(codec)
    }
    assert any(b.delete_horizon is not None for b in batches)  # tombstones kept with a horizon

    consumer = Consumer(
        {
            "bootstrap.servers": odradek_broker.bootstrap_servers,
            "group.id": topic,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: list[tuple[int, bytes, bytes | None]] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not seen or seen[-1][0] < 299):
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                seen.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    assert [o for o, _, _ in seen] == sorted({o for o, _, _ in seen}) and seen[-1][0] == 299
    assert {k: v for _, k, v in seen} == latest

    if codec == "snappy":
        return  # kafka-python needs python-snappy, which is not installed
    kafka_python = KafkaConsumer(
        bootstrap_servers=odradek_broker.bootstrap_servers,
        enable_auto_commit=False,
        consumer_timeout_ms=5000,
    )
    kafka_python.assign([KTopicPartition(topic, 0)])
    kafka_python.seek(KTopicPartition(topic, 0), 0)
    try:
        read = [(m.offset, m.key, m.value) for m in kafka_python]
    finally:
        kafka_python.close()
    assert read == seen
