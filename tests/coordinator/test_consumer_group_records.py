"""KIP-848 group state in __consumer_offsets: Kafka's record layouts, and replay after a restart."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.coordinator import records as rec
from odradek.coordinator.config import GroupCoordinatorConfig
from odradek.coordinator.consumer_group import ConsumerGroup
from odradek.coordinator.coordinator import GroupCoordinator
from odradek.protocol.errors import ErrorCode

T, U = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"t": (T, 4), "u": (U, 3)}
SESSION = 10_000


def test_key_and_value_layouts_match_kafka():
    key = rec.encode_consumer_group_key(rec.ConsumerGroupKey(rec.GROUP_EPOCH, "cg"))
    assert key == b"\x00\x03\x00\x02cg"
    member_key = rec.encode_consumer_group_key(
        rec.ConsumerGroupKey(rec.CURRENT_MEMBER_ASSIGNMENT, "cg", "m")
    )
    assert member_key == b"\x00\x08\x00\x02cg\x00\x01m"
    assert rec.decode_key(member_key) == rec.ConsumerGroupKey(
        rec.CURRENT_MEMBER_ASSIGNMENT, "cg", "m"
    )
    # Flexible value v0: int16 version, int32 epoch, empty tagged fields.
    assert rec.encode_group_epoch_value(7) == b"\x00\x00\x00\x00\x00\x07\x00"
    value = rec.encode_target_assignment_member_value({T: {2, 0}})
    # version, compact array (1 + 1), uuid, compact int32 array (2 + 1), 0, 2, tags, tags.
    assert value == (
        b"\x00\x00\x02"
        + T.bytes
        + b"\x03"
        + (0).to_bytes(4, "big")
        + (2).to_bytes(4, "big")
        + b"\x00\x00"
    )
    current = rec.ConsumerGroupCurrentMemberAssignmentValue(3, 2, 1, {T: {1}}, {U: {0}})
    assert (
        rec.decode_current_member_assignment_value(
            rec.encode_current_member_assignment_value(current)
        )
        == current
    )
    member = rec.ConsumerGroupMemberMetadataValue(
        "i", None, "c", "/h", ["t", "u"], "t.*", 300, "range"
    )
    assert rec.decode_member_metadata_value(rec.encode_member_metadata_value(member)) == member
    assert (
        rec.decode_partition_metadata_value(rec.encode_partition_metadata_value(TOPICS)) == TOPICS
    )


def hb(gc, member_id, epoch, now, owned=None, topics=("t",), instance=None, regex=None):
    return gc.consumer_group_heartbeat(
        "cg",
        member_id,
        epoch,
        instance,
        None,
        5_000 if epoch == 0 else -1,
        list(topics) if topics is not None else None,
        None,
        owned,
        "c",
        "/h",
        TOPICS,
        now,
        subscribed_topic_regex=regex,
    )


def replayed(gc: GroupCoordinator, log: list, now: int) -> GroupCoordinator:
    fresh = GroupCoordinator(gc.config)
    for key, value in log:
        fresh.load_record(key, value, now)
    return fresh


def view(group: ConsumerGroup | None):
    """What must survive a restart: epochs, members and what they hold, the target."""
    if group is None:
        return None
    members = {
        m.member_id: (
            m.member_epoch,
            m.previous_member_epoch,
            m.instance_id,
            sorted(m.subscribed_topic_names),
            m.subscribed_topic_regex,
            m.rebalance_timeout_ms,
            m.assigned,
            m.to_send,
        )
        for m in group.members.values()
    }
    return (
        group.group_epoch,
        group.assignment_epoch,
        group.subscribed_metadata,
        group.target,
        members,
        group.offsets,
    )


# One step of a member: join, heartbeat reporting what it was sent, leave, static leave, or silence.
steps = st.lists(
    st.tuples(
        st.sampled_from("abc"),
        st.sampled_from(["join", "ack", "ack", "leave", "static-leave", "expire"]),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(steps)
def test_replay_rebuilds_the_group_after_any_history(history):
    gc = GroupCoordinator(GroupCoordinatorConfig(group_consumer_session_timeout_ms=SESSION))
    log: list = []
    epochs: dict[str, int] = {}
    sent: dict[str, dict] = {}
    now = 0
    for name, action in history:
        now += 100
        instance = name if name == "c" else None  # c is a static member
        if action == "join" and name not in epochs:
            r = hb(
                gc, name, 0, now, instance=instance, topics=("t",) if name != "b" else ("t", "u")
            )
        elif action == "ack" and name in epochs:
            r = hb(
                gc, name, epochs[name], now, owned=sent.get(name), topics=None, instance=instance
            )
        elif action == "leave" and name in epochs:
            r = hb(gc, name, -1, now, topics=None, instance=instance)
        elif action == "static-leave" and name == "c" and name in epochs:
            r = hb(gc, name, -2, now, topics=None, instance=instance)
        elif action == "expire":
            now += SESSION
            gc.poll(now)
            log += [(r.key, r.value) for r in gc.drain_records()]
            epochs.clear()
            continue
        else:
            continue
        assert r.error == ErrorCode.none, r
        if r.member_epoch >= 0:
            epochs[name] = r.member_epoch
            if r.assignment is not None:
                sent[name] = r.assignment
        else:
            epochs.pop(name, None)
            sent.pop(name, None)
        log += [(rec_.key, rec_.value) for rec_ in gc.drain_records()]
    assert view(replayed(gc, log, now).groups.get("cg")) == view(gc.groups.get("cg"))


def test_members_keep_their_epochs_across_a_restart_and_tombstones_remove_the_group():
    gc = GroupCoordinator(GroupCoordinatorConfig(group_consumer_session_timeout_ms=SESSION))
    a = hb(gc, "a", 0, 1)
    b = hb(gc, "b", 0, 2)
    a2 = hb(gc, "a", a.member_epoch, 3, owned=a.assignment, topics=None)
    log = [(r.key, r.value) for r in gc.drain_records()]
    after = replayed(gc, log, 4)
    # The members carry on with the epochs they had; nothing is fenced.
    assert (
        hb(after, "a", a2.member_epoch, 5, owned=a2.assignment, topics=None).error == ErrorCode.none
    )
    assert hb(after, "b", b.member_epoch, 5, owned={}, topics=None).error == ErrorCode.none
    # Loaded members get a fresh session from the load.
    assert after.groups["cg"].members["a"].session_deadline_ms == 5 + SESSION
    for name, epoch in (("a", a2.member_epoch), ("b", b.member_epoch)):
        hb(gc, name, epoch, 6, topics=None)
    hb(gc, "a", -1, 7, topics=None)
    hb(gc, "b", -1, 7, topics=None)
    assert gc.delete_groups(["cg"], 8) == {"cg": ErrorCode.none}
    log += [(r.key, r.value) for r in gc.drain_records()]
    assert "cg" not in replayed(gc, log, 9).groups
    # The final records are tombstones of every key the group ever wrote.
    live = {}
    for key, value in log:
        live[key] = value
    assert all(v is None for k, v in live.items() if rec.decode_key(k).group == "cg")
