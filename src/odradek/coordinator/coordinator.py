"""GroupCoordinator: the sans-I/O core of the classic group protocol and offsets.

Every method takes ``now_ms``; nothing sleeps or does I/O. A JoinGroup or
SyncGroup that must wait registers a callback, which a later call (another
member's join, a leave, or ``poll(now_ms)`` once a deadline passes) invokes
with the result; the asyncio shell passes ``future.set_result`` and re-arms one
timer at ``next_deadline_ms()``. State changes that Kafka persists are queued as
__consumer_offsets records (``drain_records()``) for the shell to append.
"""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass

from odradek.coordinator import consumer_group_records as cgr
from odradek.coordinator import embedded_protocol as ep
from odradek.coordinator import records as rec
from odradek.coordinator.assignors import ASSIGNORS, Assignment
from odradek.coordinator.config import GroupCoordinatorConfig
from odradek.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    compile_regex,
    copy_assignment,
    resolve_regex,
    union,
    without,
)
from odradek.coordinator.group import (
    ClassicGroup,
    GroupState,
    JoinCallback,
    JoinResult,
    Member,
    SyncCallback,
    SyncResult,
)
from odradek.coordinator.hashing import partition_for
from odradek.coordinator.offsets import OffsetAndMetadata
from odradek.protocol.errors import ErrorCode

OFFSETS_TOPIC = "__consumer_offsets"
#: ConsumerGroupHeartbeat member epochs of a member leaving for good, and of a static member leaving
#: for now (its instance keeps the assignment until its session ends).
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


@dataclass(frozen=True, slots=True)
class OffsetRecord:
    """One record for __consumer_offsets: value None is a tombstone."""

    partition: int
    key: bytes
    value: bytes | None


@dataclass(slots=True)
class ConsumerHeartbeatResult:
    error: int
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    #: The member's full assignment when it changed since last sent, else None.
    assignment: Assignment | None = None
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    expire_timestamp_ms: int = -1


