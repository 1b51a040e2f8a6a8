"""The KIP-848 consumer group core: epochs, server-side assignment, revoke-then-assign."""

from __future__ import annotations

import uuid

from hypothesis import given, strategies as st

from odradek.coordinator.assignors import range_assign, uniform_assign
from odradek.coordinator.config import GroupCoordinatorConfig
from odradek.coordinator.coordinator import GroupCoordinator, OffsetCommit
from odradek.protocol.errors import ErrorCode

T = uuid.UUID(int=1)
TOPICS = {"t": (T, 4)}


def hb(gc, member_id="", epoch=0, owned=None, topics=("t",), now=0, assignor=None, group="cg"):
    return gc.consumer_group_heartbeat(group, member_id, epoch, None, None, 30_000,
                                       list(topics) if topics is not None else None, assignor, owned, "c", "/h",
                                       TOPICS, now)


def test_join_gets_everything_then_second_member_waits_for_revocation():
    gc = GroupCoordinator(GroupCoordinatorConfig(group_consumer_session_timeout_ms=10_000))
    a = hb(gc, "a")
    assert a.error == ErrorCode.none and a.member_epoch == 1 and a.assignment == {T: {0, 1, 2, 3}}
    b = hb(gc, "b")
    assert b.member_epoch == 2 and b.assignment == {}  # its partitions are still a's
    # a is asked to revoke two partitions and stays at its epoch until it confirms.
    a2 = hb(gc, "a", 1, topics=None)
    assert a2.member_epoch == 1 and len(a2.assignment[T]) == 2
    kept = a2.assignment
    a3 = hb(gc, "a", 1, owned=kept, topics=None)
    assert a3.member_epoch == 2 and a3.assignment is None  # unchanged since sent
    b2 = hb(gc, "b", 2, owned={}, topics=None)
    assert b2.assignment == {T: {0, 1, 2, 3} - kept[T]}
    assert gc.groups["cg"].state_name == "Stable"


def test_fencing_leave_and_session_expiry():
    gc = GroupCoordinator(GroupCoordinatorConfig(group_consumer_session_timeout_ms=10_000))
    hb(gc, "a")
    assert hb(gc, "a", 7, topics=None).error == ErrorCode.fenced_member_epoch
    assert hb(gc, "ghost", 3, topics=None).error == ErrorCode.unknown_member_id
    hb(gc, "b", now=1)
    hb(gc, "a", 1, owned={T: {0, 1, 2, 3}}, topics=None, now=2)
    left = hb(gc, "b", -1, topics=None, now=3)
    assert left.member_epoch == -1 and "b" not in gc.groups["cg"].members
    assert gc.next_deadline_ms() == 2 + 10_000
    gc.poll(10_002)
    assert gc.groups["cg"].members == {} and gc.groups["cg"].state_name == "Empty"


def test_commit_needs_current_member_epoch():
    gc = GroupCoordinator()
    a = hb(gc, "a")
    assert gc.commit_offsets("cg", "a", None, a.member_epoch, [OffsetCommit("t", 0, 5)], 1)[0] == ErrorCode.none
    assert gc.commit_offsets("cg", "a", None, 0, [OffsetCommit("t", 0, 6)], 1)[0] == ErrorCode.stale_member_epoch
    assert gc.commit_offsets("cg", "x", None, 1, [OffsetCommit("t", 0, 6)], 1)[0] == ErrorCode.unknown_member_id
    assert gc.fetch_offsets("cg", [("t", 0)])[("t", 0)].offset == 5
    assert gc.list_groups() == [("cg", "consumer", "Stable")]


subscriptions = st.dictionaries(st.text("abcdef", min_size=1, max_size=3), st.just({T, uuid.UUID(int=2)}),
                                min_size=1, max_size=6)
counts = st.tuples(st.integers(0, 12), st.integers(0, 12))


@given(subscriptions, counts)
def test_assignors_assign_each_partition_exactly_once_and_balanced(subs, sizes):
    partitions = {T: sizes[0], uuid.UUID(int=2): sizes[1]}
    for assignor in (uniform_assign, range_assign):
        out = assignor(subs, partitions, {})
        owned = [(t, p) for a in out.values() for t, ps in a.items() for p in ps]
        assert sorted(owned) == sorted((t, p) for t, n in partitions.items() for p in range(n))
    loads = [sum(len(ps) for ps in a.values()) for a in uniform_assign(subs, partitions, {}).values()]
    assert max(loads) - min(loads) <= 1
