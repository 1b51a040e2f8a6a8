"""Raw protocol against a real broker: bad input, size limits, long polls, big metadata."""

from __future__ import annotations

import os
import socket
import struct
import time
from datetime import timedelta

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.fetch.v12 import request as fetch12
from kio.schema.metadata.v12 import request as metadata12
from kio.schema.produce.v9 import request as produce9

from odradek.protocol.errors import ErrorCode
from odradek.protocol.schemas import build as schemas_build
from odradek.server.embedded import EmbeddedBroker

from .wire_client import WireClient

MAX = 200000  # message.max.bytes of the module broker (conftest)


def batch_of_size(size: int) -> bytes:
    """One uncompressed v2 batch of exactly ``size`` bytes."""
    overhead = len(_batch(b""))
    for value_len in range(max(size - overhead - 10, 0), size):
        data = _batch(b"x" * value_len)
        if len(data) == size:
            return data
    raise AssertionError(f"no batch of exactly {size} bytes")


def _batch(value: bytes) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 2**31 - 1)
    builder.append(0, timestamp=1000, key=None, value=value, headers=[])
    return bytes(builder.build())


def produce_request(topic: str, records: bytes, acks: int = 1):
    return produce9.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=timedelta(seconds=10),
        topic_data=(
            produce9.TopicProduceData(
                name=topic,
                partition_data=(produce9.PartitionProduceData(index=0, records=records),),
            ),
        ),
    )


def metadata_request(*topics: str):
    return metadata12.MetadataRequest(
        topics=tuple(metadata12.MetadataRequestTopic(topic_id=None, name=t) for t in topics),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )


