"""The classic group state machine, driven by method calls and an explicit clock."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.coordinator.classic_group import GroupState, JoinResult, SyncResult
from odradek.coordinator.config import GroupCoordinatorConfig
from odradek.coordinator.coordinator import GroupCoordinator
from odradek.coordinator.offset_metadata import OffsetCommit
from odradek.protocol.errors import ErrorCode

SESSION = 10_000
REBALANCE = 30_000
PROTOCOLS = [("range", b"r-meta"), ("roundrobin", b"rr-meta")]


def coordinator(delay: int = 0) -> GroupCoordinator:
    return GroupCoordinator(GroupCoordinatorConfig(group_initial_rebalance_delay_ms=delay))


class Slot:
    """Receives the result a callback delivers."""

    def __init__(self) -> None:
        self.results: list = []

    def __call__(self, result) -> None:
        self.results.append(result)

    @property
    def result(self):
        assert len(self.results) == 1, self.results
        return self.results[0]


def join(
    gc,
    member_id="",
    instance=None,
    now=0,
    protocols=PROTOCOLS,
    group="g",
    session=SESSION,
    known=True,
):
    slot = Slot()
    gc.join_group(
        group,
        member_id,
        instance,
        "client",
        "/127.0.0.1",
        "consumer",
        protocols,
        session,
        REBALANCE,
        known,
        slot,
        now,
    )
    return slot


def sync(gc, member_id, generation, assignments=None, instance=None, now=0, group="g"):
    slot = Slot()
    gc.sync_group(
        group, member_id, instance, generation, "consumer", None, assignments or {}, slot, now
    )
    return slot


def join_new_member(gc, now=0, **kw) -> Slot:
    """KIP-394: the first join gets MEMBER_ID_REQUIRED and the id to use."""
    first = join(gc, now=now, **kw)
    assert first.result.error == ErrorCode.member_id_required
    return join(gc, member_id=first.result.member_id, now=now, **kw)


def test_member_id_required_then_single_member_group_becomes_stable():
    gc = coordinator()
    slot = join_new_member(gc)
    r: JoinResult = slot.result
    assert r.error == ErrorCode.none and r.generation_id == 1 and r.leader == r.member_id
    assert r.protocol_name == "range" and r.members == [(r.member_id, None, b"r-meta")]
    assert gc.groups["g"].state is GroupState.COMPLETING_REBALANCE
    s = sync(gc, r.member_id, 1, {r.member_id: b"assignment"})
    assert s.result == SyncResult(ErrorCode.none, b"assignment", "consumer", "range")
    assert gc.groups["g"].state is GroupState.STABLE
    assert gc.heartbeat("g", r.member_id, None, 1, 1) == ErrorCode.none


def test_second_member_triggers_rebalance_and_both_get_assignments():
    gc = coordinator()
    a = join_new_member(gc).result
    sync(gc, a.member_id, 1, {a.member_id: b"A"})
    b_slot = join_new_member(gc, now=10)
    assert b_slot.results == []  # waits for the leader to rejoin
    assert gc.heartbeat("g", a.member_id, None, 1, 20) == ErrorCode.rebalance_in_progress
    a_slot = join(gc, member_id=a.member_id, now=30)
    a2, b = a_slot.result, b_slot.result
    assert a2.generation_id == b.generation_id == 2
    assert a2.leader == a.member_id and len(a2.members) == 2 and b.members == []
    b_sync = sync(gc, b.member_id, 2, now=40)
    assert b_sync.results == []
    sync(gc, a.member_id, 2, {a.member_id: b"A2", b.member_id: b"B2"}, now=50)
    assert b_sync.result.assignment == b"B2"


def test_protocol_selection_uses_common_protocols_and_votes():
    gc = coordinator()
    a = join_new_member(gc, protocols=[("roundrobin", b"1"), ("range", b"2")])
    sync(gc, a.result.member_id, 1, {})
    b = join_new_member(gc, protocols=[("range", b"3")])
    join(gc, member_id=a.result.member_id, protocols=[("roundrobin", b"1"), ("range", b"2")])
    assert b.result.protocol_name == "range"
    bad = join(gc, protocols=[("sticky", b"")])
    assert bad.result.error == ErrorCode.inconsistent_group_protocol


def test_session_timeout_expires_member_and_rebalances_remaining():
    gc = coordinator()
    a = join_new_member(gc).result
    sync(gc, a.member_id, 1, {})
    b_slot = join_new_member(gc, now=0)
    join(gc, member_id=a.member_id, now=0)
    b = b_slot.result
    sync(gc, b.member_id, 2, now=0)
    sync(gc, a.member_id, 2, {a.member_id: b"x", b.member_id: b"y"}, now=0)
    # a keeps heartbeating, b goes silent.
    assert gc.heartbeat("g", a.member_id, None, 2, SESSION - 1) == ErrorCode.none
    assert gc.next_deadline_ms() == SESSION
    gc.poll(SESSION)
    group = gc.groups["g"]
    assert b.member_id not in group.members
    assert group.state is GroupState.PREPARING_REBALANCE
    a_slot2 = join(gc, member_id=a.member_id, now=SESSION + 1)
    assert a_slot2.result.generation_id == 3 and [m[0] for m in a_slot2.result.members] == [
        a.member_id
    ]


def test_rebalance_timeout_drops_members_that_do_not_rejoin():
    gc = coordinator()
    a = join_new_member(gc).result
    sync(gc, a.member_id, 1, {})
    b_slot = join_new_member(gc, now=0)
    assert b_slot.results == []
    gc.heartbeat("g", a.member_id, None, 1, 5_000)
    gc.poll(REBALANCE)  # a (max.poll.interval exceeded) never rejoined
    assert b_slot.result.generation_id == 2 and b_slot.result.leader == b_slot.result.member_id
    assert a.member_id not in gc.groups["g"].members
    assert gc.heartbeat("g", a.member_id, None, 1, REBALANCE) == ErrorCode.unknown_member_id


def test_initial_rebalance_delay_waits_for_more_members():
    gc = coordinator(delay=3_000)
    a = join_new_member(gc, now=0)
    b = join_new_member(gc, now=1_000)
    assert a.results == [] and b.results == []
    assert gc.next_deadline_ms() == 4_000
    gc.poll(3_999)
    assert a.results == []
    gc.poll(4_000)
    assert a.result.generation_id == b.result.generation_id == 1
    assert len(a.result.members) + len(b.result.members) == 2


def test_leave_group_batched_and_unknown_members():
    gc = coordinator()
    a = join_new_member(gc).result
    sync(gc, a.member_id, 1, {})
    err, errors = gc.leave_group("g", [(a.member_id, None), ("nobody", None)], 1)
    assert err == ErrorCode.none and errors == [ErrorCode.none, ErrorCode.unknown_member_id]
    assert gc.groups["g"].state is GroupState.EMPTY
    assert gc.groups["g"].generation_id == 2


def test_static_member_rejoins_without_rebalance_and_fences_old_id():
    gc = coordinator()
    a = join(gc, instance="i-1").result  # static members need no KIP-394 round trip
    assert a.error == ErrorCode.none
    sync(gc, a.member_id, 1, {a.member_id: b"mine"})
    b = join_new_member(gc, now=1)
    join(gc, member_id=a.member_id, instance="i-1", now=1)
    sync(gc, b.result.member_id, 2, now=1)
    sync(gc, a.member_id, 2, {a.member_id: b"A", b.result.member_id: b"B"}, instance="i-1", now=1)
    # b (not leader) restarts with the same instance id? use a static non-leader instead:
    c = join(gc, instance="i-2", now=2)
    join(gc, member_id=a.member_id, instance="i-1", now=2)
    join(gc, member_id=b.result.member_id, now=2)
    gen = c.result.generation_id
    sync(
        gc,
        a.member_id,
        gen,
        {a.member_id: b"A", b.result.member_id: b"B", c.result.member_id: b"C"},
        instance="i-1",
        now=2,
    )
    assert gc.groups["g"].state is GroupState.STABLE
    restarted = join(gc, instance="i-2", now=3).result
    assert restarted.error == ErrorCode.none and restarted.generation_id == gen
    assert restarted.member_id != c.result.member_id
    assert gc.groups["g"].state is GroupState.STABLE  # no rebalance
    assert sync(gc, restarted.member_id, gen, instance="i-2", now=3).result.assignment == b"C"
    # The zombie with the old member id is fenced.
    assert gc.heartbeat("g", c.result.member_id, "i-2", gen, 4) == ErrorCode.fenced_instance_id
    assert (
        join(gc, member_id=c.result.member_id, instance="i-2", now=4).result.error
        == ErrorCode.fenced_instance_id
    )


def test_static_member_restart_with_new_metadata_but_same_protocol_does_not_rebalance():
    """A consumer's subscription metadata names the partitions it owns: the restarted instance
    owns none, its old self did. As in Kafka only a change of the selected protocol rebalances."""
    gc = coordinator()
    owned = [("range", b"owns 0-5"), ("roundrobin", b"owns 0-5")]
    a = join(gc, instance="i-1", protocols=owned).result
    sync(gc, a.member_id, 1, {a.member_id: b"A"})
    b = join(gc, now=1, instance="i-2")
    join(gc, member_id=a.member_id, instance="i-1", now=1, protocols=owned)
    gen = b.result.generation_id
    sync(gc, a.member_id, gen, {a.member_id: b"A", b.result.member_id: b"B"}, instance="i-1", now=1)
    sync(gc, b.result.member_id, gen, instance="i-2", now=1)
    assert gc.groups["g"].state is GroupState.STABLE
    fresh = [("range", b"owns nothing"), ("roundrobin", b"owns nothing")]
    restarted = join(gc, instance="i-1", now=2, protocols=fresh).result
    assert (restarted.error, restarted.generation_id) == (ErrorCode.none, gen)
    assert gc.groups["g"].state is GroupState.STABLE
    assert gc.heartbeat("g", b.result.member_id, "i-2", gen, 3) == ErrorCode.none
    # Dropping the group's protocol does rebalance.
    only_rr = [("roundrobin", b"owns nothing")]
    join(gc, instance="i-1", now=4, protocols=only_rr)
    assert gc.groups["g"].state is GroupState.PREPARING_REBALANCE


def test_sync_and_heartbeat_errors():
    gc = coordinator()
    a = join_new_member(gc).result
    assert sync(gc, a.member_id, 7).result.error == ErrorCode.illegal_generation
    assert sync(gc, "ghost", 1).result.error == ErrorCode.unknown_member_id
    assert gc.heartbeat("nogroup", "x", None, 1, 0) == ErrorCode.unknown_member_id
    assert join(gc, session=100).result.error == ErrorCode.invalid_session_timeout


def test_offsets_commit_fetch_and_generation_checks():
    gc = coordinator()

    # Simple consumer: no generation, creates the group.
    err, errs = gc.commit_offsets(
        "simple", "", None, -1, [OffsetCommit("t", 0, 42, 3, "meta")], 100
    )
    assert err == ErrorCode.none and errs == [ErrorCode.none]
    got = gc.fetch_offsets("simple", [("t", 0), ("t", 1)])
    assert (
        got[("t", 0)].offset == 42
        and got[("t", 0)].metadata == "meta"
        and got[("t", 0)].leader_epoch == 3
    )
    assert got[("t", 1)] is None
    a = join_new_member(gc).result
    assert (
        gc.commit_offsets("g", a.member_id, None, 1, [OffsetCommit("t", 0, 1)], 0)[0]
        == ErrorCode.rebalance_in_progress
    )
    sync(gc, a.member_id, 1, {})
    assert (
        gc.commit_offsets("g", "ghost", None, 1, [OffsetCommit("t", 0, 1)], 0)[0]
        == ErrorCode.unknown_member_id
    )
    assert (
        gc.commit_offsets("g", a.member_id, None, 9, [OffsetCommit("t", 0, 1)], 0)[0]
        == ErrorCode.illegal_generation
    )
    err, errs = gc.commit_offsets(
        "g",
        a.member_id,
        None,
        1,
        [OffsetCommit("t", 0, 5), OffsetCommit("t", 1, 6, metadata="x" * 5000)],
        0,
    )
    assert errs == [ErrorCode.none, ErrorCode.offset_metadata_too_large]
    assert gc.fetch_offsets("g", None) == {("t", 0): gc.groups["g"].offsets[("t", 0)]}


def test_commit_during_rebalance_checks_member_and_generation_first():
    """As Kafka's ClassicGroup.validateOffsetCommit: while the group completes a rebalance, an
    unknown member or a stale generation is told so (it must rejoin); only a valid member of the
    current generation hears REBALANCE_IN_PROGRESS."""
    gc = coordinator()
    a = join_new_member(gc).result
    assert gc.groups["g"].state is GroupState.COMPLETING_REBALANCE

    def commit(member_id: str, generation: int, instance: str | None = None) -> int:
        return gc.commit_offsets(
            "g", member_id, instance, generation, [OffsetCommit("t", 0, 1)], 0
        )[0]

    assert commit("ghost", a.generation_id) == ErrorCode.unknown_member_id
    assert commit(a.member_id, a.generation_id - 1) == ErrorCode.illegal_generation
    assert commit("", -1) == ErrorCode.unknown_member_id
    assert commit(a.member_id, a.generation_id, instance="unknown") == ErrorCode.unknown_member_id
    assert commit(a.member_id, a.generation_id) == ErrorCode.rebalance_in_progress
    assert gc.fetch_offsets("g", [("t", 0)]) == {("t", 0): None}


def test_offset_retention_and_group_deletion():
    gc = GroupCoordinator(
        GroupCoordinatorConfig(offsets_retention_minutes=1, group_initial_rebalance_delay_ms=0)
    )

    gc.commit_offsets("s", "", None, -1, [OffsetCommit("t", 0, 1)], 0)
    gc.drain_records()
    assert gc.expire_offsets(59_999) == 0
    assert gc.expire_offsets(60_000) == 1
    assert "s" not in gc.groups
    records = gc.drain_records()
    assert [r.value for r in records] == [None, None]  # offset tombstone, then group tombstone
    gc.commit_offsets("d", "", None, -1, [OffsetCommit("t", 0, 1)], 0)
    a = join_new_member(gc, group="busy").result
    assert gc.delete_groups(["d", "busy", "nope"], 1) == {
        "d": ErrorCode.none,
        "busy": ErrorCode.non_empty_group,
        "nope": ErrorCode.group_id_not_found,
    }
    assert a.member_id in gc.groups["busy"].members


def test_state_is_rebuilt_from_its_records():
    gc = coordinator()

    a = join_new_member(gc).result
    sync(gc, a.member_id, 1, {a.member_id: b"asg"})
    gc.commit_offsets("g", a.member_id, None, 1, [OffsetCommit("t", 0, 10, 1, "m")], 5)
    gc.commit_offsets("g", a.member_id, None, 1, [OffsetCommit("t", 0, 11, 1, "m2")], 6)
    gc.commit_offsets("other", "", None, -1, [OffsetCommit("u", 2, 3)], 7)
    gc.delete_offsets("other", [("u", 2)], 8)
    records = gc.drain_records()
    assert all(r.partition == gc.partition_for("g") for r in records if b"\x00\x01g" in r.key[:4])
    fresh = coordinator()
    for r in records:
        fresh.load_record(r.key, r.value, 100)
    g = fresh.groups["g"]
    assert g.state is GroupState.STABLE and g.generation_id == 1 and g.leader_id == a.member_id
    assert g.members[a.member_id].assignment == b"asg"
    assert g.offsets[("t", 0)].offset == 11 and g.offsets[("t", 0)].metadata == "m2"
    assert fresh.fetch_offsets("other", None) == {}
    # A member of the rebuilt group keeps working with its generation.
    assert fresh.heartbeat("g", a.member_id, None, 1, 101) == ErrorCode.none


ops = st.lists(
    st.tuples(
        st.sampled_from(["join", "rejoin", "sync", "heartbeat", "leave", "tick"]),
        st.integers(0, 4),
        st.integers(0, 20_000),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_random_schedules_keep_group_invariants(schedule):
    """Whatever members do, the group stays consistent and every waiting join is answered in time."""
    gc = coordinator(delay=0)
    now = 0
    known: list[str] = []
    gens: dict[str, int] = {}
    waiting: list[Slot] = []
    for op, who, dt in schedule:
        now += dt
        mid = known[who % len(known)] if known else ""
        if op == "join":
            slot = join(gc, now=now)
            if slot.results and slot.result.error == ErrorCode.member_id_required:
                known.append(slot.result.member_id)
                waiting.append(join(gc, member_id=slot.result.member_id, now=now))
        elif op == "rejoin" and mid:
            waiting.append(join(gc, member_id=mid, now=now))
        elif op == "sync" and mid:
            group = gc.groups.get("g")
            if group is not None:
                leader = group.leader_id
                sync(
                    gc,
                    mid,
                    gens.get(mid, 0),
                    {m: m.encode() for m in group.members} if mid == leader else {},
                    now=now,
                )
        elif op == "heartbeat" and mid:
            gc.heartbeat("g", mid, None, gens.get(mid, 0), now)
        elif op == "leave" and mid:
            gc.leave_group("g", [(mid, None)], now)
        else:
            gc.poll(now)
        for slot in waiting:
            for r in slot.results:
                if r.error == ErrorCode.none:
                    gens[r.member_id] = r.generation_id
        group = gc.groups.get("g")
        if group is None:
            continue
        assert group.state is not GroupState.DEAD
        assert (group.leader_id in group.members) if group.members else True
        if group.state is GroupState.EMPTY:
            assert not group.members
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            assert group.members and group.protocol_name in group.candidate_protocols()
            assert all(m.awaiting_join is None for m in group.members.values())
        if group.state is not GroupState.COMPLETING_REBALANCE:
            assert all(m.awaiting_sync is None for m in group.members.values())
        deadline = gc.next_deadline_ms()
        if group.state is GroupState.PREPARING_REBALANCE:
            assert deadline is not None and deadline <= now + REBALANCE
    # Drive time forward: every pending join is answered, none twice.
    gc.poll(now + REBALANCE + SESSION + 1)
    gc.poll(now + 2 * (REBALANCE + SESSION) + 2)
    for slot in waiting:
        assert len(slot.results) == 1, "a JoinGroup must be answered exactly once"
