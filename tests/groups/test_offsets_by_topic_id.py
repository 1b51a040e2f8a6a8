"""OffsetCommit and OffsetFetch v10 name topics by id; names and ids reach the same offsets."""

from __future__ import annotations

import importlib
import uuid

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient

from odradek.protocol import schemas
from odradek.protocol.errors import ErrorCode
from tests.integration.wire_client import WireClient

from .conftest import create_topic


def request(api: str, version: int, cls: str, **fields):
    return schemas.build(
        getattr(importlib.import_module(f"kio.schema.{api}.v{version}.request"), cls), **fields
    )


def commit_by_id(client: WireClient, group: str, topic_id: uuid.UUID, offset: int):
    return client.call(
        request(
            "offset_commit",
            10,
            "OffsetCommitRequest",
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=(
                request(
                    "offset_commit",
                    10,
                    "OffsetCommitRequestTopic",
                    topic_id=topic_id,
                    partitions=(
                        request(
                            "offset_commit",
                            10,
                            "OffsetCommitRequestPartition",
                            partition_index=0,
                            committed_offset=offset,
                            committed_leader_epoch=-1,
                            committed_metadata="meta",
                        ),
                    ),
                ),
            ),
        )
    )


def fetch(client: WireClient, version: int, group: str, topics):
    group_request = request(
        "offset_fetch",
        version,
        "OffsetFetchRequestGroup",
        group_id=group,
        member_id=None,
        member_epoch=-1,
        topics=topics,
    )
    response = client.call(
        request(
            "offset_fetch",
            version,
            "OffsetFetchRequest",
            groups=(group_request,),
            require_stable=False,
        )
    )
    return response.groups[0]


def test_offsets_committed_by_topic_id_are_fetched_by_id_and_by_name(broker):
    bs = broker.bootstrap_servers
    topic = create_topic(bs, 1)
    admin = AdminClient({"bootstrap.servers": bs})
    kafka_id = admin.describe_topics(TopicCollection([topic]))[topic].result(10).topic_id
    mask = 2**64 - 1
    topic_id = uuid.UUID(
        int=(kafka_id.get_most_significant_bits() & mask) << 64
        | kafka_id.get_least_significant_bits() & mask
    )
    group = f"by-id-{uuid.uuid4().hex[:6]}"
    client = WireClient(bs)
    try:
        committed = commit_by_id(client, group, topic_id, 42)
        assert committed.topics[0].topic_id == topic_id
        assert committed.topics[0].partitions[0].error_code == ErrorCode.none
        ghost = uuid.uuid4()
        assert (
            commit_by_id(client, group, ghost, 1).topics[0].partitions[0].error_code
            == ErrorCode.unknown_topic_id
        )
        by_id = fetch(
            client,
            10,
            group,
            (
                request(
                    "offset_fetch",
                    10,
                    "OffsetFetchRequestTopics",
                    topic_id=topic_id,
                    partition_indexes=(0,),
                ),
                request(
                    "offset_fetch",
                    10,
                    "OffsetFetchRequestTopics",
                    topic_id=ghost,
                    partition_indexes=(0,),
                ),
            ),
        )
        found = {t.topic_id: t.partitions[0] for t in by_id.topics}
        assert (found[topic_id].committed_offset, found[topic_id].metadata) == (42, "meta")
        assert found[ghost].error_code == ErrorCode.unknown_topic_id
        by_name = fetch(
            client,
            9,
            group,
            (
                request(
                    "offset_fetch",
                    9,
                    "OffsetFetchRequestTopics",
                    name=topic,
                    partition_indexes=(0,),
                ),
            ),
        )
        assert by_name.topics[0].partitions[0].committed_offset == 42
        everything = fetch(client, 10, group, None)
        assert [(t.topic_id, t.partitions[0].committed_offset) for t in everything.topics] == [
            (topic_id, 42)
        ]
    finally:
        client.close()
