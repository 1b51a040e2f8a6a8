"""ListOffsets v11 (KIP-1023) against a real broker, through kio-encoded requests.

v11 adds no field: it defines the special timestamp -6, the earliest offset not yet
uploaded to the remote tier. Without a remote tier Kafka answers it as it answers
-5 (latest tiered): offset -1, timestamp -1, leader epoch -1, no error. As Kafka's
ReplicaManager, a special timestamp the request's version does not define, or a
negative timestamp that is no special timestamp, gets UNSUPPORTED_VERSION.
"""

from __future__ import annotations

import datetime
import importlib
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v2.request import ApiVersionsRequest
from kio.static.primitive import i32Timedelta
from kio_client import KioClient

from odradek import EmbeddedBroker
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

EARLIEST_PENDING_UPLOAD, LATEST_TIERED, EARLIEST_LOCAL, MAX_TIMESTAMP = -6, -5, -4, -3
RECORDS = 4


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture(scope="module")
def topic(broker: EmbeddedBroker) -> str:
    name = f"v11-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(RECORDS):
        producer.produce(name, str(i).encode(), timestamp=1_000 + i)
    assert producer.flush(30) == 0
    return name


def list_offsets(
    broker: EmbeddedBroker, version: int, topic: str, timestamp: int, partition: int = 0
):
    module = importlib.import_module(f"kio.schema.list_offsets.v{version}.request")
    request = schemas.build(
        module.ListOffsetsRequest,
        replica_id=-1,
        isolation_level=0,
        topics=(
            schemas.build(
                module.ListOffsetsTopic,
                name=topic,
                partitions=(
                    schemas.build(
                        module.ListOffsetsPartition,
                        partition_index=partition,
                        current_leader_epoch=-1,
                        timestamp=timestamp,
                        max_num_offsets=1,
                    ),
                ),
            ),
        ),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
    )
    with KioClient(broker.bootstrap_servers) as client:
        (answer,) = client.send(request).topics[0].partitions
    return answer


def advertised(broker: EmbeddedBroker, api_key: int) -> tuple[int, int]:
    with KioClient(broker.bootstrap_servers) as client:  # v2: its response header is not flexible
        keys = client.send(ApiVersionsRequest()).api_keys
    (entry,) = [k for k in keys if k.api_key == api_key]
    return entry.min_version, entry.max_version


def test_api_versions_advertises_v11(broker: EmbeddedBroker) -> None:
    assert advertised(broker, ApiKey.LIST_OFFSETS) == (1, 11)


def test_earliest_pending_upload_without_a_remote_tier(broker: EmbeddedBroker, topic: str) -> None:
    answer = list_offsets(broker, 11, topic, EARLIEST_PENDING_UPLOAD)
    assert (answer.error_code, answer.offset, answer.timestamp, answer.leader_epoch) == (
        ErrorCode.none,
        -1,
        -1,
        -1,
    )


def test_v11_serves_what_v10_does(broker: EmbeddedBroker, topic: str) -> None:
    for timestamp in (-1, -2, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, 1_002):
        old, new = (
            list_offsets(broker, 10, topic, timestamp),
            list_offsets(broker, 11, topic, timestamp),
        )
        assert (new.error_code, new.offset, new.timestamp, new.leader_epoch) == (
            old.error_code,
            old.offset,
            old.timestamp,
            old.leader_epoch,
        )
    assert list_offsets(broker, 11, topic, -1).offset == RECORDS
    assert (
        list_offsets(broker, 11, topic, 1_002).offset,
        list_offsets(broker, 11, topic, MAX_TIMESTAMP).offset,
    ) == (2, 3)


@pytest.mark.parametrize(
    "version, timestamp",
    [
        (10, EARLIEST_PENDING_UPLOAD),
        (8, LATEST_TIERED),
        (7, EARLIEST_LOCAL),
        (6, MAX_TIMESTAMP),
        (11, -7),
    ],
)
def test_a_special_timestamp_of_a_later_version_is_unsupported(
    broker: EmbeddedBroker, topic: str, version: int, timestamp: int
) -> None:
    answer = list_offsets(broker, version, topic, timestamp)
    assert (answer.error_code, answer.offset, answer.timestamp) == (
        ErrorCode.unsupported_version,
        -1,
        -1,
    )


def test_unsupported_is_checked_before_the_partition_exists(broker: EmbeddedBroker) -> None:
    assert (
        list_offsets(broker, 10, "no-such-topic", EARLIEST_PENDING_UPLOAD).error_code
        == ErrorCode.unsupported_version
    )
    assert list_offsets(broker, 11, "no-such-topic", EARLIEST_PENDING_UPLOAD).error_code == (
        ErrorCode.unknown_topic_or_partition
    )


def test_a_partition_named_twice_is_an_invalid_request_for_each_entry(
    broker: EmbeddedBroker, topic: str
) -> None:
    """Kafka's KafkaApis answers every entry of a duplicated partition INVALID_REQUEST."""
    module = importlib.import_module("kio.schema.list_offsets.v11.request")

    def partition(index: int, timestamp: int):
        return schemas.build(
            module.ListOffsetsPartition,
            partition_index=index,
            current_leader_epoch=-1,
            timestamp=timestamp,
            max_num_offsets=1,
        )

    request = schemas.build(
        module.ListOffsetsRequest,
        replica_id=-1,
        isolation_level=0,
        topics=(
            schemas.build(
                module.ListOffsetsTopic, name=topic, partitions=(partition(0, -1), partition(0, -2))
            ),
            schemas.build(
                module.ListOffsetsTopic, name="no-such-topic", partitions=(partition(3, -1),)
            ),
        ),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
    )
    with KioClient(broker.bootstrap_servers) as client:
        first, other = client.send(request).topics
    assert [(p.partition_index, p.error_code, p.offset) for p in first.partitions] == [
        (0, ErrorCode.invalid_request, -1),
        (0, ErrorCode.invalid_request, -1),
    ]
    assert [p.error_code for p in other.partitions] == [ErrorCode.unknown_topic_or_partition]
