"""One test per replication rule of the Partition state machine (Kafka's semantics)."""

from __future__ import annotations

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.replication.partition import (
    EpochQuery,
    FetchPosition,
    NotEnoughReplicas,
    NotLeaderOrFollower,
    Partition,
)
from odradek.replication.partition_state import AlterPartition, PartitionState
from odradek.storage import LogConfig

from .memory_log import MemoryLog

LAG = 1_000
T0 = 1_000_000
ALL = (0, 1, 2)


def leader(isr: tuple[int, ...] = ALL, *, epoch: int = 0, min_isr: int = 2) -> Partition:
    log = MemoryLog(LogConfig(min_insync_replicas=min_isr))
    return Partition(log, 0, PartitionState(0, epoch, isr, ALL, 0), T0, LAG)


def follower(node: int = 1, *, epoch: int = 0, leader_id: int = 0) -> Partition:
    log = MemoryLog(LogConfig(min_insync_replicas=2))
    return Partition(log, node, PartitionState(leader_id, epoch, ALL, ALL, 0), T0, LAG)


def produce(p: Partition, n: int = 1, acks: int = 1, now: int = T0) -> None:
    for _ in range(n):
        p.append_records_to_leader((7,), acks, now)


def fetch(p: Partition, replica: int, offset: int, now: int = T0) -> tuple:
    return p.fetch_for_follower(replica, offset, p.leader_epoch, 10, now)


# -- high watermark ------------------------------------------------------------------------


def test_high_watermark_is_the_smallest_isr_log_end_offset_and_never_moves_back() -> None:
    p = leader()
    produce(p, 3)
    assert p.high_watermark == 0  # followers' positions unknown: nothing is committed
    fetch(p, 1, 3)
    assert p.high_watermark == 0
    fetch(p, 2, 1)
    assert p.high_watermark == 1
    fetch(p, 2, 3)
    assert p.high_watermark == 3
    fetch(p, 1, 2)  # a follower that went back (restarted, truncated) does not pull it back
    assert p.high_watermark == 3


def test_high_watermark_waits_for_a_caught_up_follower_outside_the_isr() -> None:
    """Kafka's shouldWaitForReplicaToJoinIsr: a replica about to join holds the HW back,
    so it can reach the HW and join instead of chasing it for ever."""
    p = leader(isr=(0, 1))
    produce(p, 2)
    fetch(p, 2, 2)
    fetch(p, 1, 2)
    assert p.high_watermark == 2
    produce(p, 2)
    fetch(p, 1, 4)
    assert p.high_watermark == 2  # 2 is caught up (recently at the LEO): the HW waits for it
    fetch(p, 2, 4, now=T0 + LAG + 1)
    assert p.high_watermark == 4


def test_under_min_insync_replicas_acks_all_is_refused_and_the_high_watermark_stays() -> None:
    p = leader(isr=(0,))
    with pytest.raises(NotEnoughReplicas):
        produce(p, acks=-1)
    assert p.log_end_offset == 0  # refused before the append
    produce(p, acks=1)
    assert (p.log_end_offset, p.high_watermark) == (1, 0)  # Kafka 4: no HW under min ISR


def test_single_replica_partition_commits_on_append() -> None:
    log = MemoryLog(LogConfig())
    p = Partition(log, 5, PartitionState(5, 0, (5,), (5,), 0), T0)
    produce(p, 3)
    assert p.high_watermark == 3
    assert p.check_enough_replicas_reach_offset(3, 0) == (True, ErrorCode.none)


# -- ISR shrink and expand ---------------------------------------------------------------------


def test_isr_shrinks_after_replica_lag_time_max_ms_through_a_committed_proposal() -> None:
    p = leader()
    produce(p, 2)
    fetch(p, 1, 2)
    fetch(p, 2, 0)
    assert p.maybe_shrink_isr(T0 + LAG) is None  # exactly replica.lag.time.max.ms: still in
    produce(p, 1, now=T0 + LAG)
    fetch(p, 1, 3, now=T0 + LAG)
    proposal = p.maybe_shrink_isr(T0 + LAG + 1)
    assert proposal == AlterPartition(0, 0, 0, (0, 1), (-1, -1))
    assert p.alter_partition_in_flight == proposal
    assert p.maybe_shrink_isr(T0 + LAG + 2) is None  # one proposal at a time
    # Until the controller answers, 2 still counts (maximal ISR): the HW stays at its LEO.
    assert p.isr == {0, 1, 2} and p.maximal_isr == {0, 1, 2}
    assert p.high_watermark == 0
    committed = PartitionState(0, 0, (0, 1), ALL, 1)
    assert p.on_alter_partition_response(proposal, committed, T0 + LAG + 2)
    assert (p.isr, p.partition_epoch, p.high_watermark) == ({0, 1}, 1, 3)
    assert p.alter_partition_in_flight is None


