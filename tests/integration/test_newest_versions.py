"""Produce v12/v13 and Fetch v17/v18 against a real broker: the newest versions Kafka 4.x serves.

Produce v13 names topics by id (KIP-516), answered UNKNOWN_TOPIC_ID for an id the
broker does not know, as Kafka does; Fetch v17/v18 carry the fetching replica's
directory id and high watermark as tagged fields, which the broker accepts.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from kio.schema.api_versions.v3 import request as api_versions_v3

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.schemas import build
from odradek.server.embedded import EmbeddedBroker

from .test_wire import batch_of_size, metadata_request
from .wire_client import WireClient


def produce(version: int, topic: str | uuid.UUID, records: bytes, partition: int = 0):
    module = __import__(f"kio.schema.produce.v{version}.request", fromlist=["x"])
    return module.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=timedelta(seconds=10),
        topic_data=(
            build(
                module.TopicProduceData,
                name=topic,
                topic_id=topic,
                partition_data=(module.PartitionProduceData(index=partition, records=records),),
            ),
        ),
    )


def fetch(version: int, topic_id: uuid.UUID, offset: int):
    module = __import__(f"kio.schema.fetch.v{version}.request", fromlist=["x"])
    partition = build(
        module.FetchPartition,
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=offset,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=10**6,
        replica_directory_id=uuid.uuid4(),
        high_watermark=-1,
    )
    return module.FetchRequest(
        max_wait=timedelta(milliseconds=0),
        min_bytes=0,
        max_bytes=10**6,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(module.FetchTopic(topic_id=topic_id, partitions=(partition,)),),
        forgotten_topics_data=(),
        rack_id="",
    )


@pytest.fixture
def client(broker: EmbeddedBroker):
    c = WireClient(broker.bootstrap_servers)
    yield c
    c.close()


def test_api_versions_advertises_kafka_4_ranges(client: WireClient) -> None:
    response = client.call(
        api_versions_v3.ApiVersionsRequest(client_software_name="t", client_software_version="1")
    )
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert advertised[ApiKey.PRODUCE] == (3, 13)
    assert advertised[ApiKey.FETCH] == (4, 18)


def test_produce_v12_by_name(client: WireClient) -> None:
    client.call(metadata_request("newest-v12"))
    response = client.call(produce(12, "newest-v12", batch_of_size(120)))
    assert response.responses[0].name == "newest-v12"
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
    assert response.responses[0].partition_responses[0].base_offset == 0


@pytest.mark.parametrize("fetch_version", [17, 18])
def test_produce_v13_by_id_then_fetch(client: WireClient, fetch_version: int) -> None:
    name = f"newest-v13-{fetch_version}"
    topic_id = client.call(metadata_request(name)).topics[0].topic_id
    for expected_offset in (0, 1):
        response = client.call(produce(13, topic_id, batch_of_size(130)))
        assert response.responses[0].topic_id == topic_id
        part = response.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset, part.log_start_offset) == (
            ErrorCode.none,
            expected_offset,
            0,
        )
    response = client.call(fetch(fetch_version, topic_id, 1))
    assert response.responses[0].topic_id == topic_id
    part = response.responses[0].partitions[0]
    assert (part.error_code, part.high_watermark, len(part.records)) == (ErrorCode.none, 2, 130)


def test_produce_v13_unknown_topic_id(client: WireClient) -> None:
    missing = uuid.uuid4()
    module = __import__("kio.schema.produce.v13.request", fromlist=["x"])
    request = module.ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=timedelta(seconds=10),
        topic_data=(
            module.TopicProduceData(
                topic_id=missing,
                partition_data=tuple(
                    module.PartitionProduceData(index=i, records=batch_of_size(100)) for i in (0, 3)
                ),
            ),
        ),
    )
    response = client.call(request)
    assert response.responses[0].topic_id == missing
    assert [(p.index, p.error_code) for p in response.responses[0].partition_responses] == [
        (0, ErrorCode.unknown_topic_id),
        (3, ErrorCode.unknown_topic_id),
    ]
