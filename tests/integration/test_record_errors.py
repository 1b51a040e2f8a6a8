"""Per-record produce errors end to end: a compacted topic refuses records without a key."""

from __future__ import annotations

import uuid
from datetime import timedelta

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.produce.v9 import request as produce9

from odradek.protocol.errors import ErrorCode
from odradek.server.embedded import EmbeddedBroker

from .wire_client import WireClient


def create_compacted_topic(bootstrap: str) -> str:
    topic = "compacted-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})], operation_timeout=10
    )
    futures[topic].result(timeout=15)
    return topic


def produce_one(bootstrap: str, topic: str, key: bytes | None) -> KafkaError | None:
    """The delivery error of one record (None when it was written)."""
    outcome: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 15000})
    producer.produce(topic, value=b"v", key=key, on_delivery=lambda err, msg: outcome.append(err))
    assert producer.flush(20) == 0
    return outcome[0]


def test_null_key_to_compacted_topic_is_invalid_record(broker: EmbeddedBroker) -> None:
    topic = create_compacted_topic(broker.bootstrap_servers)
    err = produce_one(broker.bootstrap_servers, topic, None)
    assert err is not None and err.code() == KafkaError.INVALID_RECORD
    assert produce_one(broker.bootstrap_servers, topic, b"k") is None


def test_produce_v9_lists_the_bad_records(broker: EmbeddedBroker) -> None:
    topic = create_compacted_topic(broker.bootstrap_servers)
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 2**31 - 1)
    for i, key in enumerate([b"a", None, b"c", None]):
        builder.append(i, timestamp=None, key=key, value=b"v", headers=[])
    request = produce9.ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=timedelta(seconds=10),
        topic_data=(
            produce9.TopicProduceData(
                name=topic,
                partition_data=(
                    produce9.PartitionProduceData(index=0, records=bytes(builder.build())),
                ),
            ),
        ),
    )
    client = WireClient(broker.bootstrap_servers)
    try:
        part = client.call(request).responses[0].partition_responses[0]
    finally:
        client.close()
    assert part.error_code == ErrorCode.invalid_record
    assert [e.batch_index for e in part.record_errors] == [1, 3]
    assert part.error_message.startswith(
        f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    )
