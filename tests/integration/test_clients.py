"""Real clients against a real broker process: every codec, headers, null and empty keys/values."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer

from odradek.server.embedded import EmbeddedBroker


def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


MESSAGES = [
    (b"k1", b"v1", [("h1", b"x"), ("h2", None)]),
    (None, b"no key", []),
    (b"no value", None, []),
    (b"", b"", [("empty", b"")]),
    (None, None, []),
    (b"big", bytes(range(256)) * 200, []),
]

#: kafka-python and aiokafka refuse null header values and records with neither key nor value.
PURE_PYTHON_CLIENT_MESSAGES = [
    (k, v, [(hk, hv) for hk, hv in h if hv is not None])
    for k, v, h in MESSAGES
    if (k, v) != (None, None)
]


def consume_confluent(bootstrap: str, topic: str, n: int) -> list:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "g-" + topic,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out = []
        for _ in range(100):
            if len(out) >= n:
                break
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append(msg)
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_kafka_roundtrip(broker: EmbeddedBroker, codec: str) -> None:
    topic = topic_name()
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "compression.type": codec,
            "enable.idempotence": False,
            "linger.ms": 5,
        }
    )
    for key, value, headers in MESSAGES:
        producer.produce(topic, key=key, value=value, headers=headers, partition=0)
    assert producer.flush(30) == 0
    got = consume_confluent(broker.bootstrap_servers, topic, len(MESSAGES))
    assert [(m.key(), m.value(), m.headers() or []) for m in got] == [
        (k, v, h) for k, v, h in MESSAGES
    ]
    assert [m.offset() for m in got] == list(range(len(MESSAGES)))


@pytest.mark.parametrize("codec", [None, "gzip", "lz4", "zstd"])
def test_kafka_python_roundtrip(broker: EmbeddedBroker, codec: str | None) -> None:
    topic = topic_name()
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers,
        compression_type=codec,
        request_timeout_ms=15000,
        max_block_ms=15000,
    )
    for key, value, headers in PURE_PYTHON_CLIENT_MESSAGES:
        producer.send(topic, key=key, value=value, headers=headers, partition=0)
    producer.flush(30)
    producer.close(5)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=10000,
    )
    try:
        consumer.assign([__import__("kafka").TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        got = [next(consumer) for _ in PURE_PYTHON_CLIENT_MESSAGES]
    finally:
        consumer.close()
    assert [(m.key, m.value, [(k, v) for k, v in m.headers]) for m in got] == [
        (k, v, h) for k, v, h in PURE_PYTHON_CLIENT_MESSAGES
    ]


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_aiokafka_roundtrip(broker: EmbeddedBroker, codec: str | None) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    topic = topic_name()

    async def main() -> list:
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap_servers, compression_type=codec
        )
        await producer.start()
        try:
            for key, value, headers in PURE_PYTHON_CLIENT_MESSAGES:
                await producer.send_and_wait(
                    topic, key=key, value=value, headers=headers, partition=0
                )
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap_servers,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            tp = AioTopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            return [await consumer.getone() for _ in PURE_PYTHON_CLIENT_MESSAGES]
        finally:
            await consumer.stop()

    got = asyncio.run(asyncio.wait_for(main(), 60))
    assert [(m.key, m.value, list(m.headers)) for m in got] == [
        (k, v, h) for k, v, h in PURE_PYTHON_CLIENT_MESSAGES
    ]


def test_offsets_for_times(broker: EmbeddedBroker) -> None:
    topic = topic_name()
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i, ts in enumerate([1000, 2000, 3000]):
        producer.produce(topic, value=b"%d" % i, partition=0, timestamp=ts)
        producer.flush(10)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "ts"})
    try:

        def offset_for(timestamp: int) -> int:
            return consumer.offsets_for_times([TopicPartition(topic, 0, timestamp)], 10)[0].offset

        assert [offset_for(ts) for ts in (0, 1500, 2000, 3000, 9999)] == [0, 1, 1, 2, -1]
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)
        assert (low, high) == (0, 3)
    finally:
        consumer.close()
