"""Partition.fetch_for_idle_follower is fetch_for_follower's short way, never a different one.

A leader's answer to a follower with nothing to read is most of a follower fetch (its
session holds every partition it follows, most of them idle), so the broker first tries
``fetch_for_idle_follower`` and falls back to ``fetch_for_follower`` when it declines. Two
leaders driven through the same hypothesis-chosen appends, fetches, clock moves, ISR
shrinks and controller answers, one fetching the broker's way and one always the long way,
must agree on everything a broker can observe after every step: high watermark, ISR,
maximal ISR, the proposal in flight (whose broker epochs come from the fetches) and when a
follower counts as lagging.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.replication.partition import FencedLeaderEpoch, NotLeaderOrFollower, Partition
from odradek.replication.partition_state import PartitionState
from odradek.storage import LogConfig

from .memory_log import MemoryLog

LAG = 1_000
T0 = 1_000_000
ALL = (0, 1, 2)


def leader(isr: tuple[int, ...] = ALL) -> Partition:
    return Partition(
        MemoryLog(LogConfig(min_insync_replicas=2)), 0, PartitionState(0, 0, isr, ALL, 0), T0, LAG
    )


def broker_fetch(p: Partition, replica: int, offset: int, now: int, epoch: int) -> None:
    """What the broker's fetch handler does for one partition of a follower's fetch."""
    if not p.fetch_for_idle_follower(replica, offset, p.leader_epoch, now, epoch):
        p.fetch_for_follower(replica, offset, p.leader_epoch, 1 << 20, now, epoch)


def observed(p: Partition) -> tuple:
    return (p.high_watermark, p.isr, p.maximal_isr, p.alter_partition_in_flight)


steps = st.lists(
    st.one_of(
        st.tuples(st.just("produce"), st.integers(1, 3), st.just(0)),
        # Where the follower fetches from, relative to the leader's log end offset.
        st.tuples(st.just("fetch"), st.sampled_from((1, 2)), st.integers(-3, 0)),
        st.tuples(st.just("tick"), st.integers(0, LAG), st.just(0)),
        st.tuples(st.just("shrink"), st.just(0), st.just(0)),
        st.tuples(st.just("commit"), st.just(0), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(steps, st.sampled_from(((0, 1, 2), (0, 1))))
def test_the_short_way_changes_what_the_long_way_would(schedule, isr) -> None:
    short, long = leader(isr), leader(isr)
    now = T0
    for n, (kind, a, b) in enumerate(schedule):
        if kind == "produce":
            for p in (short, long):
                p.append_records_to_leader((7,) * a, 1, now)
        elif kind == "fetch":
            offset = max(short.log_end_offset + b, 0)
            broker_fetch(short, a, offset, now, epoch=n)
            long.fetch_for_follower(a, offset, long.leader_epoch, 1 << 20, now, n)
        elif kind == "tick":
            now += a
        elif kind == "shrink":
            assert short.maybe_shrink_isr(now) == long.maybe_shrink_isr(now)
        else:  # the controller commits the proposal in flight, if any
            proposal = short.alter_partition_in_flight
            if proposal is not None:
                state = PartitionState(0, 0, proposal.new_isr, ALL, short.partition_epoch + 1)
                for p in (short, long):
                    p.on_alter_partition_response(proposal, state, now)
        assert observed(short) == observed(long), (n, kind, a, b)


def test_an_idle_caught_up_follower_takes_the_short_way() -> None:
    p = leader()
    p.append_records_to_leader((7, 7), 1, T0)
    assert not p.fetch_for_idle_follower(1, 0, 0, T0)  # behind: there is something to read
    p.fetch_for_follower(1, 2, 0, 1 << 20, T0)
    assert p.fetch_for_idle_follower(1, 2, 0, T0 + 10)
    p.append_records_to_leader((7,), 1, T0 + 20)
    assert not p.fetch_for_idle_follower(1, 2, 0, T0 + 30)  # the leader has more now


def test_a_caught_up_follower_outside_the_isr_takes_the_long_way() -> None:
    p = leader(isr=(0, 1))
    p.fetch_for_follower(2, 0, 0, 1 << 20, T0)  # caught up: its addition is proposed
    assert (p.isr, p.maximal_isr) == ({0, 1}, {0, 1, 2})
    assert not p.fetch_for_idle_follower(2, 0, 0, T0)  # not in the ISR until committed


def test_an_offline_log_takes_the_long_way_to_its_storage_error() -> None:
    p = leader()
    p.fetch_for_follower(1, 0, 0, 1 << 20, T0)
    p.log.offline = True
    assert not p.fetch_for_idle_follower(1, 0, 0, T0)


def test_the_short_way_refuses_what_the_long_way_refuses() -> None:
    p = leader()
    p.apply_state(PartitionState(0, 1, ALL, ALL, 1), T0)
    with pytest.raises(FencedLeaderEpoch):
        p.fetch_for_idle_follower(1, 0, 0, T0)
    with pytest.raises(NotLeaderOrFollower):
        p.fetch_for_idle_follower(7, 0, 1, T0)  # not a replica
    p.apply_state(PartitionState(1, 2, ALL, ALL, 2), T0)
    with pytest.raises(NotLeaderOrFollower):
        p.fetch_for_idle_follower(2, 0, 2, T0)  # a follower now