def test_a_follower_behind_but_reaching_each_earlier_leader_end_stays_in_the_isr() -> None:
    """Kafka's lastCaughtUpTime: a follower that reached the leader end offset of its
    previous fetch was caught up at that fetch, so a steady stream does not evict it."""
    p = leader()
    now = T0
    fetch(p, 2, 0, now)
    for _ in range(10):
        now += LAG // 2
        produce(p, 1, now=now)
        fetch(p, 1, p.log_end_offset, now)
        fetch(p, 2, p.log_end_offset - 1, now)  # one behind, each time past the last end
    assert p.maybe_shrink_isr(now + 1) is None


def test_isr_expansion_waits_for_the_follower_to_reach_the_high_watermark() -> None:
    p = leader(isr=(0, 1), min_isr=1)
    produce(p, 4)
    fetch(p, 1, 4)
    assert p.high_watermark == 4
    fetch(p, 2, 2)
    assert p.alter_partition_in_flight is None
    fetch(p, 2, 4)
    assert p.alter_partition_in_flight == AlterPartition(0, 0, 0, (0, 1, 2), (-1, -1, -1))
    assert p.isr == {0, 1} and p.maximal_isr == {0, 1, 2}  # the HW counts it already
    produce(p, 1)
    fetch(p, 1, 5)
    assert p.high_watermark == 4


def test_isr_expansion_waits_for_the_leader_epoch_start_offset() -> None:
    """A follower must have reached the offset where this leader's epoch began, so its
    log was truncated against this leader, not merely long enough."""
    log = MemoryLog(LogConfig(min_insync_replicas=1))
    log.append((1, 2, 3), leader_epoch=0, now_ms=T0)  # written in an earlier epoch
    p = Partition(log, 0, PartitionState(0, 1, (0, 1), ALL, 4), T0, LAG)
    assert (p.leader_epoch_start_offset, p.high_watermark) == (3, 0)
    fetch(p, 2, 2)  # at or above the high watermark (0), below the epoch start
    assert p.alter_partition_in_flight is None
    fetch(p, 2, 3)
    assert p.alter_partition_in_flight == AlterPartition(0, 1, 4, (0, 1, 2), (-1, -1, -1))


def test_a_proposal_names_each_members_broker_epoch_from_its_fetches() -> None:
    """KIP-903: the controller can then refuse a member that registered again since."""
    p = leader(isr=(0, 1), min_isr=1)
    produce(p, 1)
    p.fetch_for_follower(1, 1, 0, 10, T0, replica_epoch=41)
    p.fetch_for_follower(2, 1, 0, 10, T0, replica_epoch=57)
    proposal = p.alter_partition_in_flight
    assert proposal is not None
    assert (proposal.new_isr, proposal.broker_epochs) == ((0, 1, 2), (-1, 41, 57))


def test_refused_proposals_revert_only_when_the_controller_says_nothing_was_done() -> None:
    p = leader(isr=(0, 1), min_isr=1)
    produce(p, 1)
    fetch(p, 1, 1)
    fetch(p, 2, 1)
    proposal = p.alter_partition_in_flight
    assert proposal is not None
    # INVALID_UPDATE_VERSION: a retry may have been committed; stay at the maximal ISR.
    p.on_alter_partition_response(proposal, ErrorCode.invalid_update_version, T0)
    assert p.alter_partition_in_flight == proposal and p.maximal_isr == {0, 1, 2}
    # The metadata brings the committed state (same leader epoch, newer partition epoch).
    assert p.apply_state(PartitionState(0, 0, ALL, ALL, 1), T0)
    assert p.alter_partition_in_flight is None and p.isr == {0, 1, 2}
    # OPERATION_NOT_ATTEMPTED: nothing was written, back to the committed ISR.
    produce(p, 1, now=T0 + 3 * LAG)
    fetch(p, 2, 2, now=T0 + 3 * LAG)
    shrink = p.maybe_shrink_isr(T0 + 3 * LAG)
    assert shrink is not None and shrink.new_isr == (0, 2)
    p.on_alter_partition_response(shrink, ErrorCode.operation_not_attempted, T0)
    assert p.alter_partition_in_flight is None and p.isr == {0, 1, 2}


def test_a_late_answer_to_an_older_proposal_is_ignored() -> None:
    p = leader(isr=(0, 1), min_isr=1)
    stale = AlterPartition(0, 0, 0, (0,))
    assert not p.on_alter_partition_response(stale, PartitionState(0, 0, (0,), ALL, 1), T0)
    assert p.isr == {0, 1} and p.partition_epoch == 0


