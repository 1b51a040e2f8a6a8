"""Static members (group.instance.id, KIP-345) restart without a rebalance."""

from __future__ import annotations

import pytest

from .conftest import create_topic, produce
from .members import ConfluentMember, KafkaPythonMember
from .test_mixed_clients import PARTITIONS, shares_all_partitions, wait_for


@pytest.mark.timeout(90)
def test_static_member_restart_keeps_assignment_without_rebalance(broker):
    bs = broker.bootstrap_servers
    topic = create_topic(bs, PARTITIONS)
    produce(bs, topic, [b"v%d" % i for i in range(60)], PARTITIONS)
    group = "static"
    a = ConfluentMember(bs, group, topic, **{"group.instance.id": "a", "session.timeout.ms": 20000})
    b = KafkaPythonMember(bs, group, topic, group_instance_id="b", session_timeout_ms=20000)
    a.start()
    b.start()
    wait_for(lambda: shares_all_partitions([a, b]) and len(set(a.seen) | set(b.seen)) == 60)
    before_a, rebalances_b = a.assignment, b.assignments
    # A static member leaving by close() does not send LeaveGroup; its restart reclaims its slot.
    a.stop()
    a2 = ConfluentMember(bs, group, topic, **{"group.instance.id": "a", "session.timeout.ms": 20000})
    a2.start()
    wait_for(lambda: a2.assignment)
    assert a2.assignment == before_a
    produce(bs, topic, [b"after"] * PARTITIONS, PARTITIONS)
    wait_for(lambda: a2.seen.count(b"after") + b.seen.count(b"after") == PARTITIONS)
    # b never saw a rebalance.
    assert b.assignments == rebalances_b, (rebalances_b, b.assignments, b.assignment, a2.assignment)
    a2.stop()
    b.stop()
