"""A __consumer_offsets append that fails is answered with Kafka's error and changes nothing.

The writes fail for real: __consumer_offsets is given min.insync.replicas=2 on a
single broker (NOT_ENOUGH_REPLICAS -> COORDINATOR_NOT_AVAILABLE) or a
max.message.bytes smaller than the batch (MESSAGE_TOO_LARGE -> UNKNOWN_SERVER_ERROR),
as Kafka's CoordinatorRuntime maps them.
"""

from __future__ import annotations

import datetime
import importlib
import select
import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from tests.integration.wire_client import WireClient

from .conftest import create_topic


def set_offsets_topic_config(bootstrap: str, name: str, value: str | None) -> None:
    op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "__consumer_offsets",
        incremental_configs=[ConfigEntry(name, value or "", incremental_operation=op)],
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.incremental_alter_configs([resource])[resource].result(10)


@pytest.fixture
def client(fresh_broker) -> Iterator[WireClient]:
    c = WireClient(fresh_broker.bootstrap_servers)
    yield c
    c.close()


def commit(client: WireClient, group: str, topic: str, offset: int, metadata: str = "") -> int:
    cls = schemas.request_schema(ApiKey.OFFSET_COMMIT, 8)
    module = importlib.import_module("kio.schema.offset_commit.v8.request")
    request = schemas.build(
        cls,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            schemas.build(
                module.OffsetCommitRequestTopic,
                name=topic,
                partitions=(
                    schemas.build(
                        module.OffsetCommitRequestPartition,
                        partition_index=0,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata=metadata,
                    ),
                ),
            ),
        ),
    )
    return client.call(request).topics[0].partitions[0].error_code


def committed(client: WireClient, group: str, topic: str) -> int:
    cls = schemas.request_schema(ApiKey.OFFSET_FETCH, 8)
    module = importlib.import_module("kio.schema.offset_fetch.v8.request")
    request = schemas.build(
        cls,
        groups=(
            schemas.build(
                module.OffsetFetchRequestGroup,
                group_id=group,
                topics=(
                    schemas.build(
                        module.OffsetFetchRequestTopics, name=topic, partition_indexes=(0,)
                    ),
                ),
            ),
        ),
        require_stable=False,
    )
    return client.call(request).groups[0].topics[0].partitions[0].committed_offset


def join_consumer_group(client: WireClient, group: str, topic: str):
    cls = schemas.request_schema(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0)
    request = schemas.build(
        cls,
        group_id=group,
        member_id="",
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=(topic,),
        server_assignor=None,
        topic_partitions=(),
    )
    return client.call(request)


def described_error(client: WireClient, group: str) -> int:
    cls = schemas.request_schema(ApiKey.CONSUMER_GROUP_DESCRIBE, 0)
    return (
        client.call(schemas.build(cls, group_ids=(group,), include_authorized_operations=False))
        .groups[0]
        .error_code
    )


@pytest.mark.timeout(60)
def test_not_enough_replicas_is_coordinator_not_available_and_nothing_changes(fresh_broker, client):
    bs = fresh_broker.bootstrap_servers
    topic = create_topic(bs, 1)
    assert commit(client, "g", topic, 5) == ErrorCode.none
    set_offsets_topic_config(bs, "min.insync.replicas", "2")
    assert commit(client, "g", topic, 9) == ErrorCode.coordinator_not_available
    assert committed(client, "g", topic) == 5
    # A consumer-protocol member cannot join either, and no group is left behind.
    joined = join_consumer_group(client, "cg", topic)
    assert joined.error_code == ErrorCode.coordinator_not_available
    assert described_error(client, "cg") == ErrorCode.group_id_not_found
    set_offsets_topic_config(bs, "min.insync.replicas", None)
    assert commit(client, "g", topic, 9) == ErrorCode.none
    assert join_consumer_group(client, "cg", topic).error_code == ErrorCode.none
    # What was answered is what a restart reads back.
    fresh_broker.restart(hard=True)
    after = WireClient(bs)
    try:
        assert committed(after, "g", topic) == 9
        assert described_error(after, "cg") == ErrorCode.none
    finally:
        after.close()


@pytest.mark.timeout(60)
def test_record_too_large_is_unknown_server_error_and_nothing_changes(fresh_broker, client):
    bs = fresh_broker.bootstrap_servers
    topic = create_topic(bs, 1)
    assert commit(client, "g", topic, 5) == ErrorCode.none
    set_offsets_topic_config(bs, "max.message.bytes", "200")
    assert commit(client, "g", topic, 9, metadata="m" * 300) == ErrorCode.unknown_server_error
    assert committed(client, "g", topic) == 5
    set_offsets_topic_config(bs, "max.message.bytes", None)
    assert commit(client, "g", topic, 9, metadata="m" * 300) == ErrorCode.none
    assert committed(client, "g", topic) == 9


