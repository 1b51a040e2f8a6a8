"""Fixtures for group tests: a real broker tuned for fast rebalances."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek import EmbeddedBroker

#: Short timeouts keep rebalances quick; the broker must accept them.
GROUP_CONFIG = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "5",
    "group.consumer.heartbeat.interval.ms": "200",
    "group.consumer.session.timeout.ms": "3000",
}


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config=GROUP_CONFIG) as b:
        yield b


@pytest.fixture
def fresh_broker(tmp_path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config=GROUP_CONFIG, data_dir=tmp_path / "data") as b:
        yield b


def create_topic(bootstrap: str, partitions: int) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    return name


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % partitions)
    assert producer.flush(10) == 0
