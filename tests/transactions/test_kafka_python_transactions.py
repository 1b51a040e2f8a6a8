"""kafka-python's transactional producer (transactions before version 2: AddPartitionsToTxn and
EndTxn from the client) against a real broker whose leaders verify each partition with the
transaction coordinator (KIP-890 part 1) and which advertises transaction.version 2."""

from __future__ import annotations

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from odradek import EmbeddedBroker

from .conftest import create_topic, new_id


def test_commit_and_abort(broker: EmbeddedBroker) -> None:
    bootstrap = broker.bootstrap_servers
    topic, group = create_topic(bootstrap, 2), new_id("group")
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=new_id("kp"))
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"kept-0", partition=0)
        producer.send(topic, b"kept-1", partition=1)
        producer.send_offsets_to_transaction(
            {TopicPartition(topic, 0): OffsetAndMetadata(7, "", -1)}, group
        )
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"aborted", partition=0)
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, b"kept-2", partition=1)
        producer.commit_transaction()
    finally:
        producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
    )
    try:
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        consumer.assign(tps)
        committed = consumer.committed(TopicPartition(topic, 0))
        consumer.seek_to_beginning(*tps)
        values = sorted(m.value for m in consumer)
    finally:
        consumer.close()
    assert values == [b"kept-0", b"kept-1", b"kept-2"]
    assert committed == 7
