"""A long-polling fetch is answered as soon as an append wakes it, even while a producer's
connection has a backlog of pipelined Produce requests (the cause of the end-to-end p99).

Behaviour, not timing: the fetch's answer carries the high watermark at the moment it was
read. Before the fix the producer's connection appended its whole received backlog in one
go before the woken fetch could run, so the answer showed (nearly) all of it.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.fetch.v12 import request as fetch12
from kio.schema.metadata.v12 import request as metadata12
from kio.schema.produce.v9 import request as produce9

from odradek import EmbeddedBroker
from odradek.protocol import schemas
from tests.integration.wire_client import WireClient

BACKLOG = 2000


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


def batch() -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 2**31 - 1)
    # A current timestamp: one from 1970 would make the log roll a segment per append (segment.ms).
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=b"v" * 50, headers=[])
    return bytes(builder.build())


def produce_frames(topic: str, count: int) -> bytes:
    request = produce9.ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=timedelta(seconds=30),
        topic_data=(
            produce9.TopicProduceData(
                name=topic,
                partition_data=(produce9.PartitionProduceData(index=0, records=batch()),),
            ),
        ),
    )
    body = schemas.encode(request)
    frames = []
    for correlation_id in range(1, count + 1):
        message = struct.pack(">hhih", 0, 9, correlation_id, 1) + b"p" + b"\x00" + body
        frames.append(struct.pack(">i", len(message)) + message)
    return b"".join(frames)


def test_a_woken_fetch_is_not_held_back_by_a_produce_backlog(broker: EmbeddedBroker) -> None:
    topic = "wakeup"
    consumer = WireClient(broker.bootstrap_servers, timeout=60)
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    producer = socket.create_connection((host, int(port)), timeout=60)
    try:
        consumer.call(
            metadata12.MetadataRequest(
                topics=(metadata12.MetadataRequestTopic(topic_id=None, name=topic),),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            )
        )
        fetch = fetch12.FetchRequest(
            replica_id=-1,
            max_wait=timedelta(seconds=30),
            min_bytes=1,
            max_bytes=10**6,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            forgotten_topics_data=(),
            rack_id="",
            topics=(
                fetch12.FetchTopic(
                    topic=topic,
                    partitions=(
                        fetch12.FetchPartition(
                            partition=0,
                            current_leader_epoch=-1,
                            fetch_offset=0,
                            last_fetched_epoch=-1,
                            log_start_offset=-1,
                            partition_max_bytes=10**6,
                        ),
                    ),
                ),
            ),
        )
        consumer.send(fetch)
        # Let the fetch park (an empty partition, 30 s max wait); not asserted on.
        consumer.sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            consumer.sock.recv(1, socket.MSG_PEEK)
        consumer.sock.settimeout(60)
        producer.sendall(produce_frames(topic, BACKLOG))
        answer = consumer.receive(fetch)
        high_watermark = answer.responses[0].partitions[0].high_watermark
        assert 1 <= high_watermark < BACKLOG // 2, high_watermark
        # Every produce request is still answered.
        received = b""
        answers = 0
        while answers < BACKLOG:
            received += producer.recv(1 << 16)
            while len(received) >= 4 and len(received) >= 4 + struct.unpack_from(">i", received)[0]:
                received = received[4 + struct.unpack_from(">i", received)[0] :]
                answers += 1
    finally:
        consumer.close()
        producer.close()
