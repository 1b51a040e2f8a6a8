"""WriteTxnMarkers end to end: transactional batches and markers written over the wire, read
back by confluent-kafka consumers with each isolation level.

Until the transaction coordinator lands, the test is the coordinator: it gets a producer id
from InitProducerId, produces transactional batches with kio, and writes COMMIT/ABORT
markers with WriteTxnMarkers, as a coordinator on another broker would.
"""

from __future__ import annotations

import io
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.describe_producers.v0 import request as describe_producers0
from kio.schema.init_producer_id.v4 import request as init4
from kio.schema.list_offsets.v7 import request as list_offsets7
from kio.schema.produce.v9 import request as produce9
from kio.schema.write_txn_markers.v1 import request as markers1
from kio.schema.write_txn_markers.v2 import request as markers2

from odradek.cli.main import build_parser
from odradek.protocol.errors import ErrorCode
from odradek.server.embedded import EmbeddedBroker

from .wire_client import WireClient


@pytest.fixture
def client(broker: EmbeddedBroker):
    c = WireClient(broker.bootstrap_servers)
    yield c
    c.close()


def new_topic(bootstrap: str, partitions: int = 1) -> str:
    topic = "txn-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the result is in
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10)
    futures[topic].result(timeout=15)
    return topic


def producer_id(client: WireClient) -> tuple[int, int]:
    response = client.call(
        init4.InitProducerIdRequest(
            transactional_id=None,
            transaction_timeout=timedelta(seconds=60),
            producer_id=-1,
            producer_epoch=-1,
        )
    )
    assert response.error_code == ErrorCode.none
    return response.producer_id, response.producer_epoch


def produce(client: WireClient, *args: Any, **options: Any) -> int:
    """Write one batch; its error code (the arguments as ``produce_response``'s)."""
    return produce_response(client, *args, **options).error_code


def produce_response(
    client: WireClient,
    topic: str,
    pid: int,
    epoch: int,
    sequence: int,
    values: list[bytes],
    *,
    transactional: bool = True,
    partition: int = 0,
    timestamp: int | None = None,
    transactional_id: str | None = None,
    module: Any = produce9,
):
    """Write one batch (Produce v9, or ``module``'s version); the partition's response."""
    builder = DefaultRecordBatchBuilder(2, 0, transactional, pid, epoch, sequence, 2**31 - 1)
    for i, value in enumerate(values):
        builder.append(i, timestamp=timestamp, key=None, value=value, headers=[])
    request = module.ProduceRequest(
        transactional_id=transactional_id,
        acks=-1,
        timeout=timedelta(seconds=10),
        topic_data=(
            module.TopicProduceData(
                name=topic,
                partition_data=(
                    module.PartitionProduceData(index=partition, records=bytes(builder.build())),
                ),
            ),
        ),
    )
    return client.call(request).responses[0].partition_responses[0]


def write_markers(
    client: WireClient,
    pid: int,
    epoch: int,
    commit: bool,
    partitions: dict[str, list[int]],
    coordinator_epoch: int = 0,
    module=markers1,
) -> dict[tuple[str, int], ErrorCode]:
    request = module.WriteTxnMarkersRequest(
        markers=(
            module.WritableTxnMarker(
                producer_id=pid,
                producer_epoch=epoch,
                transaction_result=commit,
                topics=tuple(
                    module.WritableTxnMarkerTopic(name=t, partition_indexes=tuple(ps))
                    for t, ps in partitions.items()
                ),
                coordinator_epoch=coordinator_epoch,
            ),
        )
    )
    response = client.call(request)
    (marker,) = response.markers
    assert marker.producer_id == pid
    return {(t.name, p.partition_index): p.error_code for t in marker.topics for p in t.partitions}


def latest(client: WireClient, topic: str, isolation_level: int, timestamp: int = -1) -> int:
    response = client.call(
        list_offsets7.ListOffsetsRequest(
            replica_id=-1,
            isolation_level=isolation_level,
            topics=(
                list_offsets7.ListOffsetsTopic(
                    name=topic,
                    partitions=(
                        list_offsets7.ListOffsetsPartition(
                            partition_index=0, current_leader_epoch=-1, timestamp=timestamp
                        ),
                    ),
                ),
            ),
        )
    )
    return response.topics[0].partitions[0].offset


