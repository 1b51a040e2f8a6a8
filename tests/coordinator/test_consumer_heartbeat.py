"""ConsumerGroupHeartbeat as Kafka answers it: validation, static members, regex, rebalance timeout."""

from __future__ import annotations

import uuid

import pytest

from odradek.coordinator.config import GroupCoordinatorConfig
from odradek.coordinator.coordinator import GroupCoordinator
from odradek.coordinator.offset_metadata import OffsetCommit
from odradek.protocol.errors import ErrorCode

T, U, V = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)
TOPICS = {"orders": (T, 4), "orders-eu": (U, 2), "payments": (V, 2)}


def hb(
    gc,
    member_id,
    epoch=0,
    owned=None,
    topics=("orders",),
    now=0,
    instance=None,
    regex=None,
    rebalance=5_000,
    member_id_required=False,
    group="cg",
    metadata=TOPICS,
):
    return gc.consumer_group_heartbeat(
        group,
        member_id,
        epoch,
        instance,
        None,
        rebalance,
        list(topics) if topics is not None else None,
        None,
        owned,
        "c",
        "/h",
        metadata,
        now,
        subscribed_topic_regex=regex,
        member_id_required=member_id_required,
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"group": ""}, "GroupId can't be empty."),
        ({"instance": ""}, "InstanceId can't be empty."),
        ({"epoch": 3, "member_id": ""}, "MemberId can't be empty."),
        ({"member_id_required": True, "member_id": ""}, "MemberId can't be empty."),
        ({"rebalance": -1}, "RebalanceTimeoutMs must be provided in first request."),
        ({"owned": {T: {0}}}, "TopicPartitions must be empty when (re-)joining."),
        (
            {"topics": None},
            "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
        ),
        ({"epoch": -2}, "InstanceId can't be null."),
        ({"epoch": -3}, "MemberEpoch is invalid."),
    ],
)
def test_invalid_requests(kwargs, message):
    args = {"member_id": "m", **kwargs}
    r = hb(GroupCoordinator(), **args)
    assert (r.error, r.error_message) == (ErrorCode.invalid_request, message)


def test_unknown_group_member_and_epochs():
    gc = GroupCoordinator()
    assert hb(gc, "m", 1).error == ErrorCode.group_id_not_found
    a = hb(gc, "a")
    assert hb(gc, "ghost", 1, topics=None).error == ErrorCode.unknown_member_id
    assert hb(gc, "ghost", -1, topics=None).error == ErrorCode.unknown_member_id
    assert hb(gc, "a", a.member_epoch + 1, topics=None).error == ErrorCode.fenced_member_epoch
    # A bad regex is refused before anything changes.
    assert hb(gc, "b", regex="orders(").error == ErrorCode.invalid_regular_expression
    assert "b" not in gc.groups["cg"].members


def test_group_max_size():
    gc = GroupCoordinator(GroupCoordinatorConfig(group_consumer_max_size=1))
    hb(gc, "a")
    assert hb(gc, "b").error == ErrorCode.group_max_size_reached
    assert hb(gc, "a", 0).error == ErrorCode.none  # a member already in the group may rejoin


def test_static_member_leaves_with_minus_two_and_its_next_instance_takes_over():
    gc = GroupCoordinator()
    first = hb(gc, "m1", instance="i1")
    other = hb(gc, "m2", instance="i2", now=1)
    assert hb(gc, "m3", instance="i1", now=2).error == ErrorCode.unreleased_instance_id
    assert hb(gc, "m3", 5, instance="i1", topics=None, now=2).error == ErrorCode.fenced_instance_id
    held = gc.groups["cg"].target["m1"]
    left = hb(gc, "m1", -2, instance="i1", topics=None, now=3)
    assert (left.error, left.member_epoch) == (ErrorCode.none, -2)
    group_epoch = gc.groups["cg"].group_epoch
    # The instance keeps its place (and partitions) until it comes back: no rebalance.
    assert gc.groups["cg"].target["m1"] == held
    back = hb(gc, "m4", instance="i1", now=4, owned={})
    assert back.error == ErrorCode.none and "m1" not in gc.groups["cg"].members
    assert back.assignment == held and gc.groups["cg"].group_epoch == group_epoch
    assert back.member_epoch == group_epoch
    assert other.error == first.error == ErrorCode.none


def test_static_member_gone_for_good_with_minus_one():
    gc = GroupCoordinator()
    hb(gc, "m1", instance="i1")
    assert hb(gc, "m1", -1, instance="i1", topics=None).member_epoch == -1
    assert gc.groups["cg"].members == {}


