"""log.retention.check.interval.ms reaches the LogManager: retention runs on the broker's interval.

With Kafka's default (300000 ms) the log start offset would not move for five
minutes, so the bounded wait below only passes when the config is wired through.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from odradek import EmbeddedBroker

TIMEOUT = 30


def _earliest(consumer: Consumer, tp: TopicPartition) -> int:
    low, _ = consumer.get_watermark_offsets(tp, timeout=TIMEOUT, cached=False)
    return low


def test_retention_runs_on_the_configured_check_interval() -> None:
    topic = f"retention-{uuid.uuid4().hex[:10]}"
    with EmbeddedBroker(config={"log.retention.check.interval.ms": "200"}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        (created,) = admin.create_topics(
            [NewTopic(topic, 1, 1, config={"segment.bytes": "1024"})]
        ).values()
        created.result(TIMEOUT)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        for i in range(50):
            producer.produce(topic, b"x" * 100, key=str(i).encode())
            producer.flush(TIMEOUT)  # one batch per record, so the log rolls into many segments
        consumer = Consumer(
            {"bootstrap.servers": broker.bootstrap_servers, "group.id": f"g-{uuid.uuid4().hex[:8]}"}
        )
        try:
            tp = TopicPartition(topic, 0)
            assert _earliest(consumer, tp) == 0
            resource = ConfigResource(
                ResourceType.TOPIC,
                topic,
                incremental_configs=[
                    ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)
                ],
            )
            (altered,) = admin.incremental_alter_configs([resource]).values()
            altered.result(TIMEOUT)
            deadline = time.monotonic() + 20
            earliest = 0
            while earliest == 0 and time.monotonic() < deadline:
                time.sleep(0.2)
                earliest = _earliest(consumer, tp)
        finally:
            consumer.close()
    assert earliest > 0, "retention did not run within 20 s of retention.ms=1"


def test_an_idle_topic_of_old_records_is_emptied_after_retention_ms() -> None:
    """Records two days old in the one (active) segment of a topic with retention.ms of an
    hour: the next retention check rolls the log and deletes them, as Kafka's deleteSegments."""
    topic = f"idle-{uuid.uuid4().hex[:10]}"
    old = int(time.time() * 1000) - 2 * 86_400_000
    with EmbeddedBroker(config={"log.retention.check.interval.ms": "200"}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        (created,) = admin.create_topics(
            [NewTopic(topic, 1, 1, config={"retention.ms": "3600000"})]
        ).values()
        created.result(TIMEOUT)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        for i in range(10):
            producer.produce(topic, b"old-%d" % i, timestamp=old)
        assert producer.flush(TIMEOUT) == 0
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": f"g-{uuid.uuid4().hex[:8]}",
                "auto.offset.reset": "earliest",
            }
        )
        try:
            tp = TopicPartition(topic, 0)
            deadline = time.monotonic() + 20
            watermarks = consumer.get_watermark_offsets(tp, timeout=TIMEOUT, cached=False)
            while watermarks != (10, 10) and time.monotonic() < deadline:
                time.sleep(0.2)
                watermarks = consumer.get_watermark_offsets(tp, timeout=TIMEOUT, cached=False)
            assert watermarks == (10, 10), "the old records were not deleted within 20 s"
            producer.produce(topic, b"new")  # the log goes on at the log end offset
            assert producer.flush(TIMEOUT) == 0
            consumer.assign([TopicPartition(topic, 0, 0)])  # below the start: reset to earliest
            msg = consumer.poll(TIMEOUT)
            assert msg is not None and msg.error() is None
            assert (msg.offset(), msg.value()) == (10, b"new")
        finally:
            consumer.close()