# -- acks=all --------------------------------------------------------------------------------


def test_acks_all_completes_when_the_high_watermark_passes_the_batch() -> None:
    p = leader()
    produce(p, 2, acks=-1)
    assert p.check_enough_replicas_reach_offset(2, 0) == (False, ErrorCode.none)
    fetch(p, 1, 2)
    fetch(p, 2, 2)
    assert p.check_enough_replicas_reach_offset(2, 0) == (True, ErrorCode.none)


def test_acks_all_after_the_isr_shrank_below_min_insync_is_not_enough_after_append() -> None:
    """The HW passed the batch, but by the time the purgatory asks the ISR has shrunk to
    the leader alone: Kafka answers NOT_ENOUGH_REPLICAS_AFTER_APPEND."""
    p = leader(isr=(0, 1))
    produce(p, 2, acks=-1)
    fetch(p, 1, 2)
    assert p.high_watermark == 2
    produce(p, 1, now=T0 + 2 * LAG)
    shrink = p.maybe_shrink_isr(T0 + 2 * LAG)
    assert shrink is not None and shrink.new_isr == (0,)
    p.on_alter_partition_response(shrink, PartitionState(0, 0, (0,), ALL, 1), T0 + 2 * LAG)
    assert p.check_enough_replicas_reach_offset(2, 0) == (
        True,
        ErrorCode.not_enough_replicas_after_append,
    )
    assert p.check_enough_replicas_reach_offset(3, 0) == (False, ErrorCode.none)


def test_acks_all_waits_on_across_a_controller_isr_change_that_bumps_the_epoch() -> None:
    """ZooKeeper mode: the controller removes a dead follower from the ISR by writing a new
    leader epoch with the same leader. The leader never followed, so the append it waits
    for is still in its log: it completes once the rest of the ISR has it (Kafka's
    DelayedProduce does not look at epochs)."""
    p = leader()
    produce(p, 2, acks=-1)
    fetch(p, 1, 2)
    p.apply_state(PartitionState(0, 1, (0, 1), ALL, 1), T0)  # broker 2 died
    assert p.check_enough_replicas_reach_offset(2, 0) == (True, ErrorCode.none)
    produce(p, 1, acks=-1)
    assert p.check_enough_replicas_reach_offset(3, 1) == (False, ErrorCode.none)


def test_acks_all_across_a_lost_and_regained_leadership_fails_as_not_leader() -> None:
    p = leader()
    produce(p, 1, acks=-1)
    p.apply_state(PartitionState(1, 1, (0, 1), ALL, 1), T0)
    p.apply_state(PartitionState(0, 2, (0, 1), ALL, 2), T0)
    assert p.check_enough_replicas_reach_offset(1, 0) == (
        True,
        ErrorCode.not_leader_or_follower,
    )


def test_acks_all_of_an_earlier_leadership_fails_as_not_leader() -> None:
    p = leader()
    produce(p, 1, acks=-1)
    p.apply_state(PartitionState(1, 1, (0, 1), ALL, 1), T0)
    assert p.check_enough_replicas_reach_offset(1, 0) == (
        True,
        ErrorCode.not_leader_or_follower,
    )
    with pytest.raises(NotLeaderOrFollower):
        produce(p)
    with pytest.raises(NotLeaderOrFollower):
        p.read(0, 100, 0, True)


# -- follower: truncation and fetching -------------------------------------------------------


def log_with(epochs: list[tuple[int, int]], config: LogConfig | None = None) -> MemoryLog:
    """A log holding ``count`` one-record batches of each ``(epoch, count)``."""
    log = MemoryLog(config or LogConfig(min_insync_replicas=2))
    value = 0
    for epoch, count in epochs:
        for _ in range(count):
            value += 1
            log.append((value,), leader_epoch=epoch, now_ms=T0)
    return log


def converse(f: Partition, leader_log: MemoryLog) -> list[EpochQuery]:
    """Answer the follower's epoch queries from ``leader_log`` until it fetches."""
    queries = []
    while isinstance(req := f.next_follower_request(), EpochQuery):
        queries.append(req)
        f.on_epoch_end_offset(
            req, *leader_log.leader_epoch_cache.end_offset_for_epoch(req.leader_epoch)
        )
    return queries


def test_a_new_follower_truncates_its_divergent_tail_before_fetching() -> None:
    """KIP-101: the old leader wrote offsets 2-3 in epoch 0 that nobody copied; the new
    leader wrote offset 2 in epoch 1. The old leader, now follower, cuts at 2."""
    old = log_with([(0, 4)])
    new = log_with([(0, 2), (1, 1)])
    f = Partition(old, 0, PartitionState(1, 1, (1, 2), ALL, 1), T0, LAG)
    assert f.next_follower_request() == EpochQuery(1, 1, 0)
    assert [q.leader_epoch for q in converse(f, new)] == [0]
    assert old.log_end_offset == 2
    assert f.next_follower_request() == FetchPosition(1, 1, 2)


