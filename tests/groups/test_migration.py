"""KIP-848 online migration (group.consumer.migration.policy=bidirectional, Kafka 4's default): a
librdkafka group.protocol=consumer member joining a live classic group upgrades it to a consumer
group in which the classic members carry on; when it leaves, the group goes back to classic."""

from __future__ import annotations

import pytest

from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from tests.integration.wire_client import WireClient

from .conftest import create_topic
from .members import KafkaPythonMember
from .test_consumer_protocol import NextGenMember
from .test_mixed_clients import PARTITIONS, Flow, wait_for


def group_type(bootstrap: str, group: str) -> str | None:
    client = WireClient(bootstrap)
    try:
        cls = schemas.request_schema(ApiKey.LIST_GROUPS, 5)
        listed = client.call(schemas.build(cls, states_filter=(), types_filter=())).groups
    finally:
        client.close()
    return next((g.group_type for g in listed if g.group_id == group), None)


def covers(members) -> bool:
    parts = [m.assignment for m in members]
    return (
        all(parts)
        and sum(len(p) for p in parts) == PARTITIONS
        and set().union(*parts) == set(range(PARTITIONS))
    )


@pytest.mark.timeout(120)
def test_classic_group_upgrades_when_a_consumer_member_joins_and_downgrades_when_it_leaves(broker):
    bs = broker.bootstrap_servers
    topic = create_topic(bs, PARTITIONS)
    group = "migrating"
    flow = Flow(bs, topic)
    flow.start()
    classic = KafkaPythonMember(bs, group, topic)
    modern = NextGenMember(bs, group, topic)
    try:
        classic.start()
        wait_for(lambda: classic.assignment == set(range(PARTITIONS)))
        assert group_type(bs, group) == "classic"
        modern.start()
        # Upgraded: the broker now assigns, to both the classic and the consumer-protocol member.
        wait_for(lambda: group_type(bs, group) == "consumer" and covers([classic, modern]))
        modern.stop()
        # Downgraded: the classic member rebalances alone and gets everything back.
        wait_for(
            lambda: (
                group_type(bs, group) == "classic" and classic.assignment == set(range(PARTITIONS))
            )
        )
    finally:
        flow.stop()
    sent = set(flow.sent)
    wait_for(lambda: sent <= set(classic.seen) | set(modern.seen))
    classic.stop()