def fetch_request(topic: str, offset: int, max_wait_ms: int):
    return fetch12.FetchRequest(
        replica_id=-1,
        max_wait=timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=10**6,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            fetch12.FetchTopic(
                topic=topic,
                partitions=(
                    fetch12.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=10**6,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def produce_error(client: WireClient, topic: str, records: bytes) -> ErrorCode:
    response = client.call(produce_request(topic, records))
    return response.responses[0].partition_responses[0].error_code


def test_message_max_bytes_boundary(broker: EmbeddedBroker) -> None:
    client = WireClient(broker.bootstrap_servers)
    try:
        client.call(metadata_request("boundary"))
        assert produce_error(client, "boundary", batch_of_size(MAX)) == ErrorCode.none
        assert (
            produce_error(client, "boundary", batch_of_size(MAX + 1)) == ErrorCode.message_too_large
        )
        assert produce_error(client, "boundary", batch_of_size(100)) == ErrorCode.none
    finally:
        client.close()


def test_corrupt_batch_is_rejected(broker: EmbeddedBroker) -> None:
    client = WireClient(broker.bootstrap_servers)
    try:
        client.call(metadata_request("corrupt"))
        data = bytearray(batch_of_size(200))
        data[-1] ^= 0xFF
        assert produce_error(client, "corrupt", bytes(data)) == ErrorCode.corrupt_message
    finally:
        client.close()


def test_long_poll_returns_when_data_arrives(broker: EmbeddedBroker) -> None:
    client = WireClient(broker.bootstrap_servers, timeout=30)
    producer = WireClient(broker.bootstrap_servers)
    try:
        client.call(metadata_request("longpoll"))
        request = fetch_request("longpoll", 0, max_wait_ms=60_000)
        client.send(request)
        time.sleep(0.2)  # let the fetch park in the purgatory (not asserted on)
        assert produce_error(producer, "longpoll", batch_of_size(300)) == ErrorCode.none
        # A 60 s long poll answered well within the 30 s socket timeout: woken by the append.
        response = client.receive(request)
        partition = response.responses[0].partitions[0]
        assert partition.error_code == ErrorCode.none
        assert partition.high_watermark == 1
        assert len(partition.records) == 300
    finally:
        client.close()
        producer.close()


def test_metadata_with_1000_partitions() -> None:
    with EmbeddedBroker(config={"num.partitions": "1000"}) as broker:
        # Creating 1,000 logs fsyncs each new directory: allow minutes on a loaded machine.
        client = WireClient(broker.bootstrap_servers, timeout=240)
        try:
            response = client.call(metadata_request("wide"))
            topic = response.topics[0]
            assert topic.error_code == ErrorCode.none
            assert sorted(p.partition_index for p in topic.partitions) == list(range(1000))
            assert response.cluster_id
        finally:
            client.close()


@pytest.mark.parametrize(
    "garbage",
    [
        os.urandom(1000),
        struct.pack(">i", 2**31 - 1) + b"x" * 100,
        struct.pack(">ihhih", 10, 999, 0, 1, -1),
        struct.pack(">ihhih", 10, 0, 999, 1, -1),
        struct.pack(">i", 100) + b"short",
    ],
    ids=["random", "huge-size", "unknown-key", "unknown-version", "truncated"],
)
def test_bad_input_leaves_other_clients_unaffected(broker: EmbeddedBroker, garbage: bytes) -> None:
    good = WireClient(broker.bootstrap_servers)
    bad = socket.create_connection(good.sock.getpeername(), timeout=15)
    try:
        bad.sendall(garbage)
        # A plausible size prefix makes the broker wait for the rest of the frame, as Kafka
        # does; ending our side shows it the frame is truncated.
        bad.shutdown(socket.SHUT_WR)
        assert bad.recv(100) == b""  # closed by the broker
        assert good.call(metadata_request("still-fine")).topics[0].error_code == ErrorCode.none
    finally:
        bad.close()
        good.close()


def test_acks_zero_gets_no_response(broker: EmbeddedBroker) -> None:
    client = WireClient(broker.bootstrap_servers)
    try:
        client.call(metadata_request("acks0"))
        client.send(produce_request("acks0", batch_of_size(100), acks=0))
        # The next response on the connection belongs to the metadata request, not the produce.
        correlation = client.send(metadata_request("acks0"))
        response = client.receive(metadata_request("acks0"))
        assert response.topics[0].name == "acks0"
        assert client.last_correlation_id == correlation == 3
    finally:
        client.close()


def session_fetch(topics: dict[str, int], session_id: int, epoch: int, forgotten: tuple = ()):
    return fetch12.FetchRequest(
        replica_id=-1,
        max_wait=timedelta(milliseconds=0),
        min_bytes=0,
        max_bytes=10**6,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=tuple(
            fetch12.FetchTopic(
                topic=t,
                partitions=(
                    fetch12.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=o,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=10**6,
                    ),
                ),
            )
            for t, o in topics.items()
        ),
        forgotten_topics_data=forgotten,
        rack_id="",
    )


def test_incremental_fetch_session(broker: EmbeddedBroker) -> None:
    client = WireClient(broker.bootstrap_servers)
    try:
        client.call(metadata_request("sess-a", "sess-b"))
        assert produce_error(client, "sess-a", batch_of_size(100)) == ErrorCode.none
        full = client.call(session_fetch({"sess-a": 0, "sess-b": 0}, 0, 0))
        assert full.error_code == ErrorCode.none and full.session_id != 0
        assert sorted(t.topic for t in full.responses) == ["sess-a", "sess-b"]
        session_id = full.session_id
        # The client moves sess-a past its record; nothing else changed, so no partition is listed.
        quiet = client.call(session_fetch({"sess-a": 1}, session_id, 1))
        assert quiet.session_id == session_id and quiet.responses == ()
        # sess-b gets data: only it is listed, though the client named neither.
        assert produce_error(client, "sess-b", batch_of_size(100)) == ErrorCode.none
        news = client.call(session_fetch({}, session_id, 2))
        assert [t.topic for t in news.responses] == ["sess-b"]
        assert len(news.responses[0].partitions[0].records) == 100
        stale = client.call(session_fetch({}, session_id, 2))
        assert stale.error_code == ErrorCode.invalid_fetch_session_epoch
        unknown = client.call(session_fetch({}, 12345678, 1))
        assert unknown.error_code == ErrorCode.fetch_session_id_not_found
    finally:
        client.close()


def test_api_versions_v99_gets_kip511_reply(broker: EmbeddedBroker) -> None:
    from kio.schema.api_versions.v0 import response as api_versions0
    from kio.serial import entity_reader

    with socket.create_connection(broker.bootstrap_servers.rsplit(":", 1), timeout=15) as sock:
        sock.sendall(struct.pack(">ihhih", 10, 18, 99, 42, -1))
        size = struct.unpack(">i", sock.recv(4))[0]
        data = b""
        while len(data) < size:
            data += sock.recv(size - len(data))
    assert struct.unpack(">i", data[:4])[0] == 42
    response = entity_reader(api_versions0.ApiVersionsResponse)(data[4:], 0)[0]
    assert response.error_code == ErrorCode.unsupported_version
    assert {k.api_key for k in response.api_keys} >= {0, 1, 2, 3, 18}


def test_connection_limits() -> None:
    config = {"max.connections.per.ip": "2", "connections.max.idle.ms": "1000"}
    with EmbeddedBroker(config=config) as broker:
        first, second = WireClient(broker.bootstrap_servers), WireClient(broker.bootstrap_servers)
        try:
            assert first.call(metadata_request("limits")).topics[0].error_code == ErrorCode.none
            assert second.call(metadata_request("limits")).topics[0].error_code == ErrorCode.none
            third = WireClient(broker.bootstrap_servers)
            assert third.sock.recv(10) == b""  # over max.connections.per.ip: closed at once
            third.close()
            # Left idle past connections.max.idle.ms, the broker closes the others too.
            assert first.sock.recv(10) == b""
            assert second.sock.recv(10) == b""
            fresh = WireClient(broker.bootstrap_servers)
            assert fresh.call(metadata_request("limits")).topics[0].error_code == ErrorCode.none
            fresh.close()
        finally:
            first.close()
            second.close()


def test_sigterm_answers_a_parked_long_poll(tmp_path) -> None:
    """Shutdown wakes the purgatory: the in-flight fetch is answered, then the broker exits 0."""
    broker = EmbeddedBroker(data_dir=tmp_path).start()
    client = WireClient(broker.bootstrap_servers, timeout=30)
    try:
        client.call(metadata_request("parked"))
        request = fetch_request("parked", 0, max_wait_ms=120_000)
        client.send(request)
        time.sleep(0.2)  # let the fetch park (not asserted on)
        assert broker.stop(timeout=30) == 0
        response = client.receive(request)
        assert response.responses[0].partitions[0].error_code == ErrorCode.none
    finally:
        client.close()
        broker.close()


def fetch_by_id(topic_id, session_id: int = 0, epoch: int = -1, forgotten: tuple = ()):
    """A Fetch v16 of partition 0 of the topic ``topic_id`` (None: of no topic) from offset 0."""
    from kio.schema.fetch.v16 import request as fetch16

    partitions = (
        fetch16.FetchPartition(
            partition=0,
            current_leader_epoch=-1,
            fetch_offset=0,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=10**6,
        ),
    )
    return fetch16.FetchRequest(
        max_wait=timedelta(milliseconds=0),
        min_bytes=0,
        max_bytes=10**6,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=(fetch16.FetchTopic(topic_id=topic_id, partitions=partitions),) if topic_id else (),
        forgotten_topics_data=forgotten,
        rack_id="",
    )


def test_fetch_by_topic_id(broker: EmbeddedBroker) -> None:
    import uuid

    client = WireClient(broker.bootstrap_servers)
    try:
        topic_id = client.call(metadata_request("by-id")).topics[0].topic_id
        assert produce_error(client, "by-id", batch_of_size(150)) == ErrorCode.none
        response = client.call(fetch_by_id(topic_id))
        assert response.responses[0].topic_id == topic_id
        assert response.responses[0].partitions[0].high_watermark == 1
        assert len(response.responses[0].partitions[0].records) == 150
        missing = uuid.uuid4()
        response = client.call(fetch_by_id(missing))
        assert response.responses[0].topic_id == missing
        assert response.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_id
    finally:
        client.close()


@pytest.mark.parametrize("version", [0, 1, 4, 9, 13])
def test_metadata_versions(broker: EmbeddedBroker, version: int) -> None:
    module = __import__(f"kio.schema.metadata.v{version}.request", fromlist=["x"])
    topic = schemas_build(module.MetadataRequestTopic, name="versions", topic_id=None)
    request = schemas_build(
        module.MetadataRequest,
        topics=(topic,),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
        include_cluster_authorized_operations=False,
    )
    client = WireClient(broker.bootstrap_servers)
    try:
        response = client.call(request)
        assert [t.name for t in response.topics] == ["versions"]
        assert response.topics[0].partitions[0].leader_id == response.brokers[0].node_id
    finally:
        client.close()


def test_a_deleted_topic_leaves_the_fetch_session_it_is_forgotten_from(
    broker: EmbeddedBroker,
) -> None:
    # From v13 a session's partitions are named by topic id; once the topic is deleted its id
    # names no topic, and the broker must still drop its partitions when the client forgets
    # them. Kept, each fetch would answer them with an error, and at once.
    from confluent_kafka.admin import AdminClient
    from kio.schema.fetch.v16 import request as fetch16

    client = WireClient(broker.bootstrap_servers)
    try:
        client.call(metadata_request("sess-gone"))
        topic_id = client.call(metadata_request("sess-gone")).topics[0].topic_id
        full = client.call(fetch_by_id(topic_id, 0, 0))
        assert full.error_code == ErrorCode.none and full.session_id != 0
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.delete_topics(["sess-gone"])["sess-gone"].result(30)
        deadline = time.monotonic() + 30
        while "sess-gone" in admin.list_topics(timeout=10).topics:
            assert time.monotonic() < deadline, "sess-gone still listed"
            time.sleep(0.05)
        forgotten = (fetch16.ForgottenTopic(topic_id=topic_id, partitions=(0,)),)
        after = client.call(fetch_by_id(None, full.session_id, 1, forgotten))
        assert after.error_code == ErrorCode.none and after.responses == ()
        # Still gone on the next fetch: the session holds nothing of it.
        assert client.call(fetch_by_id(None, full.session_id, 2)).responses == ()
    finally:
        client.close()
