"""ListOffsets at every advertised version (1-11), with the special timestamps of v8+ and v9+.

Without a remote tier, earliest local (-4) is the log start offset and latest
tiered (-5, v9+) is offset -1 with leader epoch -1, as Kafka answers when remote
storage is off. v10 adds a timeout for remote lookups, which changes nothing here.
"""

from __future__ import annotations

import datetime
import importlib
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.static.primitive import i32Timedelta

from odradek import EmbeddedBroker
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.server.apis import API_TABLE

from .wire_client import WireClient

LATEST, EARLIEST, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -4, -5
RECORDS = 5


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture(scope="module")
def topic(broker: EmbeddedBroker) -> str:
    name = f"offsets-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(RECORDS):
        producer.produce(name, str(i).encode())
    assert producer.flush(30) == 0
    return name


def list_offsets(broker: EmbeddedBroker, version: int, topic: str, timestamp: int):
    module = importlib.import_module(f"kio.schema.list_offsets.v{version}.request")
    partition = schemas.build(
        module.ListOffsetsPartition,
        partition_index=0,
        current_leader_epoch=-1,
        timestamp=timestamp,
        max_num_offsets=1,
    )
    request = schemas.build(
        module.ListOffsetsRequest,
        replica_id=-1,
        isolation_level=0,
        topics=(schemas.build(module.ListOffsetsTopic, name=topic, partitions=(partition,)),),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
    )
    client = WireClient(broker.bootstrap_servers)
    try:
        (answer,) = client.call(request).topics[0].partitions
    finally:
        client.close()
    assert answer.error_code == ErrorCode.none
    return answer


def test_advertised_range_is_kafka_4s() -> None:
    spec = API_TABLE[ApiKey.LIST_OFFSETS]
    assert (spec.min_version, spec.max_version) == (1, 11)


@pytest.mark.parametrize("version", range(1, 12))
def test_latest_and_earliest_at_every_version(
    broker: EmbeddedBroker, topic: str, version: int
) -> None:
    assert list_offsets(broker, version, topic, LATEST).offset == RECORDS
    assert list_offsets(broker, version, topic, EARLIEST).offset == 0


@pytest.mark.parametrize("version", [8, 9, 10, 11])
def test_earliest_local_is_the_log_start(broker: EmbeddedBroker, topic: str, version: int) -> None:
    assert list_offsets(broker, version, topic, EARLIEST_LOCAL).offset == 0


@pytest.mark.parametrize("version", [9, 10, 11])
def test_latest_tiered_without_a_remote_tier(
    broker: EmbeddedBroker, topic: str, version: int
) -> None:
    answer = list_offsets(broker, version, topic, LATEST_TIERED)
    assert (answer.offset, answer.leader_epoch, answer.timestamp) == (-1, -1, -1)
