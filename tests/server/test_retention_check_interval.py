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
