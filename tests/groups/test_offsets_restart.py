"""Committed offsets are in __consumer_offsets and survive broker restarts."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition

from .conftest import create_topic, produce


def consume_and_commit(bootstrap: str, topic: str, group: str, count: int) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe([topic])
    seen = 0
    try:
        for _ in range(200):
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                seen += 1
                if seen == count:
                    break
        assert seen == count
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def committed(bootstrap: str, topic: str, group: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return [tp.offset for tp in tps]
    finally:
        consumer.close()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "sigkill"])
def test_commits_survive_restart(fresh_broker, hard):
    bs = fresh_broker.bootstrap_servers
    topic = create_topic(bs, 2)
    produce(bs, topic, [b"v%d" % i for i in range(20)], 2)
    consume_and_commit(bs, topic, "durable", 20)
    assert committed(bs, topic, "durable", 2) == [10, 10]
    fresh_broker.restart(hard=hard)
    assert committed(bs, topic, "durable", 2) == [10, 10]
    # A new member of the group resumes after the commit: nothing left to read.
    produce(bs, topic, [b"late"], 2)
    consume_and_commit(bs, topic, "durable", 1)
    assert sorted(committed(bs, topic, "durable", 2)) == [10, 11]


@pytest.mark.timeout(60)
def test_simple_consumer_commit_metadata_and_multi_group_fetch(broker):
    from kafka import KafkaAdminClient, KafkaConsumer
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KTP

    bs = broker.bootstrap_servers
    topic = create_topic(bs, 1)
    produce(bs, topic, [b"x"] * 5, 1)
    for group, offset in (("simple-a", 3), ("simple-b", 4)):
        consumer = KafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
        consumer.assign([KTP(topic, 0)])
        consumer.commit({KTP(topic, 0): OffsetAndMetadata(offset, f"meta-{group}", -1)})
        consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        # One OffsetFetch v8 for both groups (KIP-709); metadata comes back as stored.
        got = admin.list_group_offsets({"simple-a": None, "simple-b": [KTP(topic, 0)]})
        assert got["simple-a"][KTP(topic, 0)] == OffsetAndMetadata(3, "meta-simple-a", -1)
        assert got["simple-b"][KTP(topic, 0)] == OffsetAndMetadata(4, "meta-simple-b", -1)
    finally:
        admin.close()
