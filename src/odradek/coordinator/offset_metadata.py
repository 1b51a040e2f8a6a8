"""OffsetMetadataManager: committed offsets, as Kafka's class of that name.

Commits, fetches, deletes and retention of the offsets groups commit, and their
OffsetCommit records in __consumer_offsets. Offsets live on the group object
(``group.offsets``) so that they follow the group through conversions between
the classic and the consumer protocol, but only this manager changes them.

Whether a commit may be applied is the group's decision (``validate_offset_commit``
on ClassicGroup and ConsumerGroup, as in Kafka), and applying it is a separate
step (``_apply``). TxnOffsetCommit (``txn_commit_offsets``) uses the same
validation and, instead of applying at once, keeps the offsets pending per
producer id (Kafka's pendingTransactionalOffsets): its records are written in a
transactional batch of the producer, and the transaction's marker in the same
__consumer_offsets partition applies them (COMMIT) or drops them (ABORT), both
live (``complete_transaction``) and when the partition is loaded again. Pending
offsets are not visible to OffsetFetch, and a group with some is not removed by
offset retention.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from odradek.coordinator import records as rec
from odradek.coordinator.batches import CoordinatorRecord
from odradek.coordinator.classic_group import ClassicGroup, GroupState
from odradek.coordinator.config import GroupCoordinatorConfig
from odradek.coordinator.consumer_group import ConsumerGroup
from odradek.coordinator.group_metadata import Group, GroupMetadataManager
from odradek.coordinator.offsets import OffsetAndMetadata
from odradek.protocol.errors import ErrorCode

#: One group's offsets written by open transactions: producer id -> partition -> offset.
PendingOffsets = dict[int, dict[tuple[str, int], OffsetAndMetadata]]


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    """One partition's offset in an OffsetCommit request."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    expire_timestamp_ms: int = -1


