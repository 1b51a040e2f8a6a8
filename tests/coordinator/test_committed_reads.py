"""The group coordinator's reads answer the state at the high watermark (uncommitted.py).

The core is driven as its runtime drives it: each call's records go to a model of the
__consumer_offsets partitions' logs, with the call's snapshot handed to ``written`` while
they are above the high watermark; markers take effect once replicated, as
``on_txn_marker``; a failover truncates a partition's log to its high watermark and loads
it again, or loads all of it on a replica that knows an older high watermark. Whatever
happens, OffsetFetch and ListGroups answer exactly what a coordinator loading the logs up
to their high watermarks answers (up to the high watermark at the load, for a partition
loaded with records above it, until it passes them all): never an unreplicated write.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from odradek.coordinator.config import GroupCoordinatorConfig
from odradek.coordinator.coordinator import GroupCoordinator
from odradek.coordinator.offset_metadata import OffsetCommit

CONFIG = GroupCoordinatorConfig(offsets_topic_num_partitions=2)
NOW = 1_000
#: Groups of both partitions (partition_for: g0 and g2 in one, g1 in the other).
GROUPS = ["g0", "g1", "g2"]
PRODUCERS = [7, 8]


@dataclass(frozen=True)
class Marker:
    producer_id: int
    commit: bool


@dataclass
class PartitionLog:
    """One __consumer_offsets partition: records (key, value, producer id) and markers,
    appended in batches that replicate whole."""

    items: list[tuple[bytes, bytes | None, int] | Marker] = field(default_factory=list)
    #: The offset after each batch.
    batch_ends: list[int] = field(default_factory=list)
    high_watermark: int = 0

    def append(self, batch: list) -> int:
        self.items += batch
        self.batch_ends.append(len(self.items))
        return len(self.items)


def replay(core: GroupCoordinator, partition: int, items) -> None:
    for item in items:
        if isinstance(item, Marker):
            core.replay_end_transaction(partition, item.producer_id, item.commit, NOW)
        else:
            core.load_record(*item[:2], NOW, item[2])


def committed_core(logs: dict[int, PartitionLog], offsets: dict[int, int]) -> GroupCoordinator:
    """A coordinator loading each partition up to ``offsets`` (its high watermark)."""
    core = GroupCoordinator(CONFIG)
    for partition, log in logs.items():
        replay(core, partition, log.items[: offsets[partition]])
    return core


def reads(core: GroupCoordinator) -> tuple:
    return (
        {g: core.fetch_offsets(g, None) for g in GROUPS},
        sorted(core.list_groups()),
    )


class CommittedReads(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.core = GroupCoordinator(CONFIG)
        self.logs = {p: PartitionLog() for p in range(CONFIG.offsets_topic_num_partitions)}
        #: Producers with a transaction open per group (their TxnOffsetCommit written).
        self.open: set[tuple[str, int]] = set()
        #: Markers not yet replicated: (partition, offset after it, producer id).
        self.markers: set[tuple[int, int, int]] = set()
        #: Per partition loaded with records above its high watermark: (the high watermark
        #: then, the log end offset then). Until the high watermark passes the second, reads
        #: answer the first.
        self.tails: dict[int, tuple[int, int]] = {}

    def read_offsets(self) -> dict[int, int]:
        """Per partition, the offset reads answer the state at."""
        offsets = {}
        for partition, log in self.logs.items():
            loaded_at, end = self.tails.get(partition, (0, 0))
            offsets[partition] = loaded_at if log.high_watermark < end else log.high_watermark
        return offsets

    def write(self, group: str, fn: Callable[..., object], *args: object) -> None:
        """One call as CoordinatorRuntime.call makes it: snapshot, run, append, ``written``."""
        snapshot = self.core.snapshot([group])
        fn(*args, now_ms=NOW)
        batches: dict[int, list] = {}
        for record in self.core.drain_records():
            batches.setdefault(record.partition, []).append(
                (record.key, record.value, record.producer_id)
            )
        for partition, batch in batches.items():
            self.core.written(partition, self.logs[partition].append(batch), snapshot)

    @rule(group=st.sampled_from(GROUPS), partition=st.integers(0, 1), offset=st.integers(0, 99))
    def commit(self, group: str, partition: int, offset: int) -> None:
        commits = [OffsetCommit("t", partition, offset)]
        self.write(group, self.core.commit_offsets, group, "", None, -1, commits)

    @rule(group=st.sampled_from(GROUPS), partition=st.integers(0, 1))
    def delete_offset(self, group: str, partition: int) -> None:
        self.write(group, self.core.delete_offsets, group, [("t", partition)])

    # Markers take effect when replicated, not at their place in the log: a group deleted, or
    # a producer's next transaction begun, between a marker's write and its replication would
    # see it applied late. Neither happens here (the producer's next transaction waits for
    # its markers); the model keeps out of it.
    @precondition(lambda self: not self.open and not self.markers)
    @rule(group=st.sampled_from(GROUPS))
    def delete_group(self, group: str) -> None:
        self.write(group, self.core.delete_groups, [group])

    @rule(
        group=st.sampled_from(GROUPS),
        producer=st.sampled_from(PRODUCERS),
        offset=st.integers(0, 99),
    )
    def txn_commit(self, group: str, producer: int, offset: int) -> None:
        if any(p == producer for _, _, p in self.markers):
            return
        # Transactions commit a partition of their own: a regular commit of the same partition
        # between a marker's write and its replication is not what this model is about.
        commits = [OffsetCommit("tx", 0, offset)]
        self.write(group, self.core.txn_commit_offsets, group, producer, 0, "", None, -1, commits)
        self.open.add((group, producer))

    @precondition(lambda self: self.open)
    @rule(data=st.data(), commit=st.booleans())
    def end_txn(self, data: st.DataObject, commit: bool) -> None:
        group, producer = data.draw(st.sampled_from(sorted(self.open)))
        self.open.discard((group, producer))
        partition = self.core.partition_for(group)
        end = self.logs[partition].append([Marker(producer, commit)])
        self.markers.add((partition, end, producer))

    @rule(partition=st.integers(0, 1), batches=st.integers(1, 3))
    def replicate(self, partition: int, batches: int) -> None:
        """The followers fetch: the high watermark moves, then the markers this leader wrote
        and saw replicated apply (ReplicaManager.txn_marker_listeners); one loaded from the
        log took effect at the load."""
        log = self.logs[partition]
        before = log.high_watermark
        ahead = [end for end in log.batch_ends if end > before]
        if not ahead:
            return
        log.high_watermark = ahead[min(batches, len(ahead)) - 1]
        self.core.committed(partition, log.high_watermark)
        for marker in sorted(self.markers):
            marker_partition, end, _ = marker
            if marker_partition == partition and end <= log.high_watermark:
                self.markers.discard(marker)
                item = log.items[end - 1]
                assert isinstance(item, Marker)
                self.core.replay_end_transaction(partition, item.producer_id, item.commit, NOW)

    @rule(partition=st.integers(0, 1))
    def failover(self, partition: int) -> None:
        """Leadership moves away and back: the unreplicated tail is lost, the log replayed."""
        log = self.logs[partition]
        del log.items[log.high_watermark :]
        log.batch_ends = [end for end in log.batch_ends if end <= log.high_watermark]
        self.markers = {m for m in self.markers if m[0] != partition}
        self.tails.pop(partition, None)
        self.core.unload_partition(partition)
        replay(self.core, partition, log.items)
        self.open = {
            (g, p) for g, by_producer in self.core.offsets.pending.items() for p in by_producer
        }

    @rule(partition=st.integers(0, 1))
    def failover_keeping_the_tail(self, partition: int) -> None:
        """Leadership moves to a replica that has the whole log but knows an older high
        watermark (CoordinatorRuntime.load_partition and GroupCoordinatorService's
        load_uncommitted): the records above it are loaded and kept from reads."""
        log = self.logs[partition]
        self.core.unload_partition(partition)
        replay(self.core, partition, log.items[: log.high_watermark])
        before = self.core.snapshot_partition(partition)
        replay(self.core, partition, log.items[log.high_watermark :])
        self.core.loaded_uncommitted(partition, len(log.items), before)
        # The markers loaded took effect; their writer's wait for replication failed.
        self.markers = {m for m in self.markers if m[0] != partition}
        self.tails[partition] = (log.high_watermark, len(log.items))
        self.open = {
            (g, p) for g, by_producer in self.core.offsets.pending.items() for p in by_producer
        }

    @invariant()
    def reads_answer_the_high_watermark(self) -> None:
        assert reads(self.core) == reads(committed_core(self.logs, self.read_offsets()))

    @invariant()
    def pending_offsets_are_unstable(self) -> None:
        """A RequireStable fetch gets UNSTABLE_OFFSET_COMMIT for every offset a transaction
        left pending as of the high watermark (and for those written since)."""
        committed = committed_core(self.logs, self.read_offsets())
        for group in GROUPS:
            at_high_watermark = committed.pending_transactional_offsets(group)
            assert at_high_watermark <= self.core.pending_transactional_offsets(group)


TestCommittedReads = CommittedReads.TestCase
TestCommittedReads.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)


def commit(core: GroupCoordinator, group: str, offset: int):
    snapshot = core.snapshot([group])
    core.commit_offsets(group, "", None, -1, [OffsetCommit("t", 0, offset)], now_ms=NOW)
    (record,) = core.drain_records()
    return record.partition, snapshot


def test_a_write_is_read_once_the_high_watermark_passes_it() -> None:
    core = GroupCoordinator(CONFIG)
    partition, snapshot = commit(core, "g0", 5)
    core.written(partition, 1, snapshot)
    assert core.fetch_offsets("g0", [("t", 0)]) == {("t", 0): None}
    assert core.list_groups() == []
    assert core.committed_group("g0") is None
    partition, snapshot = commit(core, "g0", 6)
    core.written(partition, 2, snapshot)
    core.committed(partition, 1)
    (om,) = core.fetch_offsets("g0", [("t", 0)]).values()
    assert om is not None and om.offset == 5
    core.committed(partition, 2)
    (om,) = core.fetch_offsets("g0", [("t", 0)]).values()
    assert om is not None and om.offset == 6
    assert not core.uncommitted.has_writes(partition)


def test_unloading_drops_the_uncommitted_writes() -> None:
    core = GroupCoordinator(CONFIG)
    partition, snapshot = commit(core, "g0", 5)
    core.written(partition, 1, snapshot)
    core.unload_partition(partition)
    assert not core.uncommitted.has_writes(partition)
    assert core.uncommitted.pre_image("g0") is None
