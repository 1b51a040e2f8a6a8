"""The KIP-848 consumer group core: epochs, server-side assignment, revoke-then-assign."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.coordinator.assignors import range_assign, uniform_assign
from odradek.coordinator.config import GroupCoordinatorConfig
from odradek.coordinator.coordinator import GroupCoordinator
from odradek.coordinator.offset_metadata import OffsetCommit
from odradek.protocol.errors import ErrorCode

T = uuid.UUID(int=1)
TOPICS = {"t": (T, 4)}


def hb(gc, member_id="", epoch=0, owned=None, topics=("t",), now=0, assignor=None, group="cg"):
    return gc.consumer_group_heartbeat(
        group,
        member_id,
        epoch,
        None,
        None,
        30_000,
        list(topics) if topics is not None else None,
        assignor,
        owned,
        "c",
        "/h",
        TOPICS,
        now,
    )


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
    assert (
        gc.commit_offsets("cg", "a", None, a.member_epoch, [OffsetCommit("t", 0, 5)], 1)[0]
        == ErrorCode.none
    )
    assert (
        gc.commit_offsets("cg", "a", None, 0, [OffsetCommit("t", 0, 6)], 1)[0]
        == ErrorCode.stale_member_epoch
    )
    assert (
        gc.commit_offsets("cg", "x", None, 1, [OffsetCommit("t", 0, 6)], 1)[0]
        == ErrorCode.unknown_member_id
    )
    assert gc.fetch_offsets("cg", [("t", 0)])[("t", 0)].offset == 5
    assert gc.list_groups() == [("cg", "consumer", "Stable", "consumer")]
    assert gc.list_groups(states=["STABLE "], types=["Consumer"]) == gc.list_groups()
    assert gc.list_groups(types=["classic"]) == gc.list_groups(states=["Empty"]) == []


subscriptions = st.dictionaries(
    st.text("abcdef", min_size=1, max_size=3),
    st.just({T, uuid.UUID(int=2)}),
    min_size=1,
    max_size=6,
)
counts = st.tuples(st.integers(0, 12), st.integers(0, 12))


@given(subscriptions, counts)
def test_assignors_assign_each_partition_exactly_once_and_balanced(subs, sizes):
    partitions = {T: sizes[0], uuid.UUID(int=2): sizes[1]}
    for assignor in (uniform_assign, range_assign):
        out = assignor(subs, partitions, {})
        owned = [(t, p) for a in out.values() for t, ps in a.items() for p in ps]
        assert sorted(owned) == sorted((t, p) for t, n in partitions.items() for p in range(n))
    loads = [
        sum(len(ps) for ps in a.values()) for a in uniform_assign(subs, partitions, {}).values()
    ]
    assert max(loads) - min(loads) <= 1


schedule = st.lists(
    st.tuples(
        st.sampled_from(["hb", "hb", "join", "leave", "tick"]),
        st.integers(0, 2),
        st.integers(0, 4_000),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(schedule, st.sampled_from(["uniform", "range"]))
def test_no_partition_is_ever_owned_by_two_members_and_the_group_converges(ops, assignor):
    """Members that honestly report what they own never overlap, and settle on the target."""
    gc = GroupCoordinator(GroupCoordinatorConfig(group_consumer_session_timeout_ms=10_000))
    owned: dict[str, dict] = {}  # what each client owns right now
    revoking: dict[
        str, dict
    ] = {}  # taken away by the last response, released before the next heartbeat
    epochs: dict[str, int] = {}
    now = 0

    def beat(member_id: str, epoch: int, topics=None) -> None:
        # Like a real client, it finishes revoking (commits, callbacks) before it reports what it owns.
        mine = owned.setdefault(member_id, {})
        for t, ps in revoking.pop(member_id, {}).items():
            mine[t] = mine.get(t, set()) - ps
        report = {t: set(ps) for t, ps in mine.items() if ps}
        r = hb(gc, member_id, epoch, owned=report, topics=topics, now=now, assignor=assignor)
        if r.error == ErrorCode.none and epoch >= 0:
            epochs[member_id] = r.member_epoch
            if r.assignment is not None:
                for t, ps in r.assignment.items():
                    mine.setdefault(t, set()).update(ps)
                revoking[member_id] = {t: ps - r.assignment.get(t, set()) for t, ps in mine.items()}
        elif r.error != ErrorCode.none:
            owned.pop(member_id, None)
            epochs.pop(member_id, None)

    for op, who, dt in ops:
        now += dt
        member_id = f"m{who}"
        if op == "join" and member_id not in epochs:
            beat(member_id, 0, topics=("t",))
        elif op == "hb" and member_id in epochs:
            beat(member_id, epochs[member_id])
        elif op == "leave" and member_id in epochs:
            hb(gc, member_id, -1, topics=None, now=now)
            owned.pop(member_id, None)
            revoking.pop(member_id, None)
            epochs.pop(member_id)
        else:
            gc.poll(now)
            group = gc.groups.get("cg")
            for gone in [m for m in epochs if group is None or m not in group.members]:
                owned.pop(gone, None)  # expired: the client would lose its partitions
                revoking.pop(gone, None)
                epochs.pop(gone)
        claimed = [(t, p) for a in owned.values() for t, ps in a.items() for p in ps]
        assert len(claimed) == len(set(claimed)), "a partition owned by two members"
    # Everyone keeps heartbeating: the group reaches its target assignment.
    for _ in range(4):
        for member_id in list(epochs):
            beat(member_id, epochs[member_id])
    if epochs:
        group = gc.groups["cg"]
        assert group.state_name == "Stable"
        claimed = sorted(
            (t, p)
            for m, a in owned.items()
            for t, ps in a.items()
            for p in ps
            if p not in revoking.get(m, {}).get(t, set())
        )
        assert claimed == [(T, p) for p in range(4)]
