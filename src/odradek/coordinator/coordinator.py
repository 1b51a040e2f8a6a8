"""GroupCoordinator: the sans-I/O group coordinator the asyncio shell drives.

It plays the part of Kafka's GroupCoordinatorShard for every __consumer_offsets
partition this broker has loaded: each request is routed to the part that owns
it, and the records those parts queue are drained by the shell.

- group_metadata.GroupMetadataManager: the groups, their records, replay, timers' deadlines;
- offset_metadata.OffsetMetadataManager: committed offsets and their retention;
- classic_protocol.ClassicGroupProtocol: JoinGroup/SyncGroup/Heartbeat/LeaveGroup of classic groups;
- consumer_protocol.ConsumerGroupProtocol: ConsumerGroupHeartbeat (KIP-848);
- migration.GroupMigration: conversions between the two, and classic members of consumer groups.

Every method takes ``now_ms``; nothing sleeps or does I/O. A JoinGroup or
SyncGroup that must wait registers a callback, which a later call (another
member's join, a leave, or ``poll(now_ms)`` once a deadline passes) invokes
with the result; the shell passes ``future.set_result`` and re-arms one timer
at ``next_deadline_ms()``. State changes that Kafka persists are queued as
__consumer_offsets records (``drain_records()``) for the shell to append.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from odradek.coordinator import records as rec
from odradek.coordinator.assignors import Assignment
from odradek.coordinator.batches import CoordinatorRecord
from odradek.coordinator.classic_group import (
    ClassicGroup,
    GroupState,
    JoinCallback,
    JoinResult,
    SyncCallback,
)
from odradek.coordinator.classic_protocol import ClassicGroupProtocol, JoinParams
from odradek.coordinator.config import GroupCoordinatorConfig
from odradek.coordinator.consumer_group import ConsumerGroup, TopicMetadata
from odradek.coordinator.consumer_protocol import (
    ConsumerGroupProtocol,
    ConsumerHeartbeat,
    ConsumerHeartbeatResult,
)
from odradek.coordinator.group_metadata import Group, GroupMetadataManager
from odradek.coordinator.migration import GroupMigration
from odradek.coordinator.offset_metadata import (
    OffsetCommit,
    OffsetMetadataManager,
    PendingOffsets,
    end_transaction,
)
from odradek.coordinator.offsets import OffsetAndMetadata
from odradek.coordinator.uncommitted import UncommittedWrites
from odradek.protocol.errors import ErrorCode

#: What ``snapshot`` returns: copies of the groups named (None: no such group), and their
#: offsets pending in open transactions.
Snapshot = tuple[dict[str, Group | None], dict[str, PendingOffsets]]


@dataclass(slots=True)
class GroupPreImage:
    """A group as of the high watermark while it has uncommitted writes: a copy of it (None
    when it did not exist) and its offsets pending in open transactions, which a marker
    replicated meanwhile applies to the copy."""

    group: Group | None
    pending: PendingOffsets


class GroupCoordinator:
    def __init__(self, config: GroupCoordinatorConfig | None = None) -> None:
        self.config = config or GroupCoordinatorConfig()
        self._records: list[CoordinatorRecord] = []
        self.metadata = GroupMetadataManager(self.config, self._records)
        self.offsets = OffsetMetadataManager(self.config, self.metadata, self._records)
        self.classic = ClassicGroupProtocol(self.config, self.metadata)
        self.migration = GroupMigration(self.config, self.metadata, self.classic)
        self.consumer = ConsumerGroupProtocol(self.config, self.metadata, self.migration)
        #: The groups' pre-images while their writes are above the high watermark.
        self.uncommitted: UncommittedWrites[GroupPreImage] = UncommittedWrites()

    @property
    def groups(self) -> dict[str, Group]:
        return self.metadata.groups

    # ---- placement and persistence ----------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return self.metadata.partition_for(group_id)

    def drain_records(self) -> list[CoordinatorRecord]:
        out = list(self._records)
        self._records.clear()
        return out

    def load_record(
        self, key: bytes, value: bytes | None, now_ms: int, producer_id: int = -1
    ) -> None:
        """Replay one __consumer_offsets record at start-up; the last record for a key wins. A
        transactional one (TxnOffsetCommit) waits for its producer's marker."""
        k = rec.decode_key(key)
        if producer_id >= 0 and isinstance(k, rec.OffsetCommitKey):
            self.offsets.replay_pending(k, value, producer_id, now_ms)
        elif isinstance(k, rec.OffsetCommitKey):
            self.offsets.replay(k, value, now_ms)
        elif isinstance(k, rec.ConsumerGroupKey):
            self.metadata.replay_consumer(k, key, value, now_ms)
        else:
            self.metadata.replay_classic(k.group, value, now_ms)

    def unload_partition(self, partition: int) -> list[str]:
        """Forget the groups of one __consumer_offsets partition, their offsets pending in
        transactions and their uncommitted writes; see GroupMetadataManager."""
        self.uncommitted.forget(partition)
        self.offsets.unload_partition(partition)
        return self.metadata.unload_partition(partition)

    def replay_end_transaction(
        self, partition: int, producer_id: int, commit: bool, now_ms: int
    ) -> None:
        """A transaction marker in __consumer_offsets ``partition`` (read back, or replicated
        after it was written). A replicated marker is committed, and every uncommitted write
        of the partition follows it in the log, so the groups' pre-images take it too."""
        self.offsets.complete_transaction(partition, producer_id, commit, now_ms)
        if not self.uncommitted.has_writes(partition):
            return
        for group_id in list(self.uncommitted):
            if self.partition_for(group_id) != partition:
                continue
            for pre in self.uncommitted.pre_images(group_id):
                pre.group = end_transaction(
                    group_id, pre.group, pre.pending, producer_id, commit, now_ms
                )

    def snapshot(self, group_ids: Iterable[str]) -> Snapshot:
        group_ids = list(group_ids)
        return self.metadata.snapshot(group_ids), self.offsets.snapshot_pending(group_ids)

    def restore(self, snapshot: Snapshot) -> None:
        groups, pending = snapshot
        self.metadata.restore(groups)
        self.offsets.restore_pending(pending)

    # ---- reads at the high watermark (see uncommitted.py) -----------------------------------

    def written(self, partition: int, end_offset: int, snapshot: Snapshot) -> None:
        """The records of a call, taken before it as ``snapshot``, were appended to
        ``partition`` up to ``end_offset`` and are not replicated yet: until they are,
        reads answer the snapshot's groups of that partition."""
        groups, pending = snapshot
        self.uncommitted.written(
            partition,
            end_offset,
            {
                gid: GroupPreImage(group, pending.get(gid, {}))
                for gid, group in groups.items()
                if self.partition_for(gid) == partition
            },
        )

    def snapshot_partition(self, partition: int) -> Snapshot:
        """Every group of ``partition`` as it is now: before a load replays the records above
        the high watermark (see ``loaded_uncommitted``)."""
        return self.snapshot(self.metadata.group_ids_in(partition))

    def loaded_uncommitted(self, partition: int, end_offset: int, before: Snapshot) -> None:
        """A load replayed ``partition``'s records above its high watermark, up to
        ``end_offset``; ``before`` is ``snapshot_partition`` from before them. Reads answer
        the partition's groups as they were then (a group created since: not at all) until the
        high watermark reaches ``end_offset``: later than each record is replicated, as Kafka's
        loader snapshots every batch, but never earlier."""
        groups, _ = before
        for gid in self.metadata.group_ids_in(partition):
            groups.setdefault(gid, None)
        self.written(partition, end_offset, before)

    def committed(self, partition: int, high_watermark: int) -> None:
        """``partition``'s high watermark moved: the writes below it become visible to reads."""
        self.uncommitted.committed(partition, high_watermark)

    def committed_group(self, group_id: str) -> Group | None:
        """The group as of the high watermark of its partition (what reads answer)."""
        pre = self.uncommitted.pre_image(group_id)
        return self.groups.get(group_id) if pre is None else pre.group

    def committed_groups(self) -> Iterator[Group]:
        """Every group as of the high watermark of its partition."""
        for group_id, group in self.groups.items():
            if self.uncommitted.pre_image(group_id) is None:
                yield group
        for group_id in self.uncommitted:
            committed = self.committed_group(group_id)
            if committed is not None:
                yield committed

    # ---- classic protocol -------------------------------------------------------------------

    def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        require_known_member_id: bool,
        callback: JoinCallback,
        now_ms: int,
        topics: TopicMetadata | None = None,
    ) -> None:
        """Handle a JoinGroup; ``callback`` gets the JoinResult now or when the join phase ends.
        ``topics`` (name -> id, partitions) serves classic members of a consumer-protocol group."""
        if not group_id:
            callback(JoinResult(ErrorCode.invalid_group_id, member_id=member_id))
            return
        if not (
            self.config.group_min_session_timeout_ms
            <= session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            callback(JoinResult(ErrorCode.invalid_session_timeout, member_id=member_id))
            return
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        params = JoinParams(
            client_id,
            client_host,
            protocol_type,
            protocols,
            session_timeout_ms,
            rebalance_timeout_ms,
        )
        group = self.groups.get(group_id)
        if group is None and member_id:
            callback(JoinResult(ErrorCode.unknown_member_id, member_id=member_id))
            return
        if isinstance(group, ConsumerGroup):
            if group.members:
                callback(
                    self.migration.join(
                        group,
                        member_id,
                        group_instance_id,
                        require_known_member_id,
                        params,
                        topics or {},
                        now_ms,
                    )
                )
                return
            # An empty consumer-protocol group becomes a classic one, keeping its offsets.
            classic = ClassicGroup(group_id, now_ms)
            classic.offsets = group.offsets
            self.metadata.store_consumer(group, deleted=True)
            self.groups[group_id] = classic
        self.classic.join(
            self.metadata.get_or_create_classic(group_id, now_ms),
            member_id,
            group_instance_id,
            require_known_member_id,
            params,
            callback,
            now_ms,
        )

    def sync_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        callback: SyncCallback,
        now_ms: int,
        topics: TopicMetadata | None = None,
    ) -> None:
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            callback(
                self.migration.sync(
                    group,
                    member_id,
                    group_instance_id,
                    generation_id,
                    protocol_type,
                    protocol_name,
                    topics or {},
                    now_ms,
                )
            )
            return
        self.classic.sync(
            group,
            member_id,
            group_instance_id,
            generation_id,
            protocol_type,
            protocol_name,
            assignments,
            callback,
            now_ms,
        )

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        now_ms: int,
    ) -> int:
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return self.migration.heartbeat(
                group, member_id, group_instance_id, generation_id, now_ms
            )
        return self.classic.heartbeat(group, member_id, group_instance_id, generation_id, now_ms)

    def leave_group(
        self, group_id: str, members: list[tuple[str, str | None]], now_ms: int
    ) -> tuple[int, list[int]]:
        """Remove members given as (member id, group instance id); per-member error codes."""
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return ErrorCode.none, [
                self.consumer.leave_classic_member(group, m, i, now_ms) for m, i in members
            ]
        return self.classic.leave(group, members, now_ms)

    # ---- consumer protocol (KIP-848) --------------------------------------------------------

    def consumer_group_heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        instance_id: str | None,
        rack_id: str | None,
        rebalance_timeout_ms: int,
        subscribed_topic_names: list[str] | None,
        server_assignor: str | None,
        owned: Assignment | None,
        client_id: str,
        client_host: str,
        topics: TopicMetadata,
        now_ms: int,
        subscribed_topic_regex: str | None = None,
        member_id_required: bool = False,
    ) -> ConsumerHeartbeatResult:
        """ConsumerGroupHeartbeat; ``member_id_required``: v1+ clients make their own id."""
        heartbeat = ConsumerHeartbeat(
            group_id,
            member_id,
            member_epoch,
            instance_id,
            rack_id,
            rebalance_timeout_ms,
            subscribed_topic_names,
            subscribed_topic_regex,
            server_assignor,
            owned,
            member_id_required,
        )
        return self.consumer.heartbeat(heartbeat, client_id, client_host, topics, now_ms)

    # ---- offsets ----------------------------------------------------------------------------

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
        return self.offsets.commit_offsets(
            group_id, member_id, group_instance_id, generation_id, offsets, now_ms
        )

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
        """TxnOffsetCommit: per-partition errors in request order (see OffsetMetadataManager)."""
        return self.offsets.txn_commit_offsets(
            group_id,
            producer_id,
            producer_epoch,
            member_id,
            group_instance_id,
            generation_id,
            offsets,
            now_ms,
        )

    def pending_transactional_offsets(self, group_id: str) -> set[tuple[str, int]]:
        """The partitions whose offsets open transactions are committing for ``group_id``:
        their TxnOffsetCommit written, replicated or not (Kafka's RequireStable fetch reads the
        latest state), and their marker not yet replicated (a marker loaded above the high
        watermark), so that a RequireStable fetch never reads an offset about to move."""
        pending = [self.offsets.pending.get(group_id, {})]
        pre = self.uncommitted.pre_image(group_id)
        if pre is not None:
            pending.append(pre.pending)
        return {tp for by_producer in pending for offsets in by_producer.values() for tp in offsets}

    def check_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        return self.offsets.check_offset_fetch(group_id, member_id, member_epoch)

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]] | None
    ) -> dict[tuple[str, int], OffsetAndMetadata | None]:
        """OffsetFetch at the high watermark: the offsets asked for (None = all) as committed."""
        return self.offsets.fetch_offsets(self.committed_group(group_id), partitions)

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]], now_ms: int
    ) -> tuple[int, list[int]]:
        return self.offsets.delete_offsets(group_id, partitions, now_ms)

    def expire_offsets(self, now_ms: int) -> int:
        """Offset retention over every group (see ``expire_group_offsets``); the number removed."""
        return sum(self.expire_group_offsets(gid, now_ms) for gid in list(self.groups))

    def expire_group_offsets(self, group_id: str, now_ms: int) -> int:
        return self.offsets.expire_group_offsets(group_id, now_ms)

    # ---- admin ------------------------------------------------------------------------------

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> list[tuple[str, str, str, str]]:
        """ListGroups at the high watermark (see GroupMetadataManager.list_groups)."""
        return self.metadata.list_groups(self.committed_groups(), states, types)

    def delete_groups(self, group_ids: list[str], now_ms: int) -> dict[str, int]:
        """DeleteGroups: an Empty group's offsets are tombstoned, then its metadata."""
        results: dict[str, int] = {}
        for gid in group_ids:
            group = self.groups.get(gid)
            if not gid:
                results[gid] = ErrorCode.invalid_group_id
            elif group is None or group.state is GroupState.DEAD:
                results[gid] = ErrorCode.group_id_not_found
            elif group.state is not GroupState.EMPTY:
                results[gid] = ErrorCode.non_empty_group
            else:
                self.offsets.delete_all_offsets(group)
                self.metadata.drop(group, now_ms)
                results[gid] = ErrorCode.none
        return results

    # ---- timers -----------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        """The earliest moment ``poll`` has something to do, or None."""
        candidates = [self.metadata.next_deadline_ms(), self.offsets.next_retention_check_ms()]
        return min((d for d in candidates if d is not None), default=None)

    def due_groups(self, now_ms: int) -> list[str]:
        """Groups with a deadline at or before ``now_ms`` (each is then handled by ``poll_group``)."""
        return self.metadata.due_groups(now_ms)

    def retention_due(self, now_ms: int) -> bool:
        return self.offsets.retention_due(now_ms)

    def poll(self, now_ms: int) -> None:
        """Fire every deadline that has passed: session expiry, join phase end, offset retention."""
        for group_id in self.due_groups(now_ms):
            self.poll_group(group_id, now_ms)
        if self.retention_due(now_ms):
            self.expire_offsets(now_ms)

    def poll_group(self, group_id: str, now_ms: int) -> None:
        """One group's passed deadlines: pending and session expiry, end of the join phase."""
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            self.consumer.expire(group, now_ms)
        elif group is not None:
            self.classic.expire(group, now_ms)