def join_request(group: str, instance: str, member_id: str = ""):
    module = importlib.import_module("kio.schema.join_group.v5.request")
    return schemas.build(
        module.JoinGroupRequest,
        group_id=group,
        session_timeout=datetime.timedelta(seconds=30),
        rebalance_timeout=datetime.timedelta(seconds=30),
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=(schemas.build(module.JoinGroupRequestProtocol, name="range", metadata=b"m"),),
    )


def sync_request(
    group: str, instance: str, member_id: str, generation: int, assignments: dict[str, bytes]
):
    module = importlib.import_module("kio.schema.sync_group.v5.request")
    return schemas.build(
        module.SyncGroupRequest,
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocol_name="range",
        assignments=tuple(
            schemas.build(module.SyncGroupRequestAssignment, member_id=m, assignment=a)
            for m, a in assignments.items()
        ),
    )


def group_state(client: WireClient, group: str) -> str:
    cls = schemas.request_schema(ApiKey.DESCRIBE_GROUPS, 5)
    return (
        client.call(schemas.build(cls, groups=(group,), include_authorized_operations=False))
        .groups[0]
        .group_state
    )


@pytest.mark.timeout(60)
def test_failed_sync_leaves_the_rebalance_open_and_the_waiting_member_still_waiting(
    fresh_broker, client
):
    """The leader's SyncGroup cannot write the group: it gets COORDINATOR_NOT_AVAILABLE, the group stays
    in CompletingRebalance, and the follower already waiting in SyncGroup is not answered until the
    leader's retry succeeds (its answer from the failed call is withheld, as Kafka's)."""
    bs = fresh_broker.bootstrap_servers
    follower = WireClient(bs)
    try:
        first = client.call(join_request("cw", "ia"))
        assert first.error_code == ErrorCode.none
        follower.send(join_request("cw", "ib"))
        leader = client.call(join_request("cw", "ia", first.member_id))
        joined = follower.receive(join_request("cw", "ib"))
        assert (
            leader.generation_id == joined.generation_id == 2 and leader.leader == leader.member_id
        )
        plan = {leader.member_id: b"A", joined.member_id: b"B"}
        follower.send(sync_request("cw", "ib", joined.member_id, 2, {}))
        set_offsets_topic_config(bs, "min.insync.replicas", "2")
        failed = client.call(sync_request("cw", "ia", leader.member_id, 2, plan))
        assert failed.error_code == ErrorCode.coordinator_not_available
        assert group_state(client, "cw") == "CompletingRebalance"
        # Nothing was sent to the follower (a wrong answer would already be there).
        assert select.select([follower.sock], [], [], 1.0)[0] == []
        set_offsets_topic_config(bs, "min.insync.replicas", None)
        done = client.call(sync_request("cw", "ia", leader.member_id, 2, plan))
        assert (done.error_code, done.assignment) == (ErrorCode.none, b"A")
        waited = follower.receive(sync_request("cw", "ib", joined.member_id, 2, {}))
        assert (waited.error_code, waited.assignment) == (ErrorCode.none, b"B")
        assert group_state(client, "cw") == "Stable"
    finally:
        follower.close()


@pytest.mark.timeout(60)
def test_session_expiry_that_cannot_be_written_keeps_the_member_until_it_can(fresh_broker, client):
    """The timer's fencing of an expired member is a write too: while it fails the member stays
    (as the log says), and it is fenced once the write goes through."""
    bs = fresh_broker.bootstrap_servers
    topic = create_topic(bs, 1)
    assert join_consumer_group(client, "expiring", topic).error_code == ErrorCode.none
    set_offsets_topic_config(bs, "min.insync.replicas", "2")
    # Past the session timeout (group.consumer.session.timeout.ms=3000 in these tests), with no heartbeat.
    time.sleep(4)
    assert members_of(client, "expiring") == 1
    set_offsets_topic_config(bs, "min.insync.replicas", None)
    deadline = time.monotonic() + 30
    while members_of(client, "expiring") != 0:
        assert time.monotonic() < deadline, "expired member never fenced"
        time.sleep(0.1)


def members_of(client: WireClient, group: str) -> int:
    cls = schemas.request_schema(ApiKey.CONSUMER_GROUP_DESCRIBE, 0)
    return len(
        client.call(schemas.build(cls, group_ids=(group,), include_authorized_operations=False))
        .groups[0]
        .members
    )