def test_regex_subscription_follows_new_topics():
    gc = GroupCoordinator()
    a = hb(gc, "a", topics=(), regex="orders.*")
    assert a.assignment == {T: {0, 1, 2, 3}, U: {0, 1}}
    assert gc.groups["cg"].members["a"].subscribed_topics() == {"orders", "orders-eu"}
    # A new matching topic bumps the group epoch and is assigned.
    more = dict(TOPICS, **{"orders-us": (uuid.UUID(int=9), 1)})
    r = hb(gc, "a", a.member_epoch, owned=a.assignment, topics=None, metadata=more)
    assert r.member_epoch == a.member_epoch + 1 and r.assignment[uuid.UUID(int=9)] == {0}


def test_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced():
    gc = GroupCoordinator(GroupCoordinatorConfig(group_consumer_session_timeout_ms=60_000))
    a = hb(gc, "a", rebalance=1_000)
    b = hb(gc, "b", now=10)
    # a is asked to revoke on its next heartbeat and then says nothing about it.
    r = hb(gc, "a", a.member_epoch, topics=None, now=20, rebalance=-1)
    assert len(r.assignment[T]) == 2
    assert gc.next_deadline_ms() == 20 + 1_000
    gc.poll(1_019)
    assert "a" in gc.groups["cg"].members
    gc.poll(1_020)
    assert "a" not in gc.groups["cg"].members
    # b now gets every partition.
    done = hb(gc, "b", b.member_epoch, owned={}, topics=None, now=1_021)
    assert done.assignment == {T: {0, 1, 2, 3}}
    assert hb(gc, "a", r.member_epoch, topics=None, now=1_022).error == ErrorCode.unknown_member_id


def test_revoking_in_time_clears_the_rebalance_timeout():
    gc = GroupCoordinator(GroupCoordinatorConfig(group_consumer_session_timeout_ms=60_000))
    a = hb(gc, "a", rebalance=1_000)
    hb(gc, "b", now=10)
    r = hb(gc, "a", a.member_epoch, topics=None, now=20)
    hb(gc, "a", a.member_epoch, owned=r.assignment, topics=None, now=30)
    assert gc.groups["cg"].members["a"].revocation_deadline_ms is None
    gc.poll(5_000)
    assert "a" in gc.groups["cg"].members


def test_offset_fetch_names_a_current_member_or_none():
    gc = GroupCoordinator()
    a = hb(gc, "a")
    assert gc.check_offset_fetch("cg", "a", a.member_epoch) == ErrorCode.none
    assert gc.check_offset_fetch("cg", None, -1) == ErrorCode.none  # an admin client
    assert gc.check_offset_fetch("cg", "a", a.member_epoch - 1) == ErrorCode.stale_member_epoch
    assert gc.check_offset_fetch("cg", "x", 1) == ErrorCode.unknown_member_id
    assert gc.check_offset_fetch("classic-or-unknown", "x", 1) == ErrorCode.none


def test_restore_puts_groups_back_as_snapshotted():
    gc = GroupCoordinator()
    a = hb(gc, "a")
    gc.commit_offsets("cg", "a", None, a.member_epoch, [OffsetCommit("orders", 0, 5)], 1)
    gc.drain_records()
    snap = gc.snapshot(["cg", "new"])
    gc.commit_offsets("cg", "a", None, a.member_epoch, [OffsetCommit("orders", 0, 9)], 2)
    hb(gc, "b", now=2)
    hb(gc, "n", group="new", now=2)
    gc.restore(snap)
    assert gc.fetch_offsets("cg", [("orders", 0)])[("orders", 0)].offset == 5
    assert set(gc.groups["cg"].members) == {"a"} and "new" not in gc.groups
    assert gc.drain_records() == []


def test_the_assignor_most_members_ask_for_is_used():
    gc = GroupCoordinator()
    gc.consumer_group_heartbeat(
        "cg", "a", 0, None, None, 5_000, ["orders"], "range", None, "c", "/h", TOPICS, 0
    )
    assert gc.groups["cg"].preferred_assignor() == "range"
    for m in ("b", "c"):
        gc.consumer_group_heartbeat(
            "cg", m, 0, None, None, 5_000, ["orders"], "uniform", None, "c", "/h", TOPICS, 1
        )
    assert gc.groups["cg"].preferred_assignor() == "uniform"
