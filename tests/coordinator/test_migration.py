"""KIP-848 online migration in the core: classic group -> consumer group (with classic members) and back."""

from __future__ import annotations

import uuid

from odradek.coordinator import embedded_protocol as ep
from odradek.coordinator import records as rec
from odradek.coordinator.classic_group import ClassicGroup, GroupState
from odradek.coordinator.config import GroupCoordinatorConfig
from odradek.coordinator.consumer_group import ConsumerGroup
from odradek.coordinator.coordinator import GroupCoordinator
from odradek.protocol.errors import ErrorCode

from .test_classic_group import Slot

T = uuid.UUID(int=7)
TOPICS = {"t": (T, 4)}
SUBSCRIPTION = (
    b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
)  # v0: ["t"], no user data


def classic_join(gc, member_id="", now=0):
    slot = Slot()
    gc.join_group(
        "g",
        member_id,
        "i1",
        "c",
        "/h",
        "consumer",
        [("range", SUBSCRIPTION)],
        10_000,
        30_000,
        True,
        slot,
        now,
        topics=TOPICS,
    )
    return slot.result


def classic_sync(gc, member_id, generation, assignments=None, now=0):
    slot = Slot()
    gc.sync_group(
        "g",
        member_id,
        "i1",
        generation,
        "consumer",
        "range",
        assignments or {},
        slot,
        now,
        topics=TOPICS,
    )
    return slot.result


def replayed(gc: GroupCoordinator, log: list, now: int) -> GroupCoordinator:
    fresh = GroupCoordinator(gc.config)
    for key, value in log:
        fresh.load_record(key, value, now)
    return fresh


def test_embedded_protocol_round_trip():
    sub = ep.decode_subscription(SUBSCRIPTION)
    assert (sub.version, sub.topics, sub.owned) == (0, ["t"], {})
    assert ep.decode_assignment(ep.encode_assignment({"t": {3, 1}}, 1)) == {"t": {1, 3}}
    member = rec.ConsumerGroupMemberMetadataValue(
        None,
        None,
        "c",
        "/h",
        ["t"],
        None,
        300,
        None,
        rec.ClassicMemberMetadata(10_000, [("range", b"m")]),
    )
    assert rec.decode_member_metadata_value(rec.encode_member_metadata_value(member)) == member


def test_upgrade_then_downgrade():
    gc = GroupCoordinator(
        GroupCoordinatorConfig(
            group_initial_rebalance_delay_ms=0, group_consumer_session_timeout_ms=60_000
        )
    )
    joined = classic_join(gc)
    everything = ep.encode_assignment({"t": {0, 1, 2, 3}}, 0)
    assert (
        classic_sync(
            gc, joined.member_id, joined.generation_id, {joined.member_id: everything}
        ).error
        == 0
    )
    log = [(r.key, r.value) for r in gc.drain_records()]
    # A consumer-protocol member joins the live classic group: upgrade.
    new = gc.consumer_group_heartbeat(
        "g", "m", 0, None, None, 30_000, ["t"], None, {}, "c", "/h", TOPICS, 1
    )
    group = gc.groups["g"]
    assert isinstance(group, ConsumerGroup) and new.error == ErrorCode.none
    old = group.members[joined.member_id]
    assert old.member_epoch == joined.generation_id and old.assigned == {T: {0, 1, 2, 3}}
    assert new.assignment == {}  # everything is still the classic member's
    # The classic member is told to rejoin, revokes (eagerly) and gets its share.
    assert (
        gc.heartbeat("g", joined.member_id, "i1", joined.generation_id, 2)
        == ErrorCode.rebalance_in_progress
    )
    rejoined = classic_join(gc, joined.member_id, now=3)
    assert rejoined.error == ErrorCode.none and rejoined.generation_id == group.group_epoch
    mine = ep.decode_assignment(
        classic_sync(gc, joined.member_id, rejoined.generation_id, now=3).assignment
    )
    assert len(mine["t"]) == 2
    assert gc.heartbeat("g", joined.member_id, "i1", rejoined.generation_id, 4) == ErrorCode.none
    rest = gc.consumer_group_heartbeat(
        "g", "m", new.member_epoch, None, None, -1, None, None, None, "c", "/h", TOPICS, 5
    )
    assert rest.assignment == {T: {0, 1, 2, 3} - mine["t"]}
    log += [(r.key, r.value) for r in gc.drain_records()]
    loaded = replayed(gc, log, 6).groups["g"]
    assert isinstance(loaded, ConsumerGroup)
    assert loaded.members[joined.member_id].classic == group.members[joined.member_id].classic
    assert loaded.members[joined.member_id].assigned == group.members[joined.member_id].assigned
    # The consumer-protocol member leaves: downgrade, and the classic member rebalances alone.
    gc.consumer_group_heartbeat(
        "g", "m", -1, None, None, -1, None, None, None, "c", "/h", TOPICS, 7
    )
    classic = gc.groups["g"]
    assert isinstance(classic, ClassicGroup) and classic.state is GroupState.PREPARING_REBALANCE
    assert classic.generation_id == group.group_epoch and set(classic.members) == {joined.member_id}
    log += [(r.key, r.value) for r in gc.drain_records()]
    assert isinstance(replayed(gc, log, 8).groups["g"], ClassicGroup)
