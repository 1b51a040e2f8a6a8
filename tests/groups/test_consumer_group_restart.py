"""KIP-848 groups survive broker restarts: members, epochs and assignments come back from
__consumer_offsets, so librdkafka members carry on without rejoining or rebalancing."""

from __future__ import annotations

import pytest

from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from tests.integration.wire_client import WireClient

from .conftest import create_topic, produce
from .test_consumer_protocol import NextGenMember, disjoint_cover
from .test_mixed_clients import PARTITIONS, wait_for


def describe(bootstrap: str, group: str):
    """ConsumerGroupDescribe v0 over a raw connection: (group epoch, {member id: (epoch, partitions)})."""
    client = WireClient(bootstrap)
    try:
        request = schemas.build(
            schemas.request_schema(ApiKey.CONSUMER_GROUP_DESCRIBE, 0),
            group_ids=(group,),
            include_authorized_operations=False,
        )
        described = client.call(request).groups[0]
    finally:
        client.close()
    assert described.error_code == 0, described
    members = {
        m.member_id: (
            m.member_epoch,
            {p for t in m.assignment.topic_partitions for p in t.partitions},
        )
        for m in described.members
    }
    return described.group_epoch, members


@pytest.mark.timeout(120)
@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "sigkill"])
def test_consumer_group_members_and_epochs_survive_restart(fresh_broker, hard):
    bs = fresh_broker.bootstrap_servers
    topic = create_topic(bs, PARTITIONS)
    group = f"restart-{'kill' if hard else 'term'}"
    a = NextGenMember(bs, group, topic)
    b = NextGenMember(bs, group, topic)
    try:
        a.start()
        b.start()
        wait_for(lambda: disjoint_cover([a, b]))
        # Reconciled: both members at the group epoch, holding what they were assigned.
        wait_for(
            lambda: (lambda e, ms: len(ms) == 2 and all(ep == e for ep, _ in ms.values()))(
                *describe(bs, group)
            )
        )
        before = describe(bs, group)
        fresh_broker.restart(hard=hard)
        # Straight from the log, before anyone heartbeats into the new process.
        assert describe(bs, group) == before
        produce(bs, topic, [b"after-%d" % i for i in range(PARTITIONS)], PARTITIONS)
        wait_for(lambda: sum(v.startswith(b"after-") for v in a.seen + b.seen) == PARTITIONS)
        # The members carried on with their epochs: no member rejoined, nothing was reassigned.
        assert describe(bs, group) == before
    finally:
        a.stop()
        b.stop()