class OffsetMetadataManager:
    def __init__(
        self,
        config: GroupCoordinatorConfig,
        groups: GroupMetadataManager,
        records: list[CoordinatorRecord],
    ) -> None:
        self.config = config
        self._groups = groups
        self._records = records
        self._last_retention_check_ms: int | None = None
        #: group id -> producer id -> offsets written by its open transaction.
        self.pending: dict[str, PendingOffsets] = {}

    def _store(
        self,
        group_id: str,
        topic: str,
        partition: int,
        om: OffsetAndMetadata | None,
        producer: tuple[int, int] = (-1, -1),
    ) -> None:
        key = rec.encode_offset_commit_key(rec.OffsetCommitKey(group_id, topic, partition))
        value = None
        if om is not None:
            value = rec.encode_offset_commit_value(
                rec.OffsetCommitValue(
                    om.offset,
                    om.metadata,
                    om.commit_timestamp_ms,
                    om.leader_epoch,
                    om.expire_timestamp_ms,
                )
            )
        partition_of_group = self._groups.partition_for(group_id)
        self._records.append(CoordinatorRecord(partition_of_group, key, value, *producer))

    def replay(self, key: rec.OffsetCommitKey, value: bytes | None, now_ms: int) -> None:
        """An OffsetCommit record read back; a tombstone removes the offset."""
        if value is None:
            group = self._groups.groups.get(key.group)
            if group is not None:
                group.offsets.pop((key.topic, key.partition), None)
            return
        v = rec.decode_offset_commit_value(value)
        group = self._groups.groups.get(key.group)
        if group is None:
            group = self._groups.get_or_create_classic(key.group, now_ms)
        group.offsets[(key.topic, key.partition)] = OffsetAndMetadata(
            v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp
        )

    # ---- OffsetCommit ------------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: list[OffsetCommit],
        now_ms: int,
    ) -> tuple[int, list[int]]:
        """OffsetCommit: (group-level error, per-partition errors in request order)."""
        error, group = self._validate_commit(
            group_id, member_id, group_instance_id, generation_id, now_ms, transactional=False
        )
        if group is None:
            return error, [error] * len(offsets)
        if isinstance(group, ClassicGroup) and member_id in group.members:
            # A commit counts as a heartbeat of the member's session.
            member = group.members[member_id]
            member.session_deadline_ms = now_ms + member.session_timeout_ms
        return ErrorCode.none, self._apply(group, offsets, now_ms)

    def _validate_commit(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        now_ms: int,
        transactional: bool,
    ) -> tuple[int, Group | None]:
        """(error, the group) for a commit, the group None when it is refused. Only a simple
        consumer (no generation) may create a group by committing; a transactional commit may
        land while a classic group completes a rebalance (Kafka's isTransactional)."""
        if not group_id:
            return ErrorCode.invalid_group_id, None
        group = self._groups.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return ErrorCode.illegal_generation, None
            group = self._groups.get_or_create_classic(group_id, now_ms)
        if isinstance(group, ConsumerGroup):
            error = group.validate_offset_commit(member_id, generation_id)
        else:
            error = group.validate_offset_commit(member_id, group_instance_id, generation_id)
            if transactional and error == ErrorCode.rebalance_in_progress:
                error = ErrorCode.none
        return error, (None if error else group)

    def _offset_and_metadata(
        self, c: OffsetCommit, now_ms: int, expire_timestamp_ms: int
    ) -> OffsetAndMetadata | None:
        """The offset to store for ``c``; None when its metadata exceeds
        offset.metadata.max.bytes (OFFSET_METADATA_TOO_LARGE)."""
        metadata = c.metadata or ""
        if len(metadata.encode()) > self.config.offset_metadata_max_bytes:
            return None
        return OffsetAndMetadata(c.offset, c.leader_epoch, metadata, now_ms, expire_timestamp_ms)

    # ---- TxnOffsetCommit ---------------------------------------------------------------------

    def txn_commit_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: list[OffsetCommit],
        now_ms: int,
    ) -> list[int]:
        """TxnOffsetCommit: per-partition errors in request order; the offsets wait for the
        producer's marker. Validated as OffsetCommit (Kafka's validateOffsetCommit with
        isTransactional)."""
        error, group = self._validate_commit(
            group_id, member_id, group_instance_id, generation_id, now_ms, transactional=True
        )
        if group is None:
            return [error] * len(offsets)
        pending = self.pending.setdefault(group_id, {}).setdefault(producer_id, {})
        results: list[int] = []
        for c in offsets:
            om = self._offset_and_metadata(c, now_ms, -1)
            if om is None:
                results.append(ErrorCode.offset_metadata_too_large)
                continue
            pending[(c.topic, c.partition)] = om
            self._store(group_id, c.topic, c.partition, om, (producer_id, producer_epoch))
            results.append(ErrorCode.none)
        return results

    def replay_pending(
        self, key: rec.OffsetCommitKey, value: bytes | None, producer_id: int, now_ms: int
    ) -> None:
        """A transactional OffsetCommit record read back: pending until its marker. The group
        exists from then on, as when the commit was accepted (a simple group is created
        Empty), as Kafka's replay does."""
        if value is None:
            return
        if key.group not in self._groups.groups:
            self._groups.get_or_create_classic(key.group, now_ms)
        v = rec.decode_offset_commit_value(value)
        self.pending.setdefault(key.group, {}).setdefault(producer_id, {})[
            (key.topic, key.partition)
        ] = OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, -1)

    def complete_transaction(
        self, partition: int, producer_id: int, commit: bool, now_ms: int
    ) -> None:
        """The producer's marker in __consumer_offsets ``partition``: apply (COMMIT) or drop
        (ABORT) what it left pending for the groups of that partition, as Kafka's
        replayEndTransactionMarker. A group with no record of its own (one that only ever
        had offsets committed) exists from its first commit, as when OffsetCommit records
        are replayed."""
        groups = self._groups.groups
        for group_id in [g for g in self.pending if self._groups.partition_for(g) == partition]:
            by_producer = self.pending[group_id]
            group = end_transaction(
                group_id, groups.get(group_id), by_producer, producer_id, commit, now_ms
            )
            if group is not None:
                groups[group_id] = group
            if not by_producer:
                del self.pending[group_id]

    def unload_partition(self, partition: int) -> None:
        """Forget the pending offsets of one __consumer_offsets partition's groups: whoever
        loads it next replays them from its log, which may have lost the unreplicated ones."""
        for group_id in [g for g in self.pending if self._groups.partition_for(g) == partition]:
            del self.pending[group_id]

    def snapshot_pending(self, group_ids: Iterable[str]) -> dict[str, PendingOffsets]:
        return {g: {pid: dict(o) for pid, o in self.pending.get(g, {}).items()} for g in group_ids}

    def restore_pending(self, snapshot: dict[str, PendingOffsets]) -> None:
        for group_id, by_producer in snapshot.items():
            if by_producer:
                self.pending[group_id] = by_producer
            else:
                self.pending.pop(group_id, None)

    def _apply(self, group: Group, offsets: list[OffsetCommit], now_ms: int) -> list[int]:
        """Store validated commits; per partition NONE or OFFSET_METADATA_TOO_LARGE."""
        results: list[int] = []
        for c in offsets:
            om = self._offset_and_metadata(c, now_ms, c.expire_timestamp_ms)
            if om is None:
                results.append(ErrorCode.offset_metadata_too_large)
                continue
            group.offsets[(c.topic, c.partition)] = om
            self._store(group.group_id, c.topic, c.partition, om)
            results.append(ErrorCode.none)
        return results

    # ---- OffsetFetch / OffsetDelete ----------------------------------------------------------

    def check_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        """OffsetFetch v9+ names the consumer-group member asking (KIP-848); an admin names none.
        As Kafka's ConsumerGroup.validateOffsetFetch: UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH."""
        group = self._groups.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            return ErrorCode.none
        return group.validate_offset_fetch(member_id, member_epoch)

    def fetch_offsets(
        self, group: Group | None, partitions: Iterable[tuple[str, int]] | None
    ) -> dict[tuple[str, int], OffsetAndMetadata | None]:
        """OffsetFetch: ``group``'s committed offsets asked for (None = every committed one);
        the caller picks the group as of the high watermark (GroupCoordinator.committed_group)."""
        stored: dict[tuple[str, int], OffsetAndMetadata] = (
            group.offsets if group is not None and group.state is not GroupState.DEAD else {}
        )
        if partitions is None:
            return dict(sorted(stored.items()))
        return {tp: stored.get(tp) for tp in partitions}

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]], now_ms: int
    ) -> tuple[int, list[int]]:
        """OffsetDelete: refused per partition while members consume its topic."""
        group = self._groups.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.group_id_not_found, []
        if group.state is not GroupState.EMPTY and group.protocol_type != "consumer":
            return ErrorCode.non_empty_group, []
        subscribed = (
            set() if group.state is GroupState.EMPTY else group.subscribed_topics() or set()
        )
        errors: list[int] = []
        for topic, partition in partitions:
            if topic in subscribed:
                errors.append(ErrorCode.group_subscribed_to_topic)
                continue
            if group.offsets.pop((topic, partition), None) is not None:
                self._store(group_id, topic, partition, None)
            errors.append(ErrorCode.none)
        return ErrorCode.none, errors

    def delete_all_offsets(self, group: Group) -> None:
        """Tombstone every offset of a group being deleted."""
        for topic, partition in list(group.offsets):
            self._store(group.group_id, topic, partition, None)
        group.offsets.clear()

    # ---- retention ---------------------------------------------------------------------------

    def next_retention_check_ms(self) -> int | None:
        if self._last_retention_check_ms is None:
            return None
        return self._last_retention_check_ms + self.config.offsets_retention_check_interval_ms

    def retention_due(self, now_ms: int) -> bool:
        """True once per offsets.retention.check.interval.ms (the first call starts the interval)."""
        if self._last_retention_check_ms is None:
            self._last_retention_check_ms = now_ms
            return False
        if (
            now_ms
            >= self._last_retention_check_ms + self.config.offsets_retention_check_interval_ms
        ):
            self._last_retention_check_ms = now_ms
            return True
        return False

    def expire_group_offsets(self, group_id: str, now_ms: int) -> int:
        """offsets.retention.minutes as Kafka 2.1+: count from when the group became Empty;
        for an active consumer group, only offsets of topics it no longer subscribes to expire
        (counted from their commit). Empty groups left with no offsets become Dead."""
        group = self._groups.groups.get(group_id)
        if group is None:
            return 0
        retention = self.config.offsets_retention_ms
        removed = 0
        base: int | None
        keep_topics: set[str]
        if group.state is GroupState.EMPTY:
            base, keep_topics = group.state_timestamp_ms, set()
        else:
            subscribed = group.subscribed_topics()
            if subscribed is None:
                return 0
            base, keep_topics = None, subscribed
        for (topic, partition), om in list(group.offsets.items()):
            if topic in keep_topics:
                continue
            start = om.commit_timestamp_ms if base is None else max(base, om.commit_timestamp_ms)
            if om.expired(now_ms, start, retention):
                del group.offsets[(topic, partition)]
                self._store(group.group_id, topic, partition, None)
                removed += 1
        if (
            group.state is GroupState.EMPTY
            and not group.offsets
            and not group.pending_members
            and not self.pending.get(group_id)
        ):
            self._groups.drop(group, now_ms)
        return removed


def end_transaction(
    group_id: str,
    group: Group | None,
    by_producer: PendingOffsets,
    producer_id: int,
    commit: bool,
    now_ms: int,
) -> Group | None:
    """A transaction marker for one group: the producer's pending offsets leave ``by_producer``
    and, on COMMIT, become ``group``'s offsets. Returns the group, created Empty when a commit
    lands in a group that does not exist (one that only ever had offsets committed)."""
    offsets = by_producer.pop(producer_id, None)
    if commit and offsets:
        if group is None:
            group = ClassicGroup(group_id, now_ms)
        group.offsets.update(offsets)
    return group