class GroupCoordinator:
    def __init__(self, config: GroupCoordinatorConfig | None = None) -> None:
        self.config = config or GroupCoordinatorConfig()
        self.groups: dict[str, ClassicGroup | ConsumerGroup] = {}
        self._records: list[OffsetRecord] = []
        self._last_retention_check_ms: int | None = None

    # ---- placement and persistence -------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def drain_records(self) -> list[OffsetRecord]:
        out, self._records = self._records, []
        return out

    def _store_group(self, group: ClassicGroup) -> None:
        key = rec.encode_group_metadata_key(rec.GroupMetadataKey(group.group_id))
        if group.state is GroupState.DEAD:
            value = None
        else:
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
        self._records.append(OffsetRecord(self.partition_for(group.group_id), key, value))

    def _store_offset(
        self, group_id: str, topic: str, partition: int, om: OffsetAndMetadata | None
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
        self._records.append(OffsetRecord(self.partition_for(group_id), key, value))

    def load_record(self, key: bytes, value: bytes | None, now_ms: int) -> None:
        """Replay one __consumer_offsets record at start-up; the last record for a key wins.

        A loaded group's members get a fresh session, as Kafka does on coordinator
        failover, so they either heartbeat in time or are expired normally.
        """
        k = rec.decode_key(key)
        if isinstance(k, rec.OffsetCommitKey):
            if value is None:
                group = self.groups.get(k.group)
                if group is not None:
                    group.offsets.pop((k.topic, k.partition), None)
                return
            v = rec.decode_offset_commit_value(value)
            group = self._get_or_create(k.group, now_ms)
            group.offsets[(k.topic, k.partition)] = OffsetAndMetadata(
                v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp
            )
            return
        if isinstance(k, rec.ConsumerGroupKey):
            self._load_consumer_group_record(k, key, value, now_ms)
            return
        if value is None:
            old = self.groups.get(k.group)
            if isinstance(old, ClassicGroup):
                self._forget_group_keeping_offsets(old, now_ms)
            return
        v = rec.decode_group_metadata_value(value)
        old = self.groups.get(k.group)
        group = ClassicGroup(
            k.group, v.current_state_timestamp if v.current_state_timestamp >= 0 else now_ms
        )
        if old is not None:
            group.offsets = old.offsets
        group.generation_id = v.generation
        group.protocol_type = v.protocol_type or None
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
        self.groups[k.group] = group

    def _load_consumer_group_record(
        self, k: rec.ConsumerGroupKey, key: bytes, value: bytes | None, now_ms: int
    ) -> None:
        group = self.groups.get(k.group)
        if k.record_type == rec.GROUP_EPOCH and value is None:
            # The group's last record: it was deleted, or became a classic group (offsets stay).
            if isinstance(group, ConsumerGroup):
                self._forget_group_keeping_offsets(group, now_ms)
            return
        if not isinstance(group, ConsumerGroup):
            converted = ConsumerGroup(k.group, now_ms)
            if group is not None:
                converted.offsets = group.offsets
            self.groups[k.group] = group = converted
        cgr.replay(group, k, key, value, self.config.group_consumer_session_timeout_ms, now_ms)

    def _forget_group_keeping_offsets(
        self, group: ClassicGroup | ConsumerGroup, now_ms: int
    ) -> None:
        if group.offsets:
            empty = ClassicGroup(group.group_id, now_ms)
            empty.offsets = group.offsets
            self.groups[group.group_id] = empty
        else:
            del self.groups[group.group_id]

    # ---- helpers ------------------------------------------------------------------------

    def _get_or_create(self, group_id: str, now_ms: int) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, now_ms)
        return group

    def _fenced(self, group: ClassicGroup, member_id: str, instance_id: str | None) -> bool:
        """A static member whose instance id now belongs to another member id is a zombie (KIP-345)."""
        if instance_id is None:
            return False
        current = group.static_members.get(instance_id)
        return current is not None and current != member_id

    def _new_member_id(self, client_id: str, instance_id: str | None) -> str:
        return f"{instance_id or client_id}-{uuid.uuid4()}"

    def _heartbeat(self, member: Member, now_ms: int) -> None:
        member.session_deadline_ms = now_ms + member.session_timeout_ms

    # ---- JoinGroup ----------------------------------------------------------------------

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
        topics: Mapping[str, tuple[uuid.UUID, int]] | None = None,
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
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                callback(JoinResult(ErrorCode.unknown_member_id, member_id=member_id))
                return
            group = self._get_or_create(group_id, now_ms)
        if isinstance(group, ConsumerGroup):
            if group.members:
                callback(
                    self._classic_join_consumer_group(
                        group,
                        member_id,
                        group_instance_id,
                        require_known_member_id,
                        client_id,
                        client_host,
                        protocol_type,
                        protocols,
                        session_timeout_ms,
                        rebalance_timeout_ms,
                        topics or {},
                        now_ms,
                    )
                )
                return
            # An empty consumer-protocol group becomes a classic one, keeping its offsets.
            classic = ClassicGroup(group_id, now_ms)
            classic.offsets = group.offsets
            self._store_consumer_group(group, deleted=True)
            self.groups[group_id] = group = classic
        if group.state is GroupState.DEAD:
            callback(JoinResult(ErrorCode.coordinator_not_available, member_id=member_id))
            return
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            callback(JoinResult(ErrorCode.inconsistent_group_protocol, member_id=member_id))
            return
        args = (
            client_id,
            client_host,
            protocol_type,
            protocols,
            session_timeout_ms,
            rebalance_timeout_ms,
        )
        if not member_id:
            self._join_unknown_member(
                group, group_instance_id, require_known_member_id, args, callback, now_ms
            )
        else:
            self._join_known_member(group, member_id, group_instance_id, args, callback, now_ms)
        if (
            not group.members
            and not group.pending_members
            and group.state is GroupState.EMPTY
            and not group.offsets
        ):
            del self.groups[group_id]

    def _join_unknown_member(
        self, group, instance_id, require_known_member_id, args, callback, now_ms
    ) -> None:
        client_id = args[0]
        if len(group.members) + len(group.pending_members) >= self.config.group_max_size:
            callback(JoinResult(ErrorCode.group_max_size_reached))
            return
        new_id = self._new_member_id(client_id, instance_id)
        if instance_id is not None and instance_id in group.static_members:
            self._rejoin_static_member(group, instance_id, new_id, args, callback, now_ms)
            return
        if instance_id is None and require_known_member_id:
            # KIP-394: hand out the id and wait for the member to come back with it.
            group.pending_members[new_id] = now_ms + args[4]
            callback(JoinResult(ErrorCode.member_id_required, member_id=new_id))
            return
        self._add_member_and_rebalance(group, new_id, instance_id, args, callback, now_ms)

    def _rejoin_static_member(self, group, instance_id, new_id, args, callback, now_ms) -> None:
        """A known group.instance.id rejoins with no member id: fence the old id, keep the assignment."""
        old_id = group.static_members[instance_id]
        old = group.members[old_id]
        # The zombie with the old id gets FENCED_INSTANCE_ID for whatever it is waiting on.
        if old.awaiting_join is not None:
            old.awaiting_join(JoinResult(ErrorCode.fenced_instance_id, member_id=old_id))
            old.awaiting_join = None
        if old.awaiting_sync is not None:
            old.awaiting_sync(SyncResult(ErrorCode.fenced_instance_id))
            old.awaiting_sync = None
        member = group.replace_static_member(instance_id, old_id, new_id)
        member.client_id, member.client_host = args[0], args[1]
        member.protocols = list(args[3])
        member.session_timeout_ms, member.rebalance_timeout_ms = args[4], args[5]
        self._heartbeat(member, now_ms)
        # As Kafka: only a change of the group's selected protocol rebalances a Stable group. New
        # metadata alone does not (a restarted consumer reports no owned partitions, its old
        # instance did: that difference must not disturb the other members).
        if group.state is GroupState.STABLE and group.select_protocol() == group.protocol_name:
            # No rebalance. A rejoining leader gets the members (KIP-814: v9+ also tells it to
            # skip the assignment; an older leader's SyncGroup in Stable just returns what it has).
            is_leader = group.leader_id == new_id
            self._store_group(group)
            callback(
                JoinResult(
                    ErrorCode.none,
                    group.generation_id,
                    group.protocol_type,
                    group.protocol_name,
                    group.leader_id or "",
                    new_id,
                    self._member_list(group) if is_leader else [],
                    skip_assignment=is_leader,
                )
            )
            return
        member.awaiting_join = callback
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, now_ms)
        else:
            self._maybe_complete_join(group, now_ms)

    def _join_known_member(self, group, member_id, instance_id, args, callback, now_ms) -> None:
        if member_id in group.pending_members:
            self._add_member_and_rebalance(group, member_id, instance_id, args, callback, now_ms)
            return
        if self._fenced(group, member_id, instance_id):
            callback(JoinResult(ErrorCode.fenced_instance_id, member_id=member_id))
            return
        member = group.members.get(member_id)
        if member is None or group.state is GroupState.EMPTY:
            callback(JoinResult(ErrorCode.unknown_member_id, member_id=member_id))
            return
        protocols = list(args[3])
        same = member.protocols == protocols
        self._heartbeat(member, now_ms)
        if group.state is GroupState.PREPARING_REBALANCE:
            self._update_member(member, args, callback)
            self._maybe_complete_join(group, now_ms)
        elif group.state is GroupState.COMPLETING_REBALANCE and same:
            # The member lost the JoinGroup response: send it again.
            callback(self._join_result(group, member_id))
        elif group.state is GroupState.STABLE and same and group.leader_id != member_id:
            callback(self._join_result(group, member_id))
        else:
            self._update_member(member, args, callback)
            self._prepare_rebalance(group, now_ms)

    def _update_member(self, member: Member, args, callback: JoinCallback) -> None:
        member.client_id, member.client_host = args[0], args[1]
        member.protocols = list(args[3])
        member.session_timeout_ms, member.rebalance_timeout_ms = args[4], args[5]
        if member.awaiting_join is not None and member.awaiting_join is not callback:
            # A second join from the same member replaces the first; the first gets nothing useful.
            member.awaiting_join(
                JoinResult(ErrorCode.rebalance_in_progress, member_id=member.member_id)
            )
        member.awaiting_join = callback

    def _add_member_and_rebalance(
        self, group, member_id, instance_id, args, callback, now_ms
    ) -> None:
        client_id, client_host, protocol_type, protocols, session_timeout, rebalance_timeout = args
        member = Member(
            member_id,
            instance_id,
            client_id,
            client_host,
            rebalance_timeout,
            session_timeout,
            protocol_type,
            list(protocols),
            awaiting_join=callback,
        )
        self._heartbeat(member, now_ms)
        group.add_member(member)
        if group.state is GroupState.PREPARING_REBALANCE:
            if group.in_initial_delay:
                # Each new member during the initial delay extends it, up to the rebalance timeout.
                delay = min(
                    self.config.group_initial_rebalance_delay_ms, group.initial_delay_remaining_ms
                )
                group.initial_delay_remaining_ms -= delay
                if delay > 0:
                    group.rebalance_deadline_ms = now_ms + delay
            else:
                self._maybe_complete_join(group, now_ms)
        else:
            self._prepare_rebalance(group, now_ms)

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            for m in group.members.values():
                m.assignment = b""
                if m.awaiting_sync is not None:
                    m.awaiting_sync(SyncResult(ErrorCode.rebalance_in_progress))
                    m.awaiting_sync = None
        was_empty = group.state is GroupState.EMPTY
        group.transition_to(GroupState.PREPARING_REBALANCE, now_ms)
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        delay = self.config.group_initial_rebalance_delay_ms
        if was_empty and delay > 0:
            group.in_initial_delay = True
            group.initial_delay_remaining_ms = max(timeout - delay, 0)
            group.rebalance_deadline_ms = now_ms + min(delay, timeout)
        else:
            group.in_initial_delay = False
            group.initial_delay_remaining_ms = 0
            group.rebalance_deadline_ms = now_ms + timeout
            self._maybe_complete_join(group, now_ms)

    def _maybe_complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and not group.in_initial_delay
            and group.all_members_joined()
            and group.rebalance_deadline_ms is not None
        ):
            self._complete_join(group, now_ms)

    def _complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        """End the join phase: drop members that did not rejoin, start the next generation."""
        for m in [m for m in group.members.values() if m.awaiting_join is None]:
            group.remove_member(m.member_id)
        group.rebalance_deadline_ms = None
        group.in_initial_delay = False
        group.initial_delay_remaining_ms = 0
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.transition_to(GroupState.EMPTY, now_ms)
            self._store_group(group)
            return
        group.protocol_name = group.select_protocol()
        group.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        for m in group.members.values():
            callback, m.awaiting_join = m.awaiting_join, None
            self._heartbeat(m, now_ms)
            assert callback is not None
            callback(self._join_result(group, m.member_id))

    def _member_list(self, group: ClassicGroup) -> list[tuple[str, str | None, bytes]]:
        assert group.protocol_name is not None
        return [
            (m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
            for m in group.members.values()
        ]

    def _join_result(self, group: ClassicGroup, member_id: str) -> JoinResult:
        return JoinResult(
            ErrorCode.none,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            member_id,
            self._member_list(group) if member_id == group.leader_id else [],
        )

    # ---- SyncGroup / Heartbeat / LeaveGroup ----------------------------------------------

    def _check_member(
        self, group_id, member_id, instance_id, generation_id
    ) -> tuple[int, ClassicGroup | None]:
        group = self.groups.get(group_id)
        if not isinstance(group, ClassicGroup) or group.state is GroupState.DEAD:
            return ErrorCode.unknown_member_id, None
        if self._fenced(group, member_id, instance_id):
            return ErrorCode.fenced_instance_id, group
        if member_id not in group.members:
            return ErrorCode.unknown_member_id, group
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation, group
        return ErrorCode.none, group

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
        topics: Mapping[str, tuple[uuid.UUID, int]] | None = None,
    ) -> None:
        consumer_group = self.groups.get(group_id)
        if isinstance(consumer_group, ConsumerGroup):
            callback(
                self._classic_sync_consumer_group(
                    consumer_group,
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
        error, group = self._check_member(group_id, member_id, group_instance_id, generation_id)
        if error:
            callback(SyncResult(error))
            return
        assert group is not None
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            callback(SyncResult(ErrorCode.inconsistent_group_protocol))
            return
        member = group.members[member_id]
        self._heartbeat(member, now_ms)
        if group.state is GroupState.PREPARING_REBALANCE:
            callback(SyncResult(ErrorCode.rebalance_in_progress))
        elif group.state is GroupState.COMPLETING_REBALANCE:
            member.awaiting_sync = callback
            if member_id == group.leader_id:
                for m in group.members.values():
                    m.assignment = assignments.get(m.member_id, b"")
                group.transition_to(GroupState.STABLE, now_ms)
                self._store_group(group)
                for m in group.members.values():
                    if m.awaiting_sync is not None:
                        cb, m.awaiting_sync = m.awaiting_sync, None
                        cb(
                            SyncResult(
                                ErrorCode.none,
                                m.assignment,
                                group.protocol_type,
                                group.protocol_name,
                            )
                        )
        elif group.state is GroupState.STABLE:
            callback(
                SyncResult(
                    ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name
                )
            )
        else:
            callback(SyncResult(ErrorCode.unknown_member_id))

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        now_ms: int,
    ) -> int:
        consumer_group = self.groups.get(group_id)
        if isinstance(consumer_group, ConsumerGroup):
            return self._classic_heartbeat_consumer_group(
                consumer_group, member_id, group_instance_id, generation_id, now_ms
            )
        error, group = self._check_member(group_id, member_id, group_instance_id, generation_id)
        if error:
            return error
        assert group is not None
        if group.state is GroupState.EMPTY:
            return ErrorCode.unknown_member_id
        self._heartbeat(group.members[member_id], now_ms)
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave_group(
        self, group_id: str, members: list[tuple[str, str | None]], now_ms: int
    ) -> tuple[int, list[int]]:
        """Remove members given as (member id, group instance id); per-member error codes."""
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return ErrorCode.none, [
                self._classic_leave_consumer_group(group, m, i, now_ms) for m, i in members
            ]
        if not isinstance(group, ClassicGroup) or group.state is GroupState.DEAD:
            return ErrorCode.unknown_member_id, [ErrorCode.unknown_member_id] * len(members)
        errors = []
        removed = False
        for member_id, instance_id in members:
            if instance_id is not None:
                current = group.static_members.get(instance_id)
                if current is None:
                    errors.append(ErrorCode.unknown_member_id)
                    continue
                if member_id and member_id != current:
                    errors.append(ErrorCode.fenced_instance_id)
                    continue
                member_id = current
            if member_id in group.pending_members:
                del group.pending_members[member_id]
                errors.append(ErrorCode.none)
                removed = True
                continue
            if member_id not in group.members:
                errors.append(ErrorCode.unknown_member_id)
                continue
            self._remove_member(group, member_id)
            errors.append(ErrorCode.none)
            removed = True
        if removed:
            self._after_member_removed(group, now_ms)
        return ErrorCode.none, errors

    def _remove_member(self, group: ClassicGroup, member_id: str) -> None:
        member = group.remove_member(member_id)
        if member is not None:
            if member.awaiting_join is not None:
                member.awaiting_join(JoinResult(ErrorCode.unknown_member_id, member_id=member_id))
            if member.awaiting_sync is not None:
                member.awaiting_sync(SyncResult(ErrorCode.unknown_member_id))

    def _after_member_removed(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now_ms)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group, now_ms)

    # ---- timers ---------------------------------------------------------------------------

    def _group_deadlines(self, group: ClassicGroup | ConsumerGroup) -> list[int]:
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
        """The earliest moment ``poll`` has something to do, or None."""
        deadlines = [min(d) for g in self.groups.values() if (d := self._group_deadlines(g))]
        if self._last_retention_check_ms is not None:
            deadlines.append(
                self._last_retention_check_ms + self.config.offsets_retention_check_interval_ms
            )
        return min(deadlines, default=None)

    def due_groups(self, now_ms: int) -> list[str]:
        """Groups with a deadline at or before ``now_ms`` (each is then handled by ``poll_group``)."""
        return [
            gid
            for gid, g in self.groups.items()
            if any(d <= now_ms for d in self._group_deadlines(g))
        ]

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

    def poll(self, now_ms: int) -> None:
        """Fire every deadline that has passed: session expiry, join phase end, offset retention."""
        for group_id in self.due_groups(now_ms):
            self.poll_group(group_id, now_ms)
        if self.retention_due(now_ms):
            self.expire_offsets(now_ms)

    def poll_group(self, group_id: str, now_ms: int) -> None:
        """One group's passed deadlines: pending and session expiry, end of the join phase."""
        group = self.groups.get(group_id)
        if group is None:
            return
        if isinstance(group, ConsumerGroup):
            self._expire_consumer_members(group, now_ms)
            return
        for pending, deadline in list(group.pending_members.items()):
            if deadline <= now_ms:
                del group.pending_members[pending]
                if group.state is GroupState.PREPARING_REBALANCE:
                    self._maybe_complete_join(group, now_ms)
        expired = [
            m.member_id
            for m in group.members.values()
            if m.awaiting_join is None and m.session_deadline_ms <= now_ms
        ]
        for member_id in expired:
            self._remove_member(group, member_id)
        if expired:
            self._after_member_removed(group, now_ms)
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.rebalance_deadline_ms is not None
            and group.rebalance_deadline_ms <= now_ms
        ):
            self._complete_join(group, now_ms)

    def _expire_consumer_members(self, group: ConsumerGroup, now_ms: int) -> None:
        """Fence members whose session ended, or that did not revoke within their rebalance timeout."""
        for member in list(group.members.values()):
            if self.groups.get(group.group_id) is not group:
                return  # downgraded to a classic group by the previous fence
            if member.session_deadline_ms <= now_ms or (
                member.revocation_deadline_ms is not None
                and member.revocation_deadline_ms <= now_ms
            ):
                self._fence_consumer_member(group, member, None, now_ms)

    # ---- offsets ---------------------------------------------------------------------------

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
        if not group_id:
            return ErrorCode.invalid_group_id, [ErrorCode.invalid_group_id] * len(offsets)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # Only a simple consumer (no generation) may create a group by committing.
                return ErrorCode.illegal_generation, [ErrorCode.illegal_generation] * len(offsets)
            group = self._get_or_create(group_id, now_ms)
        error = ErrorCode.none
        if isinstance(group, ConsumerGroup):
            error = self._check_consumer_commit(group, member_id, generation_id)
        elif group.state is GroupState.DEAD:
            error = ErrorCode.coordinator_not_available
        elif generation_id < 0 and group.state is GroupState.EMPTY:
            pass
        elif self._fenced(group, member_id, group_instance_id):
            error = ErrorCode.fenced_instance_id
        elif group.state is GroupState.COMPLETING_REBALANCE:
            error = ErrorCode.rebalance_in_progress
        elif member_id not in group.members:
            error = ErrorCode.unknown_member_id
        elif generation_id != group.generation_id:
            error = ErrorCode.illegal_generation
        if error:
            return error, [error] * len(offsets)
        if isinstance(group, ClassicGroup) and member_id in group.members:
            self._heartbeat(group.members[member_id], now_ms)
        results = []
        for c in offsets:
            metadata = c.metadata or ""
            if len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                results.append(ErrorCode.offset_metadata_too_large)
                continue
            om = OffsetAndMetadata(
                c.offset, c.leader_epoch, metadata, now_ms, c.expire_timestamp_ms
            )
            group.offsets[(c.topic, c.partition)] = om
            self._store_offset(group_id, c.topic, c.partition, om)
            results.append(ErrorCode.none)
        return ErrorCode.none, results

    def _check_consumer_commit(
        self, group: ConsumerGroup, member_id: str, member_epoch: int
    ) -> int:
        """KIP-848: a commit names a member and its current epoch (or none at all in an empty group);
        a classic member's generation is its member epoch (ILLEGAL_GENERATION when it is not)."""
        if member_epoch < 0 and not member_id and not group.members:
            return ErrorCode.none
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.member_epoch:
            return (
                ErrorCode.illegal_generation
                if member.classic is not None
                else ErrorCode.stale_member_epoch
            )
        return ErrorCode.none

    def check_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        """OffsetFetch v9+ names the consumer-group member asking (KIP-848); an admin names none.
        As Kafka's ConsumerGroup.validateOffsetFetch: UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH."""
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup) or (member_id is None and member_epoch < 0):
            return ErrorCode.none
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.member_epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]] | None
    ) -> dict[tuple[str, int], OffsetAndMetadata | None]:
        """OffsetFetch: the committed offsets asked for (None = every committed one)."""
        group = self.groups.get(group_id)
        stored = group.offsets if group is not None and group.state is not GroupState.DEAD else {}
        if partitions is None:
            return dict(sorted(stored.items()))
        return {tp: stored.get(tp) for tp in partitions}

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]], now_ms: int
    ) -> tuple[int, list[int]]:
        """OffsetDelete: refused per partition while members consume its topic."""
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.group_id_not_found, []
        if group.state is not GroupState.EMPTY and group.protocol_type != "consumer":
            return ErrorCode.non_empty_group, []
        subscribed = (
            set() if group.state is GroupState.EMPTY else group.subscribed_topics() or set()
        )
        errors = []
        for topic, partition in partitions:
            if topic in subscribed:
                errors.append(ErrorCode.group_subscribed_to_topic)
                continue
            if group.offsets.pop((topic, partition), None) is not None:
                self._store_offset(group_id, topic, partition, None)
            errors.append(ErrorCode.none)
        return ErrorCode.none, errors

    def expire_offsets(self, now_ms: int) -> int:
        """Offset retention over every group (see ``expire_group_offsets``); the number removed."""
        return sum(self.expire_group_offsets(gid, now_ms) for gid in list(self.groups))

    def expire_group_offsets(self, group_id: str, now_ms: int) -> int:
        """offsets.retention.minutes as Kafka 2.1+: count from when the group became Empty;
        for an active consumer group, only offsets of topics it no longer subscribes to expire
        (counted from their commit). Empty groups left with no offsets become Dead."""
        group = self.groups.get(group_id)
        if group is None:
            return 0
        retention = self.config.offsets_retention_ms
        removed = 0
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
                self._store_offset(group.group_id, topic, partition, None)
                removed += 1
        if group.state is GroupState.EMPTY and not group.offsets and not group.pending_members:
            self._drop_group(group, now_ms)
        return removed

    # ---- snapshots ---------------------------------------------------------------------------

    def snapshot(self, group_ids: Iterable[str]) -> dict[str, ClassicGroup | ConsumerGroup | None]:
        """Copies of these groups as they are now, for ``restore`` if their records cannot be written
        (Kafka reverts to its timeline snapshot in that case). Waiting callbacks are shared, not copied."""
        return {gid: _copy_group(self.groups.get(gid)) for gid in group_ids}

    def restore(self, snapshot: dict[str, ClassicGroup | ConsumerGroup | None]) -> None:
        """Put the groups back as snapshotted and drop the records queued since."""
        self._records.clear()
        for gid, group in snapshot.items():
            if group is None:
                self.groups.pop(gid, None)
            else:
                self.groups[gid] = group

    # ---- admin ---------------------------------------------------------------------------

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> list[tuple[str, str, str, str]]:
        """(group id, protocol type, state, group type) of live groups, as Kafka's ListGroups: the
        state and type filters (empty: all) are case-insensitive; types are "classic" and "consumer"."""
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        listed = []
        for g in self.groups.values():
            if g.state is GroupState.DEAD:
                continue
            consumer = isinstance(g, ConsumerGroup)
            state = g.state_name if consumer else g.state.value
            group_type = "consumer" if consumer else "classic"
            if (not wanted_states or state.lower() in wanted_states) and (
                not wanted_types or group_type in wanted_types
            ):
                listed.append((g.group_id, g.protocol_type or "", state, group_type))
        return listed

    def _drop_group(self, group: ClassicGroup | ConsumerGroup, now_ms: int) -> None:
        """The group is Dead: tombstone its metadata record and forget it."""
        if isinstance(group, ClassicGroup):
            self._drop_classic_metadata(group, now_ms)
        else:
            self._store_consumer_group(group, deleted=True)
        del self.groups[group.group_id]

    def _drop_classic_metadata(self, group: ClassicGroup, now_ms: int) -> None:
        group.transition_to(GroupState.DEAD, now_ms)
        self._store_group(group)

    def delete_groups(self, group_ids: list[str], now_ms: int) -> dict[str, int]:
        results = {}
        for gid in group_ids:
            group = self.groups.get(gid)
            if not gid:
                results[gid] = ErrorCode.invalid_group_id
            elif group is None or group.state is GroupState.DEAD:
                results[gid] = ErrorCode.group_id_not_found
            elif group.state is not GroupState.EMPTY:
                results[gid] = ErrorCode.non_empty_group
            else:
                for topic, partition in list(group.offsets):
                    self._store_offset(gid, topic, partition, None)
                group.offsets.clear()
                self._drop_group(group, now_ms)
                results[gid] = ErrorCode.none
        return results

    # ---- consumer protocol (KIP-848) ---------------------------------------------------------

    def _store_consumer_group(
        self,
        group: ConsumerGroup,
        deleted: bool = False,
        only_members: Collection[str] | None = None,
    ) -> None:
        partition = self.partition_for(group.group_id)
        for key, value in cgr.changes(group, deleted, only_members):
            self._records.append(OffsetRecord(partition, key, value))

    def _validate_consumer_heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        instance_id: str | None,
        rack_id: str | None,
        rebalance_timeout_ms: int,
        subscribed_topic_names: list[str] | None,
        subscribed_topic_regex: str | None,
        server_assignor: str | None,
        owned: Assignment | None,
        member_id_required: bool,
    ) -> tuple[int, str | None]:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid: (error, message)."""

        def invalid(message: str) -> tuple[int, str]:
            return ErrorCode.invalid_request, message

        if not group_id:
            return invalid("GroupId can't be empty.")
        if instance_id == "":
            return invalid("InstanceId can't be empty.")
        if rack_id == "":
            return invalid("RackId can't be empty.")
        if member_id_required and not member_id:
            return invalid("MemberId can't be empty.")
        if member_epoch > 0 or member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not member_id:
                return invalid("MemberId can't be empty.")
        elif member_epoch == 0:
            if rebalance_timeout_ms == -1:
                return invalid("RebalanceTimeoutMs must be provided in first request.")
            if owned:
                return invalid("TopicPartitions must be empty when (re-)joining.")
            if not subscribed_topic_names and subscribed_topic_regex is None:
                return invalid(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
                )
        elif member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not member_id:
                return invalid("MemberId can't be empty.")
            if instance_id is None:
                return invalid("InstanceId can't be null.")
        else:
            return invalid("MemberEpoch is invalid.")
        if server_assignor is not None and server_assignor not in ASSIGNORS:
            return (
                ErrorCode.unsupported_assignor,
                f"ServerAssignor {server_assignor} is not supported. "
                f"Supported assignors: {', '.join(ASSIGNORS)}.",
            )
        if subscribed_topic_regex is not None:
            try:
                compile_regex(subscribed_topic_regex)
            except re.error as e:
                return (
                    ErrorCode.invalid_regular_expression,
                    f"SubscribedTopicRegex was invalid: {e}",
                )
        return ErrorCode.none, None

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
        topics: Mapping[str, tuple[uuid.UUID, int]],
        now_ms: int,
        subscribed_topic_regex: str | None = None,
        member_id_required: bool = False,
    ) -> ConsumerHeartbeatResult:
        """ConsumerGroupHeartbeat: join (epoch 0), leave (-1, or -2 for a static member that will be
        back), or heartbeat and reconcile. ``member_id_required``: v1+ clients make their own id."""
        interval = self.config.group_consumer_heartbeat_interval_ms
        error, message = self._validate_consumer_heartbeat(
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

        def fail(code: int, text: str | None = None) -> ConsumerHeartbeatResult:
            return ConsumerHeartbeatResult(
                code, member_id, member_epoch, interval, error_message=text
            )

        if error:
            return fail(error, message)
        group = self.groups.get(group_id)
        if (
            isinstance(group, ClassicGroup)
            and group.members
            and member_epoch == 0
            and self._may_upgrade(group)
        ):
            group = self._upgrade(group, topics, now_ms)
        if isinstance(group, ClassicGroup):
            if group.members or group.pending_members or member_epoch != 0:
                return fail(
                    ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group."
                )
            # An empty classic group becomes a consumer group, keeping its offsets.
            converted = ConsumerGroup(group_id, now_ms)
            converted.offsets = group.offsets
            if group.generation_id > 0 or group.protocol_type is not None:
                self._drop_classic_metadata(group, now_ms)
            self.groups[group_id] = group = converted
        if group is None:
            if member_epoch != 0:
                return fail(ErrorCode.group_id_not_found, f"Consumer group {group_id} not found.")
            group = self.groups[group_id] = ConsumerGroup(group_id, now_ms)
        assert isinstance(group, ConsumerGroup)
        if member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._consumer_group_leave(
                group, member_id, member_epoch, instance_id, topics, now_ms, fail
            )
        if (
            member_epoch == 0
            and len(group.members) >= self.config.group_consumer_max_size
            and member_id not in group.members
            and (instance_id is None or group.static_member(instance_id) is None)
        ):
            return fail(
                ErrorCode.group_max_size_reached,
                "The consumer group has reached its maximum capacity of "
                f"{self.config.group_consumer_max_size} members.",
            )
        if not member_id:
            member_id = str(uuid.uuid4())
        before = set(group.members)
        member, error, message = self._consumer_member(
            group, member_id, member_epoch, instance_id, owned, client_id, client_host, now_ms
        )
        if member is None:
            return fail(error, message)
        # A static member's new instance took the place of another member id.
        replaced = set(group.members) != before
        # Whatever changes in this heartbeat bumps the group epoch once.
        changed = member.member_id not in group.members
        if changed:
            group.members[member.member_id] = member
            group.state_timestamp_ms = now_ms
        member.session_deadline_ms = now_ms + self.config.group_consumer_session_timeout_ms
        member.client_id, member.client_host = client_id, client_host
        if rack_id is not None:
            member.rack_id = rack_id
        if rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        if subscribed_topic_names is not None and sorted(subscribed_topic_names) != sorted(
            member.subscribed_topic_names
        ):
            member.subscribed_topic_names = list(subscribed_topic_names)
            changed = True
        if (
            subscribed_topic_regex is not None
            and subscribed_topic_regex != member.subscribed_topic_regex
        ):
            member.subscribed_topic_regex = subscribed_topic_regex or None
            member.regex_topics = None
            changed = True
        if server_assignor is not None:
            member.server_assignor = server_assignor
        changed |= self._resolve_regexes(group, topics)
        metadata = {t: topics[t] for t in group.subscribed_topics() if t in topics}
        if changed or metadata != group.subscribed_metadata:
            group.group_epoch += 1
        retargeted = group.assignment_epoch != group.group_epoch
        if retargeted:
            self._compute_target(group, topics)
        self._reconcile(group, member, owned, now_ms)
        # A plain heartbeat changes this member only; a new target or member touches every record.
        self._store_consumer_group(
            group, only_members=None if retargeted or changed or replaced else (member.member_id,)
        )
        full_request = member_epoch == 0 or (
            rebalance_timeout_ms != -1 and subscribed_topic_names is not None and owned is not None
        )
        assignment = None
        if full_request or member.last_sent != member.to_send:
            assignment = {t: set(ps) for t, ps in member.to_send.items()}
            member.last_sent = assignment
        return ConsumerHeartbeatResult(
            ErrorCode.none, member.member_id, member.member_epoch, interval, assignment
        )

    def _consumer_member(
        self,
        group: ConsumerGroup,
        member_id: str,
        member_epoch: int,
        instance_id: str | None,
        owned: Assignment | None,
        client_id: str,
        client_host: str,
        now_ms: int,
    ) -> tuple[ConsumerMember | None, int, str | None]:
        """The member this heartbeat is from (new or not yet in the group when it joins), else an error.

        As Kafka's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember: a static member rejoining
        under a new member id takes over its instance's assignment, but only once that instance left
        with epoch -2 (else UNRELEASED_INSTANCE_ID).
        """
        session_deadline = now_ms + self.config.group_consumer_session_timeout_ms
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if member_epoch != 0:
                    return (
                        None,
                        ErrorCode.unknown_member_id,
                        f"Member {member_id} is not a member of the group.",
                    )
                return (
                    ConsumerMember(
                        member_id,
                        None,
                        None,
                        client_id,
                        client_host,
                        [],
                        None,
                        -1,
                        session_deadline,
                    ),
                    ErrorCode.none,
                    None,
                )
        else:
            existing = group.static_member(instance_id)
            if member_epoch == 0:
                if existing is None:
                    member = group.members.get(member_id)
                    if member is None:
                        return (
                            ConsumerMember(
                                member_id,
                                instance_id,
                                None,
                                client_id,
                                client_host,
                                [],
                                None,
                                -1,
                                session_deadline,
                            ),
                            ErrorCode.none,
                            None,
                        )
                elif existing.member_id == member_id:
                    member = existing
                else:
                    if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                        return (
                            None,
                            ErrorCode.unreleased_instance_id,
                            (
                                f"Static member {member_id} with instance id {instance_id} cannot join the group "
                                f"because the instance id is owned by {existing.member_id} member."
                            ),
                        )
                    # The new member id takes the place (and assignment) of the one that left.
                    del group.members[existing.member_id]
                    if existing.member_id in group.target:
                        group.target[member_id] = group.target.pop(existing.member_id)
                    existing.member_id = member_id
                    existing.member_epoch = existing.previous_member_epoch = 0
                    existing.last_sent = None
                    group.members[member_id] = existing
                    return existing, ErrorCode.none, None
            else:
                if existing is None:
                    return (
                        None,
                        ErrorCode.unknown_member_id,
                        f"Instance id {instance_id} is unknown.",
                    )
                if existing.member_id != member_id:
                    return (
                        None,
                        ErrorCode.fenced_instance_id,
                        (
                            f"Static member {member_id} with instance id {instance_id} was fenced by member "
                            f"{existing.member_id}."
                        ),
                    )
                member = existing
        if member_epoch == 0:
            # Rejoin with epoch 0 (after a fence): start over, owning nothing.
            member.assigned, member.to_send, member.reported_owned = {}, {}, {}
            member.member_epoch, member.previous_member_epoch, member.last_sent = 0, 0, None
            member.revocation_deadline_ms = None
        elif member_epoch > member.member_epoch or (
            member_epoch < member.member_epoch
            and (
                member_epoch != member.previous_member_epoch
                or not (owned is not None and not without(owned, member.assigned))
            )
        ):
            return (
                None,
                ErrorCode.fenced_member_epoch,
                (
                    f"The consumer group member has a {'greater' if member_epoch > member.member_epoch else 'smaller'} "
                    f"member epoch ({member_epoch}) than the one known by the group coordinator "
                    f"({member.member_epoch}). The member must abandon all its partitions and rejoin."
                ),
            )
        return member, ErrorCode.none, None

    def _consumer_group_leave(
        self,
        group: ConsumerGroup,
        member_id: str,
        member_epoch: int,
        instance_id: str | None,
        topics: Mapping[str, tuple[uuid.UUID, int]],
        now_ms: int,
        fail: Callable[..., ConsumerHeartbeatResult],
    ) -> ConsumerHeartbeatResult:
        interval = self.config.group_consumer_heartbeat_interval_ms
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                return fail(
                    ErrorCode.unknown_member_id, f"Member {member_id} is not a member of the group."
                )
        else:
            member = group.static_member(instance_id)
            if member is None:
                return fail(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
            if member.member_id != member_id:
                return fail(
                    ErrorCode.fenced_instance_id,
                    f"Static member {member_id} with instance id "
                    f"{instance_id} was fenced by member {member.member_id}.",
                )
            if member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # Gone for now, back within its session: keep its assignment for the next instance.
                member.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH
                member.to_send = member.assigned
                member.revocation_deadline_ms = None
                self._store_consumer_group(group, only_members=(member.member_id,))
                return ConsumerHeartbeatResult(
                    ErrorCode.none, member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH, interval
                )
        self._fence_consumer_member(group, member, topics, now_ms)
        return ConsumerHeartbeatResult(ErrorCode.none, member_id, member_epoch, interval)

    def _fence_consumer_member(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        topics: Mapping[str, tuple[uuid.UUID, int]] | None,
        now_ms: int,
    ) -> None:
        """Remove a member (leave, session or rebalance timeout) and bump the group epoch.

        With topic metadata at hand the new target is computed at once; otherwise (timers) on the
        next heartbeat, which carries fresh metadata.
        """
        if group.all_classic_except(member.member_id) and self.config.downgrade_enabled:
            self._downgrade(group, member.member_id, now_ms)
            return
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        group.group_epoch += 1
        group.state_timestamp_ms = now_ms
        if topics is not None:
            self._compute_target(group, topics)
        self._store_consumer_group(group)

    def _resolve_regexes(
        self, group: ConsumerGroup, topics: Mapping[str, tuple[uuid.UUID, int]]
    ) -> bool:
        """Match every member's SubscribedTopicRegex against the topics; True if a resolution changed
        (not counting the first one after a load, whose topics the persisted metadata already holds)."""
        changed = False
        names = sorted(topics)
        for m in group.members.values():
            if m.subscribed_topic_regex is None:
                continue
            resolved = resolve_regex(m.subscribed_topic_regex, names)
            if resolved != m.regex_topics:
                changed |= m.regex_topics is not None
                m.regex_topics = resolved
        return changed

    def _compute_target(
        self, group: ConsumerGroup, topics: Mapping[str, tuple[uuid.UUID, int]]
    ) -> None:
        group.subscribed_metadata = {t: topics[t] for t in group.subscribed_topics() if t in topics}
        subscriptions = {
            m.member_id: {topics[t][0] for t in m.subscribed_topics() if t in topics}
            for m in group.members.values()
        }
        partitions = dict(group.subscribed_metadata.values())
        assignor = ASSIGNORS[group.preferred_assignor()]
        group.target = assignor(
            subscriptions, partitions, {m.member_id: m.assigned for m in group.members.values()}
        )
        group.assignment_epoch = group.group_epoch

    def _reconcile(
        self, group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None, now_ms: int
    ) -> None:
        """Revoke first; once the member confirms, hand it the target partitions nobody else holds.

        ``owned`` is what the member reports owning, None when unchanged since its last report.
        A member asked to revoke must do so within its rebalance timeout or be fenced.
        """
        if owned is not None:
            member.reported_owned = owned
        target = group.target.get(member.member_id, {})
        revoking = without(member.assigned, target)
        if revoking:
            if without(revoking, member.reported_owned) != revoking:
                # Still owned by the member: tell it its assignment without them and wait.
                member.to_send = without(member.assigned, revoking)
                if member.revocation_deadline_ms is None:
                    member.revocation_deadline_ms = now_ms + max(member.rebalance_timeout_ms, 0)
                return
            member.assigned = without(member.assigned, revoking)
        member.revocation_deadline_ms = None
        taken = group.owned_by_others(member.member_id)
        for topic_id, parts in without(target, member.assigned).items():
            free = {p for p in parts if (topic_id, p) not in taken}
            if free:
                member.assigned.setdefault(topic_id, set()).update(free)
        member.to_send = member.assigned
        # Until the member reports otherwise, it owns what it was given.
        member.reported_owned = union(member.reported_owned, member.assigned)
        if member.member_epoch != group.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch

    # ---- classic members of consumer groups, and migration (KIP-848) ------------------------------

    def _may_upgrade(self, group: ClassicGroup) -> bool:
        """Kafka's validateOnlineUpgrade: policy allows it, the members speak the consumer protocol, fit."""
        return (
            self.config.upgrade_enabled
            and group.protocol_type == "consumer"
            and len(group.members) <= self.config.group_consumer_max_size
        )

    def _upgrade(
        self, classic: ClassicGroup, topics: Mapping[str, tuple[uuid.UUID, int]], now_ms: int
    ) -> ConsumerGroup:
        """A consumer-protocol member joins a live classic group: it becomes a consumer group whose
        classic members keep their assignment at member epoch = generation (ConsumerGroup.fromClassicGroup)."""
        for m in classic.members.values():
            if m.awaiting_join is not None:
                m.awaiting_join(JoinResult(ErrorCode.rebalance_in_progress, member_id=m.member_id))
                m.awaiting_join = None
            if m.awaiting_sync is not None:
                m.awaiting_sync(SyncResult(ErrorCode.rebalance_in_progress))
                m.awaiting_sync = None
        group = ConsumerGroup(classic.group_id, now_ms)
        group.offsets = classic.offsets
        group.group_epoch = group.assignment_epoch = classic.generation_id
        for m in classic.members.values():
            protocol = classic.protocol_name or m.protocols[0][0]
            subscription = ep.decode_subscription(m.metadata(protocol))
            assigned = _to_ids(ep.decode_assignment(m.assignment), topics)
            member = ConsumerMember(
                m.member_id,
                m.group_instance_id,
                subscription.rack_id,
                m.client_id,
                m.client_host,
                list(subscription.topics),
                None,
                m.rebalance_timeout_ms,
                now_ms + m.session_timeout_ms,
                member_epoch=classic.generation_id,
                previous_member_epoch=classic.generation_id,
                assigned=assigned,
                to_send=copy_assignment(assigned) or {},
                reported_owned=copy_assignment(assigned) or {},
                classic=rec.ClassicMemberMetadata(m.session_timeout_ms, list(m.protocols)),
            )
            member.last_sent = copy_assignment(assigned)
            group.members[m.member_id] = member
            group.target[m.member_id] = copy_assignment(assigned) or {}
        group.subscribed_metadata = {t: topics[t] for t in group.subscribed_topics() if t in topics}
        self._drop_classic_metadata(classic, now_ms)
        self.groups[group.group_id] = group
        self._store_consumer_group(group)
        return group

    def _downgrade(self, group: ConsumerGroup, leaving_id: str, now_ms: int) -> None:
        """The last consumer-protocol member leaves: the classic members carry on in a classic group,
        which rebalances (ClassicGroup.fromConsumerGroup, then prepareRebalance)."""
        names = {topic_id: name for name, (topic_id, _) in group.subscribed_metadata.items()}
        classic = ClassicGroup(group.group_id, now_ms)
        classic.offsets = group.offsets
        classic.generation_id = group.group_epoch
        classic.protocol_type = "consumer"
        for m in group.members.values():
            if m.member_id == leaving_id or m.classic is None:
                continue
            version = ep.version_of(m.classic.protocols[0][1]) if m.classic.protocols else 0
            assignment = ep.encode_assignment(
                {names[t]: set(ps) for t, ps in m.to_send.items() if t in names}, version
            )
            classic.add_member(
                Member(
                    m.member_id,
                    m.instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.classic.session_timeout_ms,
                    "consumer",
                    list(m.classic.protocols),
                    assignment,
                    session_deadline_ms=now_ms + m.classic.session_timeout_ms,
                )
            )
        classic.protocol_name = classic.select_protocol()
        classic.state = GroupState.STABLE
        self._store_consumer_group(group, deleted=True)
        self.groups[group.group_id] = classic
        self._store_group(classic)
        self._prepare_rebalance(classic, now_ms)

    def _classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> tuple[ConsumerMember | None, int]:
        """The classic member a SyncGroup/Heartbeat/LeaveGroup names (validateConsumerGroupMember)."""
        if instance_id is None:
            member = group.members.get(member_id)
        else:
            member = group.static_member(instance_id)
            if member is not None and member.member_id != member_id:
                return None, ErrorCode.fenced_instance_id
        if member is None or member.classic is None:
            return None, ErrorCode.unknown_member_id
        return member, ErrorCode.none

    def _classic_join_consumer_group(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        topics: Mapping[str, tuple[uuid.UUID, int]],
        now_ms: int,
    ) -> JoinResult:
        """A classic JoinGroup to a consumer-protocol group (classicGroupJoinToConsumerGroup): the broker
        assigns; the answer comes at once, generation = the member's epoch, no member list."""
        unknown = not member_id
        if unknown:
            member_id = str(uuid.uuid4())
        if (
            len(group.members) >= self.config.group_consumer_max_size
            and member_id not in group.members
        ):
            return JoinResult(ErrorCode.group_max_size_reached, member_id=member_id)
        names = [n for n, _ in protocols]
        shared = set(names)
        for m in group.members.values():
            if m.classic is not None:
                shared &= {n for n, _ in m.classic.protocols}
        if protocol_type != "consumer" or not names or not shared:
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id=member_id)
        if unknown and instance_id is None and require_known_member_id:
            return JoinResult(ErrorCode.member_id_required, member_id=member_id)
        existing = group.static_member(instance_id) if instance_id is not None else None
        if existing is not None and not unknown and existing.member_id != member_id:
            return JoinResult(ErrorCode.fenced_instance_id, member_id=member_id)
        subscription = ep.decode_subscription(protocols[0][1])
        if existing is not None and existing.member_id != member_id:
            # A static member's new instance takes the place (and partitions) of the old one.
            del group.members[existing.member_id]
            if existing.member_id in group.target:
                group.target[member_id] = group.target.pop(existing.member_id)
            existing.member_id = member_id
            group.members[member_id] = existing
        member = group.members.get(member_id)
        changed = member is None
        if member is None:
            member = group.members[member_id] = ConsumerMember(
                member_id,
                instance_id,
                subscription.rack_id,
                client_id,
                client_host,
                [],
                None,
                rebalance_timeout_ms,
                now_ms,
            )
        member.client_id, member.client_host, member.rebalance_timeout_ms = (
            client_id,
            client_host,
            rebalance_timeout_ms,
        )
        member.classic = rec.ClassicMemberMetadata(session_timeout_ms, list(protocols))
        member.session_deadline_ms = now_ms + session_timeout_ms
        if sorted(subscription.topics) != sorted(member.subscribed_topic_names):
            member.subscribed_topic_names = list(subscription.topics)
            changed = True
        metadata = {t: topics[t] for t in group.subscribed_topics() if t in topics}
        if changed or metadata != group.subscribed_metadata:
            group.group_epoch += 1
        if group.assignment_epoch != group.group_epoch:
            self._compute_target(group, topics)
        # What it owns is what its subscription says (nothing for eager assignors: they revoked all).
        self._reconcile(group, member, _to_ids(subscription.owned, topics), now_ms)
        self._store_consumer_group(group)
        return JoinResult(
            ErrorCode.none, member.member_epoch, "consumer", protocols[0][0], "", member_id, []
        )

    def _classic_sync_consumer_group(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        topics: Mapping[str, tuple[uuid.UUID, int]],
        now_ms: int,
    ) -> SyncResult:
        member, error = self._classic_member(group, member_id, instance_id)
        if member is None:
            return SyncResult(error)
        assert member.classic is not None
        if generation_id != member.member_epoch:
            return SyncResult(ErrorCode.illegal_generation)
        if (protocol_type is not None and protocol_type != "consumer") or (
            protocol_name is not None
            and protocol_name not in {n for n, _ in member.classic.protocols}
        ):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        if member.member_epoch < group.group_epoch:
            return SyncResult(ErrorCode.rebalance_in_progress)
        member.session_deadline_ms = now_ms + member.classic.session_timeout_ms
        names = {topic_id: name for name, (topic_id, _) in topics.items()}
        version = ep.version_of(member.classic.protocols[0][1])
        assignment = ep.encode_assignment(
            {names[t]: set(ps) for t, ps in member.to_send.items() if t in names}, version
        )
        return SyncResult(
            ErrorCode.none, assignment, "consumer", protocol_name or member.classic.protocols[0][0]
        )

    def _classic_heartbeat_consumer_group(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        now_ms: int,
    ) -> int:
        """REBALANCE_IN_PROGRESS tells the classic member to rejoin: the group epoch moved, it must
        revoke, or partitions it waits for are free now."""
        member, error = self._classic_member(group, member_id, instance_id)
        if member is None:
            return error
        assert member.classic is not None
        if generation_id != member.member_epoch:
            return ErrorCode.illegal_generation
        member.session_deadline_ms = now_ms + member.classic.session_timeout_ms
        waiting = without(group.target.get(member.member_id, {}), member.assigned)
        taken = group.owned_by_others(member.member_id)
        released = any((t, p) not in taken for t, ps in waiting.items() for p in ps)
        if member.member_epoch < group.group_epoch or member.pending_revocation() or released:
            if member.revocation_deadline_ms is None:
                member.revocation_deadline_ms = now_ms + max(member.rebalance_timeout_ms, 0)
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def _classic_leave_consumer_group(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, now_ms: int
    ) -> int:
        if instance_id is not None and not member_id:
            member = group.static_member(instance_id)
            member_id = member.member_id if member is not None else ""
        member, error = self._classic_member(group, member_id, instance_id)
        if member is None:
            return error
        if self.groups.get(group.group_id) is group:
            self._fence_consumer_member(group, member, None, now_ms)
        return ErrorCode.none


def _copy_group(group: ClassicGroup | ConsumerGroup | None) -> ClassicGroup | ConsumerGroup | None:
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


def _to_ids(
    partitions: Mapping[str, set[int]], topics: Mapping[str, tuple[uuid.UUID, int]]
) -> Assignment:
    """Topic names to ids (the embedded consumer protocol names topics); unknown topics dropped."""
    return {topics[t][0]: set(ps) for t, ps in partitions.items() if t in topics and ps}
