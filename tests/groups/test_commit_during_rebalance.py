"""OffsetCommit while a classic group completes its rebalance, over the wire (Kafka's
ClassicGroup.validateOffsetCommit order: member, then generation, then the group's state)."""

from __future__ import annotations

import datetime
import importlib
import uuid

from odradek.protocol import schemas
from odradek.protocol.errors import ErrorCode
from tests.integration.wire_client import WireClient

from .conftest import create_topic

JOIN = importlib.import_module("kio.schema.join_group.v5.request")
COMMIT = importlib.import_module("kio.schema.offset_commit.v8.request")


def test_commit_in_completing_rebalance_names_the_member_or_generation_error(broker):
    topic = create_topic(broker.bootstrap_servers, 1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    client = WireClient(broker.bootstrap_servers)
    try:

        def join(member_id: str):
            return client.call(
                schemas.build(
                    JOIN.JoinGroupRequest,
                    group_id=group,
                    session_timeout=datetime.timedelta(seconds=30),
                    rebalance_timeout=datetime.timedelta(seconds=30),
                    member_id=member_id,
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocols=(
                        schemas.build(JOIN.JoinGroupRequestProtocol, name="range", metadata=b""),
                    ),
                )
            )

        def commit(member_id: str, generation: int) -> int:
            response = client.call(
                schemas.build(
                    COMMIT.OffsetCommitRequest,
                    group_id=group,
                    generation_id_or_member_epoch=generation,
                    member_id=member_id,
                    group_instance_id=None,
                    topics=(
                        schemas.build(
                            COMMIT.OffsetCommitRequestTopic,
                            name=topic,
                            partitions=(
                                schemas.build(
                                    COMMIT.OffsetCommitRequestPartition,
                                    partition_index=0,
                                    committed_offset=5,
                                    committed_leader_epoch=-1,
                                    committed_metadata="",
                                ),
                            ),
                        ),
                    ),
                )
            )
            return response.topics[0].partitions[0].error_code

        first = join("")
        assert first.error_code == ErrorCode.member_id_required
        # The only member: the join completes at once and the group waits for its SyncGroup.
        joined = join(first.member_id)
        assert joined.error_code == ErrorCode.none and joined.leader == first.member_id
        generation = joined.generation_id

        assert commit("ghost", generation) == ErrorCode.unknown_member_id
        assert commit(first.member_id, generation + 1) == ErrorCode.illegal_generation
        assert commit(first.member_id, generation) == ErrorCode.rebalance_in_progress
    finally:
        client.close()