def test_kip_279_divergence_over_several_epochs_is_found_in_several_rounds() -> None:
    """The follower led epochs 1 and 3, the leader epochs 2 and 4, after a shared epoch 0.
    Asked for epoch 3, the leader answers epoch 2 (which the follower never saw): the
    follower cuts to where its own epoch 1 ends and asks again, for epoch 1, and the
    leader's answer (epoch 0 ends at 2) is the true divergence point."""
    follower_log = log_with([(0, 2), (1, 2), (3, 2)])
    leader_log = log_with([(0, 2), (2, 3), (4, 2)])
    f = Partition(follower_log, 1, PartitionState(0, 4, ALL, ALL, 5), T0, LAG)
    queries = converse(f, leader_log)
    assert [q.leader_epoch for q in queries] == [3, 1]
    assert follower_log.log_end_offset == 2
    assert follower_log.leader_epoch_cache.entries == [(0, 0)]


def test_a_follower_with_the_leaders_epochs_keeps_its_log() -> None:
    shared = [(0, 2), (2, 3)]
    f = Partition(log_with(shared), 1, PartitionState(0, 3, ALL, ALL, 1), T0, LAG)
    converse(f, log_with([*shared, (3, 4)]))
    assert f.log_end_offset == 5


def test_fetched_batches_are_appended_as_follower_with_the_leaders_epochs() -> None:
    lead = leader()
    produce(lead, 2)
    lead.apply_state(PartitionState(0, 2, ALL, ALL, 1), T0)
    produce(lead, 1)
    f = follower(epoch=2)
    req = f.next_follower_request()
    assert req == FetchPosition(0, 2, 0)  # an empty log has no epoch to ask about
    records = lead.fetch_for_follower(1, 0, 2, 10, T0)
    assert f.on_fetch_response(req, records, lead.high_watermark, T0)
    assert f.log.leader_epoch_cache.entries == [(0, 0), (2, 2)]
    assert f.log_end_offset == 3


def fetch_position(f: Partition) -> FetchPosition:
    req = f.next_follower_request()
    assert isinstance(req, FetchPosition)
    return req


def test_follower_high_watermark_is_the_leaders_capped_at_its_own_end_and_only_rises() -> None:
    f = follower()
    lead = leader()
    produce(lead, 4)
    fetch(lead, 2, 4)
    req = fetch_position(f)
    f.on_fetch_response(req, lead.fetch_for_follower(1, 0, 0, 2, T0), 4, T0)  # two batches
    assert (f.log_end_offset, f.high_watermark) == (2, 2)
    req = fetch_position(f)
    f.on_fetch_response(req, (), 1, T0)  # an older leader HW in a reordered answer
    assert f.high_watermark == 2


def test_stale_or_duplicate_answers_change_nothing() -> None:
    lead = leader()
    produce(lead, 2)
    f = follower()
    req = fetch_position(f)
    records = lead.fetch_for_follower(1, 0, 0, 10, T0)
    assert f.on_fetch_response(req, records, 0, T0)
    assert not f.on_fetch_response(req, records, 0, T0)  # the same answer twice
    assert f.log_end_offset == 2
    f.apply_state(PartitionState(0, 1, ALL, ALL, 1), T0)
    old_query = EpochQuery(0, 0, 0)
    f.on_epoch_end_offset(old_query, 0, 0)  # an answer to a query of the previous epoch
    assert f.log_end_offset == 2


def test_offset_out_of_range_sends_the_follower_back_to_truncation() -> None:
    f = Partition(log_with([(0, 3)]), 1, PartitionState(0, 0, ALL, ALL, 0), T0, LAG)
    converse(f, log_with([(0, 3)]))
    req = f.next_follower_request()
    assert isinstance(req, FetchPosition)
    f.on_fetch_error(req, ErrorCode.fenced_leader_epoch)
    assert f.next_follower_request() == req
    f.on_fetch_error(req, ErrorCode.offset_out_of_range)
    assert isinstance(f.next_follower_request(), EpochQuery)


def test_older_metadata_is_ignored_and_same_epoch_news_update_the_isr() -> None:
    p = leader()
    assert not p.apply_state(PartitionState(1, 0, ALL, ALL, 0), T0)
    assert p.is_leader
    assert p.apply_state(PartitionState(0, 0, (0, 1), ALL, 3), T0)
    assert p.is_leader and p.isr == {0, 1} and p.partition_epoch == 3
    assert not p.apply_state(PartitionState(0, 0, ALL, ALL, 2), T0)
