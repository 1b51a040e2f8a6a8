"""Static members (group.instance.id, KIP-345) restart without a rebalance."""

from __future__ import annotations

import pytest

from .conftest import create_topic, produce
from .members import ConfluentMember, KafkaPythonMember
from .test_mixed_clients import PARTITIONS, shares_all_partitions, wait_for


@pytest.mark.timeout(90)
@pytest.mark.parametrize("first", ["restarting", "other"])
def test_static_member_restart_keeps_assignment_without_rebalance(broker, first):
    bs = broker.bootstrap_servers
    topic = create_topic(bs, PARTITIONS)
    produce(bs, topic, [b"v%d" % i for i in range(60)], PARTITIONS)
    group = f"static-{first}"
    a = ConfluentMember(bs, group, topic, **{"group.instance.id": "a", "session.timeout.ms": 20000})
    b = KafkaPythonMember(bs, group, topic, group_instance_id="b", session_timeout_ms=20000)
    # One member joins alone first, so each run takes a known path: the restarting member a is
    # the leader (and was alone in an earlier generation), or b is. Which of the two led, and
    # whether they joined one generation together, used to depend on timing.
    alone, second = (a, b) if first == "restarting" else (b, a)
    alone.start()
    wait_for(lambda: alone.assignment == set(range(PARTITIONS)))
    second.start()
    wait_for(lambda: shares_all_partitions([a, b]) and len(set(a.seen) | set(b.seen)) == 60)
    before_a, rebalances_b = a.assignment, b.assignments
    # A static member leaving by close() does not send LeaveGroup; its restart reclaims its slot.
    a.stop()
    a2 = ConfluentMember(
        bs, group, topic, **{"group.instance.id": "a", "session.timeout.ms": 20000}
    )
    a2.start()
    wait_for(lambda: a2.assignment)
    assert a2.assignment == before_a
    produce(bs, topic, [b"after"] * PARTITIONS, PARTITIONS)
    wait_for(lambda: a2.seen.count(b"after") + b.seen.count(b"after") == PARTITIONS)
    # b never saw a rebalance.
    assert b.assignments == rebalances_b, (rebalances_b, b.assignments, b.assignment, a2.assignment)
    a2.stop()
    b.stop()
