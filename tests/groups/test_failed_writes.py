"""A __consumer_offsets append that fails is answered with Kafka's error and changes nothing.

The writes fail for real: __consumer_offsets is given min.insync.replicas=2 on a
single broker (NOT_ENOUGH_REPLICAS -> COORDINATOR_NOT_AVAILABLE) or a
max.message.bytes smaller than the batch (MESSAGE_TOO_LARGE -> UNKNOWN_SERVER_ERROR),
as Kafka's CoordinatorRuntime maps them.
"""

from __future__ import annotations

from collections.abc import Iterator

import datetime
import importlib

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from tests.integration.wire_client import WireClient

from .conftest import create_topic


def set_offsets_topic_config(bootstrap: str, name: str, value: str | None) -> None:
    op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    resource = ConfigResource(ConfigResource.Type.TOPIC, "__consumer_offsets",
                              incremental_configs=[ConfigEntry(name, value or "", incremental_operation=op)])
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
    request = schemas.build(cls, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                            group_instance_id=None, topics=(schemas.build(
                                module.OffsetCommitRequestTopic, name=topic, partitions=(schemas.build(
                                    module.OffsetCommitRequestPartition, partition_index=0, committed_offset=offset,
                                    committed_leader_epoch=-1, committed_metadata=metadata),)),))
    return client.call(request).topics[0].partitions[0].error_code


def committed(client: WireClient, group: str, topic: str) -> int:
    cls = schemas.request_schema(ApiKey.OFFSET_FETCH, 8)
    module = importlib.import_module("kio.schema.offset_fetch.v8.request")
    request = schemas.build(cls, groups=(schemas.build(
        module.OffsetFetchRequestGroup, group_id=group,
        topics=(schemas.build(module.OffsetFetchRequestTopics, name=topic, partition_indexes=(0,)),)),),
        require_stable=False)
    return client.call(request).groups[0].topics[0].partitions[0].committed_offset


def join_consumer_group(client: WireClient, group: str, topic: str):
    cls = schemas.request_schema(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0)
    request = schemas.build(cls, group_id=group, member_id="", member_epoch=0, instance_id=None, rack_id=None,
                            rebalance_timeout=datetime.timedelta(seconds=30), subscribed_topic_names=(topic,), server_assignor=None,
                            topic_partitions=())
    return client.call(request)


def described_error(client: WireClient, group: str) -> int:
    cls = schemas.request_schema(ApiKey.CONSUMER_GROUP_DESCRIBE, 0)
    return client.call(schemas.build(cls, group_ids=(group,), include_authorized_operations=False)
                       ).groups[0].error_code


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
