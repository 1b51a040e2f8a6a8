"""KIP-848 regex subscriptions: librdkafka sends the pattern, the broker resolves it (also for
topics created later) and assigns the matching topics' partitions."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from .test_mixed_clients import wait_for


@pytest.mark.timeout(90)
def test_regex_subscription_is_resolved_by_the_broker(broker):
    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    prefix = f"rx{uuid.uuid4().hex[:6]}"

    def create(name: str, partitions: int) -> None:
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)

    create(f"{prefix}-a", 2)
    create(f"{prefix}-b", 1)
    create(f"not-{prefix}", 1)
    consumer = Consumer({"bootstrap.servers": bs, "group.id": prefix, "group.protocol": "consumer"})
    assigned: set[tuple[str, int]] = set()

    def polled_assignment() -> set[tuple[str, int]]:
        consumer.poll(0.1)
        assigned.clear()
        assigned.update((tp.topic, tp.partition) for tp in consumer.assignment())
        return assigned

    try:
        consumer.subscribe([f"^{prefix}-.*"])
        wait_for(
            lambda: (
                polled_assignment() == {(f"{prefix}-a", 0), (f"{prefix}-a", 1), (f"{prefix}-b", 0)}
            )
        )
        create(f"{prefix}-c", 1)
        wait_for(lambda: (f"{prefix}-c", 0) in polled_assignment())
        assert not any(topic.startswith("not-") for topic, _ in assigned)
    finally:
        consumer.close()
