"""ListGroups v5 (type filter, group type) and DescribeGroups v6 (KIP-1043) as Kafka 4.x answers them."""

from __future__ import annotations

import datetime
import importlib
import uuid

from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from tests.integration.wire_client import WireClient

from .conftest import create_topic


def call(bootstrap: str, api_key: int, version: int, **fields):
    client = WireClient(bootstrap)
    try:
        return client.call(schemas.build(schemas.request_schema(api_key, version), **fields))
    finally:
        client.close()


def make_groups(bootstrap: str) -> tuple[str, str]:
    """A consumer-protocol group with one member and an Empty classic group holding an offset."""
    topic = create_topic(bootstrap, 1)
    consumer_group, classic_group = f"cg-{uuid.uuid4().hex[:6]}", f"classic-{uuid.uuid4().hex[:6]}"
    joined = call(
        bootstrap,
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        1,
        group_id=consumer_group,
        member_id=str(uuid.uuid4()),
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=(topic,),
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=(),
    )
    assert joined.error_code == ErrorCode.none
    module = importlib.import_module("kio.schema.offset_commit.v8.request")
    committed = call(
        bootstrap,
        ApiKey.OFFSET_COMMIT,
        8,
        group_id=classic_group,
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
                        committed_offset=1,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    ),
                ),
            ),
        ),
    )
    assert committed.topics[0].partitions[0].error_code == ErrorCode.none
    return consumer_group, classic_group


def listed(bootstrap: str, version: int, **filters) -> dict[str, tuple]:
    response = call(bootstrap, ApiKey.LIST_GROUPS, version, **filters)
    assert response.error_code == ErrorCode.none
    return {
        g.group_id: (g.protocol_type, g.group_state, getattr(g, "group_type", None))
        for g in response.groups
    }


def test_list_groups_filters_by_type_and_state(broker):
    bs = broker.bootstrap_servers
    consumer_group, classic_group = make_groups(bs)
    everything = listed(bs, 5, states_filter=(), types_filter=())
    assert everything[consumer_group] == ("consumer", "Stable", "consumer")
    assert everything[classic_group] == ("", "Empty", "classic")
    only_consumer = listed(bs, 5, states_filter=(), types_filter=("Consumer",))
    assert consumer_group in only_consumer and classic_group not in only_consumer
    only_classic = listed(bs, 5, states_filter=(), types_filter=("classic",))
    assert classic_group in only_classic and consumer_group not in only_classic
    # State names match whatever their case, as in Kafka.
    empty = listed(bs, 4, states_filter=("EMPTY",))
    assert classic_group in empty and consumer_group not in empty


def test_describe_groups_v6_says_group_not_found_older_versions_say_dead(broker):
    bs = broker.bootstrap_servers
    consumer_group, classic_group = make_groups(bs)
    groups = (consumer_group, classic_group, "no-such-group")
    v6 = {
        g.group_id: g
        for g in call(
            bs, ApiKey.DESCRIBE_GROUPS, 6, groups=groups, include_authorized_operations=False
        ).groups
    }
    assert (v6[consumer_group].error_code, v6[consumer_group].error_message) == (
        ErrorCode.group_id_not_found,
        f"Group {consumer_group} is not a classic group.",
    )
    assert v6["no-such-group"].error_code == ErrorCode.group_id_not_found
    assert (v6[classic_group].error_code, v6[classic_group].group_state) == (
        ErrorCode.none,
        "Empty",
    )
    v5 = {
        g.group_id: g
        for g in call(
            bs, ApiKey.DESCRIBE_GROUPS, 5, groups=groups, include_authorized_operations=False
        ).groups
    }
    assert (v5[consumer_group].error_code, v5[consumer_group].group_state) == (
        ErrorCode.none,
        "Dead",
    )
    assert (v5["no-such-group"].error_code, v5["no-such-group"].group_state) == (
        ErrorCode.none,
        "Dead",
    )


def test_consumer_group_describe_v1_names_member_type(broker):
    bs = broker.bootstrap_servers
    consumer_group, _ = make_groups(bs)
    described = call(
        bs,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        1,
        group_ids=(consumer_group,),
        include_authorized_operations=False,
    ).groups[0]
    assert described.error_code == ErrorCode.none
    assert [m.member_type for m in described.members] == [1]
