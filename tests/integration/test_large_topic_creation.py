"""A CreateTopics of thousands of partitions does not stall other clients.

The logs are created in a worker thread while the event loop keeps serving, so
while one connection waits for its CreateTopics, another gets its ApiVersions
and Metadata answered and a producer's records to another topic acknowledged.
The tests assert on the order of answers, not on time: the others are answered
while the creating connection has no response yet and the topic is unpublished.
"""

from __future__ import annotations

import datetime
import select
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kio.schema.api_versions.v3 import request as api_versions_v3
from kio.schema.create_partitions.v3 import request as create_partitions_v3
from kio.schema.create_topics.v7 import request as create_topics_v7
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta

from odradek import EmbeddedBroker
from odradek.protocol.errors import ErrorCode

from .wire_client import WireClient

PARTITIONS = 1000


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config={"auto.create.topics.enable": "false"}) as b:
        yield b


def create_request(name: str, partitions: int):
    topic = create_topics_v7.CreatableTopic(
        name=TopicName(name),
        num_partitions=i32(partitions),
        replication_factor=-1,
        assignments=(),
        configs=(),
    )
    return create_topics_v7.CreateTopicsRequest(
        topics=(topic,),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
        validate_only=False,
    )


def metadata_request(name: str):
    return metadata_v12.MetadataRequest(
        topics=(metadata_v12.MetadataRequestTopic(name=TopicName(name), topic_id=None),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def wait_for_log(data_dir: Path, partition_dir: str) -> None:
    """Block until the broker has created the log dir ``partition_dir`` (so the creation is under way)."""
    deadline = time.monotonic() + 60
    while not (data_dir / partition_dir).exists():
        assert time.monotonic() < deadline, "the broker never started creating the logs"
        time.sleep(0.005)


def has_response(client: WireClient) -> bool:
    readable, _, _ = select.select([client.sock], [], [], 0)
    return bool(readable)


def test_other_clients_are_served_while_a_large_topic_is_created(broker: EmbeddedBroker) -> None:
    creator, probe = (
        WireClient(broker.bootstrap_servers, timeout=120),
        WireClient(broker.bootstrap_servers),
    )
    assert probe.call(create_request("other", 1)).topics[0].error_code == ErrorCode.none
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    producer.produce("other", b"before")  # connected and warmed up before the creation starts
    assert producer.flush(30) == 0
    try:
        request = create_request("big-create", PARTITIONS)
        creator.send(request)
        wait_for_log(broker.data_dir, "big-create-0")

        delivered: list = []
        producer.produce("other", b"during", on_delivery=lambda err, msg: delivered.append(err))
        assert producer.flush(30) == 0 and delivered == [None]

        versions = probe.call(
            api_versions_v3.ApiVersionsRequest(
                client_software_name="probe", client_software_version="1"
            )
        )
        assert versions.error_code == ErrorCode.none
        metadata = probe.call(metadata_request("big-create"))
        # Answered while the creation runs: the topic is reserved but not yet published.
        assert not has_response(creator)
        assert metadata.topics[0].error_code == ErrorCode.leader_not_available
        # A second creation of the same name is refused while the first is under way.
        duplicate = probe.call(create_request("big-create", 1))
        assert duplicate.topics[0].error_code == ErrorCode.topic_already_exists

        created = creator.receive(request)
        assert created.topics[0].error_code == ErrorCode.none
        assert created.topics[0].num_partitions == PARTITIONS
        published = probe.call(metadata_request("big-create"))
        assert published.topics[0].error_code == ErrorCode.none
        assert len(published.topics[0].partitions) == PARTITIONS
    finally:
        creator.close()
        probe.close()


def test_other_clients_are_served_while_partitions_are_added(broker: EmbeddedBroker) -> None:
    creator, probe = (
        WireClient(broker.bootstrap_servers, timeout=120),
        WireClient(broker.bootstrap_servers),
    )
    try:
        assert creator.call(create_request("big-grow", 1)).topics[0].error_code == ErrorCode.none
        request = create_partitions_v3.CreatePartitionsRequest(
            topics=(
                create_partitions_v3.CreatePartitionsTopic(
                    name=TopicName("big-grow"), count=i32(PARTITIONS), assignments=None
                ),
            ),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
            validate_only=False,
        )
        creator.send(request)
        wait_for_log(broker.data_dir, "big-grow-1")

        metadata = probe.call(metadata_request("big-grow"))
        assert not has_response(creator)
        assert (
            len(metadata.topics[0].partitions) == 1
        )  # the new partitions are not published before their logs

        grown = creator.receive(request)
        assert grown.results[0].error_code == ErrorCode.none
        assert len(probe.call(metadata_request("big-grow")).topics[0].partitions) == PARTITIONS
    finally:
        creator.close()
        probe.close()
