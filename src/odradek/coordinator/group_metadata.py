"""GroupMetadataManager: which groups exist, how they are written and read back.

It owns the group table (classic and consumer-protocol groups by id) and the
group records of __consumer_offsets: GroupMetadata for classic groups, the six
KIP-848 record types for consumer groups. The protocols (classic_protocol,
consumer_protocol, migration) change groups and call ``store_*`` here; replay
at start-up, snapshots for failed writes, listing, the timers' deadlines and
the unloading of a partition's groups live here too, because they are about
the table rather than about one protocol. Offsets are the OffsetMetadataManager's
(offset_metadata.py), which finds its groups through this table.

Records are queued on a list shared with the OffsetMetadataManager, in the
order the state changed, for the shell to append (Kafka's CoordinatorResult).
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable

from odradek.coordinator import consumer_group_records as cgr
from odradek.coordinator import records as rec
from odradek.coordinator.batches import CoordinatorRecord
from odradek.coordinator.classic_group import (
    ClassicGroup,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
)
from odradek.coordinator.config import GroupCoordinatorConfig
from odradek.coordinator.consumer_group import ConsumerGroup
from odradek.coordinator.hashing import partition_for
from odradek.protocol.errors import ErrorCode

Group = ClassicGroup | ConsumerGroup


class GroupMetadataManager:
    def __init__(self, config: GroupCoordinatorConfig, records: list[CoordinatorRecord]) -> None:
        self.config = config
        self.groups: dict[str, Group] = {}
        self._records = records

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def get_or_create_classic(self, group_id: str, now_ms: int) -> ClassicGroup:
        """The group, created Empty if unknown; the caller has checked it is not a consumer group."""
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, now_ms)
        assert isinstance(group, ClassicGroup)
        return group

    # ---- records ----------------------------------------------------------------------------

    def store_classic(self, group: ClassicGroup) -> None:
        """Queue the group's GroupMetadata record (a tombstone once it is Dead)."""
        key = rec.encode_group_metadata_key(rec.GroupMetadataKey(group.group_id))
        value = None
        if group.state is not GroupState.DEAD:
            value = rec.encode_group_metadata_value(
                rec.GroupMetadataValue(
                    protocol_type=group.protocol_type or "",
                    generation=group.generation_id,
                    protocol=group.protocol_name,
                    leader=group.leader_id if group.members else None,
                    current_state_timestamp=group.state_timestamp_ms,
                    members=[
                        rec.MemberMetadata(
                            m.member_id,
                            m.client_id,
                            m.client_host,
                            m.rebalance_timeout_ms,
                            m.session_timeout_ms,
                            m.metadata(group.protocol_name) if group.protocol_name else b"",
                            m.assignment,
                            m.group_instance_id,
                        )
                        for m in group.members.values()
                    ],
                )
            )
        self._records.append(CoordinatorRecord(self.partition_for(group.group_id), key, value))

    def store_consumer(
        self,
        group: ConsumerGroup,
        deleted: bool = False,
        only_members: Collection[str] | None = None,
    ) -> None:
        """Queue the consumer group's records that changed since last written (tombstones if
        ``deleted``); ``only_members`` limits the member records compared."""
        partition = self.partition_for(group.group_id)
        for key, value in cgr.changes(group, deleted, only_members):
            self._records.append(CoordinatorRecord(partition, key, value))

    def drop_classic_metadata(self, group: ClassicGroup, now_ms: int) -> None:
        group.transition_to(GroupState.DEAD, now_ms)
        self.store_classic(group)

    def drop(self, group: Group, now_ms: int) -> None:
        """The group is Dead: tombstone its metadata records and forget it."""
        if isinstance(group, ClassicGroup):
            self.drop_classic_metadata(group, now_ms)
        else:
            self.store_consumer(group, deleted=True)
        del self.groups[group.group_id]

    def forget_keeping_offsets(self, group: Group, now_ms: int) -> None:
        """The group's metadata is gone; its committed offsets live on in an Empty classic group."""
        if group.offsets:
            empty = ClassicGroup(group.group_id, now_ms)
            empty.offsets = group.offsets
            self.groups[group.group_id] = empty
        else:
            del self.groups[group.group_id]

    # ---- replay ------------------------------------------------------------------------------

    def replay_classic(self, group_id: str, value: bytes | None, now_ms: int) -> None:
        """A GroupMetadata record read back. A loaded group's members get a fresh session, as
        Kafka does on coordinator failover, so they either heartbeat in time or expire normally."""
        old = self.groups.get(group_id)
        if value is None:
            if isinstance(old, ClassicGroup):
                self.forget_keeping_offsets(old, now_ms)
            return
        v = rec.decode_group_metadata_value(value)
        group = ClassicGroup(
            group_id, v.current_state_timestamp if v.current_state_timestamp >= 0 else now_ms
        )
        if old is not None:
            group.offsets = old.offsets
        group.generation_id = v.generation
        group.protocol_name = v.protocol
        for m in v.members:
            group.add_member(
                Member(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout,
                    m.session_timeout,
                    v.protocol_type,
                    [(v.protocol or "", m.subscription)],
                    m.assignment,
                    session_deadline_ms=now_ms + m.session_timeout,
                )
            )
        group.leader_id = v.leader if v.members else None
        group.protocol_type = v.protocol_type or None
        group.state = GroupState.STABLE if v.members else GroupState.EMPTY
        self.groups[group_id] = group

    def replay_consumer(
        self, k: rec.ConsumerGroupKey, key: bytes, value: bytes | None, now_ms: int
    ) -> None:
        """One of a consumer group's records read back (consumer_group_records.replay)."""
        group = self.groups.get(k.group)
        if k.record_type == rec.GROUP_EPOCH and value is None:
            # The group's last record: it was deleted, or became a classic group (offsets stay).
            if isinstance(group, ConsumerGroup):
                self.forget_keeping_offsets(group, now_ms)
            return
        if not isinstance(group, ConsumerGroup):
            converted = ConsumerGroup(k.group, now_ms)
            if group is not None:
                converted.offsets = group.offsets
            self.groups[k.group] = group = converted
        cgr.replay(group, k, key, value, self.config.group_consumer_session_timeout_ms, now_ms)

    def group_ids_in(self, partition: int) -> list[str]:
        """The groups of one __consumer_offsets partition."""
        return [gid for gid in self.groups if self.partition_for(gid) == partition]

    def unload_partition(self, partition: int) -> list[str]:
        """Forget the groups of one __consumer_offsets partition (another broker leads it now).

        Members waiting on a join or sync are answered NOT_COORDINATOR, as Kafka's onUnloaded
        does, so they look the coordinator up again. Returns the ids of the groups dropped.
        """
        dropped = self.group_ids_in(partition)
        for gid in dropped:
            group = self.groups.pop(gid)
            if isinstance(group, ClassicGroup):
                for m in group.members.values():
                    if m.awaiting_join is not None:
                        join, m.awaiting_join = m.awaiting_join, None
                        join(JoinResult(ErrorCode.not_coordinator, member_id=m.member_id))
                    if m.awaiting_sync is not None:
                        sync, m.awaiting_sync = m.awaiting_sync, None
                        sync(SyncResult(ErrorCode.not_coordinator))
        return dropped

    # ---- timers ------------------------------------------------------------------------------

    def deadlines(self, group: Group) -> list[int]:
        """When something is due in the group: session or revocation ends, the join phase ends,
        a KIP-394 member id handed out expires."""
        if isinstance(group, ConsumerGroup):
            return [m.session_deadline_ms for m in group.members.values()] + [
                m.revocation_deadline_ms
                for m in group.members.values()
                if m.revocation_deadline_ms is not None
            ]
        deadlines = list(group.pending_members.values())
        if group.rebalance_deadline_ms is not None:
            deadlines.append(group.rebalance_deadline_ms)
        deadlines.extend(
            m.session_deadline_ms for m in group.members.values() if m.awaiting_join is None
        )
        return deadlines

    def next_deadline_ms(self) -> int | None:
        return min((min(d) for g in self.groups.values() if (d := self.deadlines(g))), default=None)

    def due_groups(self, now_ms: int) -> list[str]:
        return [
            gid for gid, g in self.groups.items() if any(d <= now_ms for d in self.deadlines(g))
        ]

    # ---- snapshots ---------------------------------------------------------------------------

    def snapshot(self, group_ids: Iterable[str]) -> dict[str, Group | None]:
        """Copies of these groups as they are now, for ``restore`` if their records cannot be written
        (Kafka reverts to its timeline snapshot in that case). Waiting callbacks are shared, not copied."""
        return {gid: _copy_group(self.groups.get(gid)) for gid in group_ids}

    def restore(self, snapshot: dict[str, Group | None]) -> None:
        """Put the groups back as snapshotted and drop the records queued since."""
        self._records.clear()
        for gid, group in snapshot.items():
            if group is None:
                self.groups.pop(gid, None)
            else:
                self.groups[gid] = group

    # ---- admin -------------------------------------------------------------------------------

    def list_groups(
        self, groups: Iterable[Group], states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> list[tuple[str, str, str, str]]:
        """(group id, protocol type, state, group type) of ``groups`` not Dead, as Kafka's
        ListGroups: the state and type filters (empty: all) are case-insensitive; types are
        "classic" and "consumer"."""
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        listed = []
        for g in groups:
            if g.state is GroupState.DEAD:
                continue
            consumer = isinstance(g, ConsumerGroup)
            state = g.state_name if isinstance(g, ConsumerGroup) else g.state.value
            group_type = "consumer" if consumer else "classic"
            if (not wanted_states or state.lower() in wanted_states) and (
                not wanted_types or group_type in wanted_types
            ):
                listed.append((g.group_id, g.protocol_type or "", state, group_type))
        return listed


def _copy_group(group: Group | None) -> Group | None:
    """A deep copy, except that the committed offsets (immutable values, often many) are copied
    shallowly: a snapshot costs one dict copy of them instead of one deep copy per offset.
    Consumer groups copy themselves field by field (no callbacks to share, many small sets)."""
    if group is None:
        return None
    if isinstance(group, ConsumerGroup):
        return group.copy()
    offsets, group.offsets = group.offsets, {}
    try:
        copied = copy.deepcopy(group)
    finally:
        group.offsets = offsets
    copied.offsets = dict(offsets)
    return copied
