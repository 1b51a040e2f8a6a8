"""log.cleaner.enable reaches the broker's LogManager: two brokers side by side, one cleaning."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek import EmbeddedBroker

TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": "1024",
    "min.cleanable.dirty.ratio": "0.01",
}
RECORDS = 300


def fill(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("compacted", 1, 1, config=TOPIC_CONFIG)])["compacted"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(RECORDS):
        producer.produce("compacted", key=b"key%d" % (i % 3), value=b"value-%d" % i + b"x" * 40)
        producer.poll(0)
        producer.flush(10)  # one batch per record, so segments roll and hold duplicates
    assert producer.flush(30) == 0


def stored(bootstrap: str) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "count",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.subscribe(["compacted"])
    count = 0
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                return count  # partition EOF
            count += 1
        raise AssertionError("no partition end within 30 s")
    finally:
        consumer.close()


@pytest.mark.timeout(120)
def test_only_the_enabled_broker_cleans() -> None:
    with EmbeddedBroker() as cleaning, EmbeddedBroker({"log.cleaner.enable": "false"}) as idle:
        fill(idle.bootstrap_servers)
        fill(cleaning.bootstrap_servers)
        deadline = time.monotonic() + 60
        while stored(cleaning.bootstrap_servers) >= RECORDS:
            assert time.monotonic() < deadline, "the broker with the cleaner enabled never cleaned"
            time.sleep(0.5)
        # The idle broker had its data longer than the cleaning one and ran its background
        # loop as often: only the setting keeps its log whole.
        assert stored(idle.bootstrap_servers) == RECORDS
