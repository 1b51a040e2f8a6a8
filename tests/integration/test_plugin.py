"""The pytest plugin's fixture, used as a user's test suite would use it."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition


def test_odradek_broker_fixture(odradek_broker) -> None:
    producer = Producer({"bootstrap.servers": odradek_broker.bootstrap_servers})
    producer.produce("plugin-topic", value=b"hello", partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": odradek_broker.bootstrap_servers, "group.id": "plugin"}
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("plugin-topic", 0), 10)
        assert (low, high) == (0, 1)
    finally:
        consumer.close()