def consume_all(bootstrap: str, topic: str, isolation: str, end_offset: int) -> list[bytes]:
    """Every value a consumer with ``isolation`` gets before its position reaches ``end_offset``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "g-" + uuid.uuid4().hex[:8],
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        for _ in range(200):
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                values.append(message.value())
            position = consumer.position([TopicPartition(topic, 0)])[0].offset
            if position >= end_offset:
                break
        else:
            pytest.fail(f"{isolation} consumer stuck before offset {end_offset}")
    finally:
        consumer.close()
    return values


def test_committed_and_aborted_transactions_by_isolation_level(
    broker: EmbeddedBroker, client: WireClient
) -> None:
    topic = new_topic(broker.bootstrap_servers)
    committed, aborted = producer_id(client), producer_id(client)
    assert produce(client, topic, *committed, 0, [b"c1", b"c2"]) == ErrorCode.none
    assert produce(client, topic, *aborted, 0, [b"a1"]) == ErrorCode.none
    assert produce(client, topic, *committed, 2, [b"c3"]) == ErrorCode.none
    # Both transactions open: the last stable offset is the first one's first offset.
    assert latest(client, topic, 1) == 0
    assert latest(client, topic, 0) == 4
    assert write_markers(client, *aborted, False, {topic: [0]}) == {(topic, 0): ErrorCode.none}
    assert latest(client, topic, 1) == 0  # the committed producer's transaction is still open
    assert write_markers(client, *committed, True, {topic: [0]}) == {(topic, 0): ErrorCode.none}
    assert latest(client, topic, 1) == latest(client, topic, 0) == 6
    bootstrap = broker.bootstrap_servers
    assert consume_all(bootstrap, topic, "read_committed", 6) == [b"c1", b"c2", b"c3"]
    assert consume_all(bootstrap, topic, "read_uncommitted", 6) == [b"c1", b"c2", b"a1", b"c3"]


def test_open_transaction_holds_read_committed_consumers(
    broker: EmbeddedBroker, client: WireClient
) -> None:
    topic = new_topic(broker.bootstrap_servers)
    idempotent, transactional = producer_id(client), producer_id(client)
    now = int(time.time() * 1000)
    assert (
        produce(client, topic, *idempotent, 0, [b"i1"], transactional=False, timestamp=now)
        == ErrorCode.none
    )
    assert produce(client, topic, *transactional, 0, [b"t1"], timestamp=now + 1) == ErrorCode.none
    assert (
        produce(client, topic, *idempotent, 1, [b"i2"], transactional=False, timestamp=now + 2)
        == ErrorCode.none
    )
    assert latest(client, topic, 1) == 1
    # By timestamp, read_committed finds nothing at or past the last stable offset.
    assert latest(client, topic, 1, timestamp=now) == 0
    assert latest(client, topic, 1, timestamp=now + 1) == -1
    assert latest(client, topic, 0, timestamp=now + 1) == 1
    assert latest(client, topic, 1, timestamp=-3) == -1  # the newest record is offset 2
    assert latest(client, topic, 0, timestamp=-3) == 2
    # A non-transactional batch from a producer whose transaction is open is refused.
    assert (
        produce(client, topic, *transactional, 1, [b"x"], transactional=False)
        == ErrorCode.invalid_txn_state
    )
    assert consume_all(broker.bootstrap_servers, topic, "read_committed", 1) == [b"i1"]
    assert write_markers(client, *transactional, True, {topic: [0]}) == {(topic, 0): ErrorCode.none}
    assert consume_all(broker.bootstrap_servers, topic, "read_committed", 4) == [
        b"i1",
        b"t1",
        b"i2",
    ]


def open_transactions(client: WireClient, topic: str) -> dict[int, tuple[int, int]]:
    """DescribeProducers of partition 0: producer -> (coordinator epoch, open txn start offset)."""
    response = client.call(
        describe_producers0.DescribeProducersRequest(
            topics=(describe_producers0.TopicRequest(name=topic, partition_indexes=(0,)),)
        )
    )
    (partition,) = response.topics[0].partitions
    return {
        p.producer_id: (p.coordinator_epoch, p.current_txn_start_offset)
        for p in partition.active_producers
    }


def test_marker_errors(broker: EmbeddedBroker, client: WireClient) -> None:
    topic = new_topic(broker.bootstrap_servers)
    pid, epoch = producer_id(client)
    assert produce(client, topic, pid, epoch + 1, 0, [b"v"]) == ErrorCode.none
    assert open_transactions(client, topic) == {pid: (-1, 0)}
    assert write_markers(client, pid, epoch + 1, False, {topic: [0]}, coordinator_epoch=3) == {
        (topic, 0): ErrorCode.none
    }
    assert open_transactions(client, topic) == {pid: (3, -1)}
    # An older producer epoch, an older coordinator epoch, unknown partitions: Kafka's codes.
    assert write_markers(client, pid, epoch, True, {topic: [0]}, coordinator_epoch=3) == {
        (topic, 0): ErrorCode.invalid_producer_epoch
    }
    assert write_markers(client, pid, epoch + 1, True, {topic: [0]}, coordinator_epoch=2) == {
        (topic, 0): ErrorCode.transaction_coordinator_fenced
    }
    assert write_markers(
        client, pid, epoch + 1, True, {topic: [0, 7], "no-such-topic": [0]}, coordinator_epoch=3
    ) == {
        (topic, 0): ErrorCode.none,
        (topic, 7): ErrorCode.unknown_topic_or_partition,
        ("no-such-topic", 0): ErrorCode.unknown_topic_or_partition,
    }
    # v2 (transaction version) writes the same markers; a bumped epoch (TV2) is accepted.
    assert write_markers(
        client, pid, epoch + 2, False, {topic: [0]}, coordinator_epoch=3, module=markers2
    ) == {(topic, 0): ErrorCode.none}


def test_console_consumer_isolation_level(broker: EmbeddedBroker, client: WireClient) -> None:
    topic = new_topic(broker.bootstrap_servers)
    pid, epoch = producer_id(client)
    assert produce(client, topic, pid, epoch, 0, [b"a"]) == ErrorCode.none
    assert write_markers(client, pid, epoch, False, {topic: [0]}) == {(topic, 0): ErrorCode.none}
    other, other_epoch = producer_id(client)
    assert produce(client, topic, other, other_epoch, 0, [b"b"]) == ErrorCode.none
    assert write_markers(client, other, other_epoch, True, {topic: [0]}) == {
        (topic, 0): ErrorCode.none
    }

    def console(*options: str) -> list[str]:
        argv = ["consume", "--bootstrap-server", broker.bootstrap_servers, "--topic", topic]
        argv += ["--from-beginning", "--timeout-ms", "1500", *options]
        args = build_parser("consume").parse_args(argv)
        out = io.StringIO()
        assert args.func(args, stdout=out) == 0
        return out.getvalue().splitlines()

    assert console() == ["a", "b"]  # read_uncommitted, as Kafka's console consumer
    assert console("--isolation-level", "read_committed") == ["b"]
