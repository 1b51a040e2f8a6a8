"""Transactions with confluent-kafka (librdkafka) against a real broker.

Until read_committed fetches land (the log side of transactions), what a
transaction left in the log is checked with read_uncommitted consumers and the
partitions' end offsets: each committed or aborted transaction leaves one marker
(a control batch, never delivered to the application) in every partition it
touched.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from odradek import EmbeddedBroker

from .conftest import TXN_CONFIG, create_topic, new_id


def producer(broker: EmbeddedBroker, transactional_id: str, **extra: object) -> Producer:
    p = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": transactional_id}
        | extra
    )
    p.init_transactions(30)
    return p


def read_all(broker: EmbeddedBroker, tps: list[TopicPartition]) -> list[bytes]:
    """Every record of ``tps`` (read_uncommitted), up to their end offsets."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": new_id("reader"),
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(tp.topic, tp.partition, 0) for tp in tps])
    values, eof = [], set()
    deadline = time.monotonic() + 30
    while len(eof) < len(tps) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                eof.add((msg.topic(), msg.partition()))
            continue
        values.append(msg.value())
    consumer.close()
    return values


def end_offsets(broker: EmbeddedBroker, tps: list[TopicPartition]) -> list[int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "x"})
    try:
        return [consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in tps]
    finally:
        consumer.close()


def test_commit_across_topics_and_partitions(broker: EmbeddedBroker) -> None:
    a, b = create_topic(broker.bootstrap_servers, 2), create_topic(broker.bootstrap_servers, 1)
    p = producer(broker, new_id("commit"))
    p.begin_transaction()
    for i in range(6):
        p.produce(a, b"a%d" % i, partition=i % 2)
    p.produce(b, b"b0", partition=0)
    p.commit_transaction(30)
    tps = [TopicPartition(a, 0), TopicPartition(a, 1), TopicPartition(b, 0)]
    assert sorted(read_all(broker, tps)) == [b"a0", b"a1", b"a2", b"a3", b"a4", b"a5", b"b0"]
    # 3 + 3 + 1 records and one COMMIT marker per partition, which no consumer sees.
    assert end_offsets(broker, tps) == [4, 4, 2]


def test_abort_writes_abort_markers_and_the_next_transaction_commits(
    broker: EmbeddedBroker,
) -> None:
    topic = create_topic(broker.bootstrap_servers, 1)
    p = producer(broker, new_id("abort"))
    p.begin_transaction()
    p.produce(topic, b"aborted")
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"committed")
    p.commit_transaction(30)
    tp = TopicPartition(topic, 0)
    # read_uncommitted sees the aborted record too; the two markers are never delivered.
    assert read_all(broker, [tp]) == [b"aborted", b"committed"]
    assert end_offsets(broker, [tp]) == [4]


def test_consume_transform_produce_commits_offsets_with_the_transaction(
    broker: EmbeddedBroker,
) -> None:
    source = create_topic(broker.bootstrap_servers, 1)
    sink = create_topic(broker.bootstrap_servers, 1)
    seed = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(4):
        seed.produce(source, b"in%d" % i)
    assert seed.flush(10) == 0
    group = new_id("ctp")
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([source])
    p = producer(broker, new_id("ctp"))
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 2 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg)
    # The first two records: aborted, so their offsets are not committed.
    p.begin_transaction()
    p.produce(sink, got[-1].value().upper())
    p.send_offsets_to_transaction(
        [TopicPartition(source, 0, got[-1].offset() + 1)], consumer.consumer_group_metadata(), 30
    )
    p.abort_transaction(30)
    committed = consumer.committed([TopicPartition(source, 0)], timeout=10)
    assert committed[0].offset < 0  # nothing committed
    # Then committed in a transaction: the group's offset moves with it.
    p.begin_transaction()
    p.produce(sink, got[-1].value().upper())
    p.send_offsets_to_transaction(
        [TopicPartition(source, 0, got[-1].offset() + 1)], consumer.consumer_group_metadata(), 30
    )
    p.commit_transaction(30)
    committed = consumer.committed([TopicPartition(source, 0)], timeout=10)
    assert committed[0].offset == got[-1].offset() + 1
    consumer.close()


def test_a_second_producer_with_the_same_id_fences_the_first(broker: EmbeddedBroker) -> None:
    topic = create_topic(broker.bootstrap_servers, 1)
    tid = new_id("fence")
    old = producer(broker, tid)
    old.begin_transaction()
    old.produce(topic, b"from the old instance")
    old.flush(30)
    new = producer(broker, tid)  # aborts the old one's open transaction, bumps the epoch
    new.begin_transaction()
    new.produce(topic, b"from the new instance")
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as info:
        old.commit_transaction(30)
    error = info.value.args[0]
    assert error.fatal()
    assert error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED)
    tp = TopicPartition(topic, 0)
    assert read_all(broker, [tp]) == [b"from the old instance", b"from the new instance"]
    # The old transaction's ABORT marker, the new one's record and COMMIT marker.
    assert end_offsets(broker, [tp]) == [4]


def test_transactional_offsets_are_decided_by_their_markers_across_a_crash(tmp_path) -> None:
    """The group coordinator reloads TxnOffsetCommit records as pending and lets the markers
    decide them: committed offsets stay, aborted ones never appear, and those of a
    transaction open at the crash are dropped when a new instance aborts it."""
    with EmbeddedBroker(config=TXN_CONFIG, data_dir=tmp_path / "data") as b:
        topic = create_topic(b.bootstrap_servers, 1)
        tp = TopicPartition(topic, 0)
        tid = new_id("crash")
        kept, dropped, open_ = new_id("kept"), new_id("dropped"), new_id("open")

        def offsets(p: Producer, group: str, offset: int) -> None:
            metadata = Consumer(
                {"bootstrap.servers": b.bootstrap_servers, "group.id": group}
            ).consumer_group_metadata()
            p.send_offsets_to_transaction([TopicPartition(topic, 0, offset)], metadata, 30)

        p = producer(b, tid)
        p.begin_transaction()
        p.produce(topic, b"1")
        offsets(p, kept, 11)
        p.commit_transaction(30)
        p.begin_transaction()
        p.produce(topic, b"2")
        offsets(p, dropped, 22)
        p.abort_transaction(30)
        p.begin_transaction()
        p.produce(topic, b"3")
        offsets(p, open_, 33)
        p.flush(30)
        b.restart(hard=True)

        def committed(group: str) -> int:
            c = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": group})
            try:
                return c.committed([tp], timeout=10)[0].offset
            finally:
                c.close()

        assert committed(kept) == 11
        assert committed(dropped) < 0
        # (open_'s offsets are pending: librdkafka's committed() asks with RequireStable and
        # is told UNSTABLE_OFFSET_COMMIT until the transaction ends.)
        again = producer(b, tid)  # aborts the open transaction first (same producer id)
        again.begin_transaction()
        again.produce(topic, b"4")
        offsets(again, kept, 44)
        again.commit_transaction(30)
        assert committed(kept) == 44
        assert committed(open_) < 0  # the aborted pending offsets never land
