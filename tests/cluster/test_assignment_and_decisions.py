"""Sans-I/O cluster pieces: Kafka's replica assignment and the controller's leader decisions."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.metadata.controller import (
    completed_reassignments,
    led_partitions_to_move,
    partition_state_changes,
    preferred_leader_changes,
)
from odradek.metadata.image import BrokerImage
from odradek.metadata.replica_assignment import (
    AdminOperationError,
    assign_replicas,
    rack_alternated_brokers,
)
from odradek.metadata.store import InvalidReplicationFactor
from odradek.metadata.zk_layout import NO_LEADER, PartitionState, TopicAssignment


def brokers(*ids: int, racks: dict[int, str] | None = None) -> list[BrokerImage]:
    return [BrokerImage(i, (("PLAINTEXT", "h", 9000 + i),), (racks or {}).get(i)) for i in ids]


def test_rack_unaware_assignment_is_kafkas():
    # Kafka's AdminRackAwareTest.testReplicaAssignment: 5 brokers, fixed start index 0.
    assert assign_replicas(brokers(0, 1, 2, 3, 4), 10, 3, fixed_start_index=0) == {
        0: (0, 1, 2),
        1: (1, 2, 3),
        2: (2, 3, 4),
        3: (3, 4, 0),
        4: (4, 0, 1),
        5: (0, 2, 3),
        6: (1, 3, 4),
        7: (2, 4, 0),
        8: (3, 0, 1),
        9: (4, 1, 2),
    }


def test_rack_alternated_broker_list_is_kafkas():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]
    del racks[5]
    assert rack_alternated_brokers(racks) == [0, 3, 1, 4, 2]


def test_assignment_errors():
    with pytest.raises(InvalidReplicationFactor):
        assign_replicas(brokers(0, 1, 2, 3, 4), 10, 6)
    with pytest.raises(InvalidReplicationFactor):
        assign_replicas(brokers(0, 1), 10, 0)
    with pytest.raises(AdminOperationError):
        assign_replicas(brokers(0, 1, racks={0: "a"}), 2, 2)


@given(
    st.dictionaries(st.integers(0, 30), st.sampled_from("abcd"), min_size=1, max_size=9),
    st.integers(1, 24),
    st.data(),
)
def test_rack_aware_assignment_spreads_replicas(racks, partitions, data):
    """As Kafka's checkReplicaDistribution: distinct brokers, every rack used before any twice,
    and leaders spread evenly when the partitions fill whole rounds of brokers."""
    rf = data.draw(st.integers(1, len(racks)))
    assignment = assign_replicas(brokers(*racks, racks=racks), partitions, rf)
    assert sorted(assignment) == list(range(partitions))
    num_racks = len(set(racks.values()))
    for replicas in assignment.values():
        assert len(set(replicas)) == rf
        assert len({racks[r] for r in replicas}) == min(rf, num_racks)
    if partitions % len(racks) == 0:
        leaders = Counter(replicas[0] for replicas in assignment.values())
        assert set(leaders.values()) == {partitions // len(racks)}


def _one(replicas, state, live, unclean=False, shutting_down=frozenset()):
    states = {} if state is None else {("t", 0): (state, 7)}
    assignment = {"t": TopicAssignment(None, {0: replicas}, {}, {})}
    changes = partition_state_changes(
        assignment, states, live, 5, lambda _t: unclean, shutting_down=set(shutting_down)
    )
    assert all(c.expected_version == (None if state is None else 7) for c in changes)
    return changes[0].state if changes else None


def test_new_partition_leader_is_first_live_replica():
    assert _one((1, 2, 3), None, {2, 3}) == PartitionState(2, 0, (2, 3), 5)
    assert _one((1, 2, 3), None, set()) is None


def test_failover_elects_from_isr_in_assignment_order():
    state = PartitionState(1, 4, (1, 3, 2), 2)
    assert _one((1, 2, 3), state, {2, 3}) == PartitionState(2, 5, (3, 2), 5)


def test_last_isr_member_dead_leaves_no_leader_unless_unclean():
    state = PartitionState(1, 4, (1,), 2)
    assert _one((1, 2), state, {2}) == PartitionState(NO_LEADER, 5, (1,), 5)
    assert _one((1, 2), state, {2}, unclean=True) == PartitionState(2, 5, (2,), 5)
    # Nothing changes until the ISR member returns, then it leads again.
    offline = PartitionState(NO_LEADER, 5, (1,), 5)
    assert _one((1, 2), offline, {2}) is None
    assert _one((1, 2), offline, {1, 2}) == PartitionState(1, 6, (1,), 5)


def test_dead_follower_leaves_the_isr():
    state = PartitionState(1, 0, (1, 2, 3), 1)
    assert _one((1, 2, 3), state, {1, 2}) == PartitionState(1, 1, (1, 2), 5)
    assert _one((1, 2, 3), state, {1, 2, 3}) is None


def test_controlled_shutdown_moves_leadership_to_the_next_isr_member():
    state = PartitionState(1, 4, (1, 2, 3), 2)
    assert _one((1, 2, 3), state, {1, 2, 3}, shutting_down={1}) == PartitionState(2, 5, (2, 3), 5)
    # Another broker shutting down too is not elected.
    assert _one((1, 2, 3), state, {1, 2, 3}, shutting_down={1, 2}) == PartitionState(3, 5, (3,), 5)
    # No other ISR member: the broker keeps leading (and asks again).
    alone = PartitionState(1, 4, (1,), 2)
    assert _one((1, 2, 3), alone, {1, 2, 3}, shutting_down={1}) is None


def test_controlled_shutdown_takes_a_follower_out_of_the_isr():
    state = PartitionState(1, 4, (1, 2, 3), 2)
    assert _one((1, 2, 3), state, {1, 2, 3}, shutting_down={3}) == PartitionState(1, 5, (1, 2), 5)
    # An offline election does not pick a broker that is shutting down.
    assert _one((1, 2, 3), state, {2, 3}, shutting_down={2}) == PartitionState(3, 5, (3,), 5)


def test_partitions_left_to_move_are_the_replicated_ones_led():
    assignment = {"t": TopicAssignment(None, {0: (1, 2), 1: (1,), 2: (2, 1)}, {}, {})}
    states = {
        ("t", 0): (PartitionState(1, 0, (1, 2), 1), 0),
        ("t", 1): (PartitionState(1, 0, (1,), 1), 0),
        ("t", 2): (PartitionState(2, 0, (2, 1), 1), 0),
    }
    assert led_partitions_to_move(assignment, states, 1) == {("t", 0)}
    assert led_partitions_to_move(assignment, states, 2) == {("t", 2)}


def _rebalance(leaders, isr=(1, 2, 3), live=(1, 2, 3), percentage=10, shutting_down=()):
    """Preferred-leader changes for partitions 0..n-1 of (1, 2, 3) led by ``leaders``."""
    replicas = dict.fromkeys(range(len(leaders)), (1, 2, 3))
    states = {("t", p): (PartitionState(b, 2, isr, 1), p) for p, b in enumerate(leaders)}
    assignment = {"t": TopicAssignment(None, replicas, {}, {})}
    changes = preferred_leader_changes(
        assignment, states, set(live), 9, percentage, shutting_down=set(shutting_down)
    )
    assert all(c.expected_version == c.partition for c in changes)
    return {c.partition: c.state for c in changes}


def test_auto_rebalance_moves_leadership_back_to_the_preferred_replica():
    assert _rebalance([2, 1, 3]) == {
        0: PartitionState(1, 3, (1, 2, 3), 9),
        2: PartitionState(1, 3, (1, 2, 3), 9),
    }
    assert _rebalance([1, 1, 1]) == {}


def test_auto_rebalance_respects_the_imbalance_threshold_and_eligibility():
    # 1 of 10 partitions away from broker 1 is 10%: not above the threshold.
    assert _rebalance([2] + [1] * 9) == {}
    assert _rebalance([2] + [1] * 9, percentage=9) == {0: PartitionState(1, 3, (1, 2, 3), 9)}
    # The preferred replica must be live, serving and in the ISR.
    assert _rebalance([2, 2], live=(2, 3)) == {}
    assert _rebalance([2, 2], shutting_down=(1,)) == {}
    assert _rebalance([2, 2], isr=(2, 3)) == {}


def test_auto_rebalance_waits_for_reassignments():
    states = {("t", 0): (PartitionState(2, 2, (1, 2, 3), 1), 0)}
    moving = {"t": TopicAssignment(None, {0: (1, 2, 3)}, {0: (3,)}, {})}
    assert preferred_leader_changes(moving, states, {1, 2, 3}, 9, 10) == []


def _complete(state, live=(1, 2, 3, 4), shutting_down=()):
    """Partition 0 moving from (1, 2) to (3, 2): replicas (3, 2, 1), adding 3, removing 1."""
    assignment = TopicAssignment(None, {0: (3, 2, 1), 1: (1, 2)}, {0: (3,)}, {0: (1,)})
    done = completed_reassignments(
        {"t": (assignment, 4)}, {("t", 0): (state, 7)}, set(live), 9, set(shutting_down)
    )
    return done[0] if done else None


def test_reassignment_waits_for_the_target_replicas_to_be_in_sync():
    assert _complete(PartitionState(1, 2, (1, 2), 1)) is None
    assert _complete(PartitionState(1, 2, (1, 3), 1)) is None


def test_completed_reassignment_moves_leadership_into_the_target():
    done = _complete(PartitionState(1, 2, (1, 2, 3), 1))
    assert done.expected_version == 4
    assert done.assignment == TopicAssignment(None, {0: (3, 2), 1: (1, 2)}, {}, {})
    (change,) = done.states
    assert (change.partition, change.expected_version) == (0, 7)
    assert change.state == PartitionState(3, 3, (2, 3), 9)


def test_completed_reassignment_keeps_a_leader_inside_the_target():
    (change,) = _complete(PartitionState(2, 2, (1, 2, 3), 1)).states
    assert change.state == PartitionState(2, 3, (2, 3), 9)
    # No target replica can lead (2 shutting down, 3 dead): it waits.
    assert _complete(PartitionState(1, 2, (1, 2, 3), 1), live=(1, 2), shutting_down=(2,)) is None


def test_a_leader_or_isr_member_no_longer_a_replica_is_dropped():
    # A cancelled reassignment left replica 3 in the ISR, and leading.
    assert _one((1, 2), PartitionState(1, 4, (1, 2, 3), 2), {1, 2, 3}) == PartitionState(
        1, 5, (1, 2), 5
    )
    assert _one((1, 2), PartitionState(3, 4, (1, 2, 3), 2), {1, 2, 3}) == PartitionState(
        1, 5, (1, 2), 5
    )


@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=5, unique=True),
    st.data(),
)
def test_decisions_keep_kafkas_invariants(replicas, data):
    """Whatever the view: the leader is live and in the ISR (or -1), the ISR stays within the
    replicas and never empties, the epoch moves up by one, and applying the decision again
    changes nothing (the controller reaches a fixed point)."""
    isr = tuple(data.draw(st.lists(st.sampled_from(replicas), min_size=1, unique=True)))
    leader = data.draw(st.sampled_from([*isr, NO_LEADER]))
    live = set(data.draw(st.lists(st.integers(1, 5), unique=True)))
    unclean = data.draw(st.booleans())
    stopping = (
        set(data.draw(st.lists(st.sampled_from(sorted(live)), unique=True))) if live else set()
    )
    state = PartitionState(leader, 3, isr, 1)
    new = _one(tuple(replicas), state, live, unclean, stopping)
    if new is None:
        return
    assert new.leader_epoch == 4
    assert new.isr and set(new.isr) <= set(replicas)
    if new.leader != NO_LEADER:
        assert new.leader in live and new.leader in new.isr
        assert new.leader not in stopping or new.leader == leader
        if not unclean:
            assert new.leader in isr
    assert _one(tuple(replicas), new, live, unclean, stopping) is None
