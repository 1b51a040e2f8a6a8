"""The classic group protocol for classic groups: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

Kafka's GroupMetadataManager.classicGroup* methods. A JoinGroup or SyncGroup that
must wait registers a callback, which a later call (another member's join, a
leave, or a timer once a deadline passes) invokes with the result. Classic
members of consumer-protocol groups are migration.py's: the coordinator routes
them there before they reach this module, so every group here is a ClassicGroup.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from odradek.coordinator.classic_group import (
    ClassicGroup,
    GroupState,
    JoinCallback,
    JoinResult,
    Member,
    SyncCallback,
    SyncResult,
)
from odradek.coordinator.config import GroupCoordinatorConfig
from odradek.coordinator.group_metadata import GroupMetadataManager
from odradek.metrics.stats import REBALANCES
from odradek.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class JoinParams:
    """What a JoinGroup says about the joining member."""

    client_id: str
    client_host: str
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int


def _heartbeat(member: Member, now_ms: int) -> None:
    member.session_deadline_ms = now_ms + member.session_timeout_ms


def _refresh(member: Member, params: JoinParams) -> None:
    """A rejoining member's client, protocols and timeouts are what its latest JoinGroup says."""
    member.client_id, member.client_host = params.client_id, params.client_host
    member.protocols = list(params.protocols)
    member.session_timeout_ms = params.session_timeout_ms
    member.rebalance_timeout_ms = params.rebalance_timeout_ms


class ClassicGroupProtocol:
    def __init__(self, config: GroupCoordinatorConfig, groups: GroupMetadataManager) -> None:
        self.config = config
        self._groups = groups

    # ---- JoinGroup --------------------------------------------------------------------------

    def join(
        self,
        group: ClassicGroup,
        member_id: str,
        instance_id: str | None,
        require_known_member_id: bool,
        params: JoinParams,
        callback: JoinCallback,
        now_ms: int,
    ) -> None:
        """A JoinGroup to a classic group (its id and session timeout already checked)."""
        if group.state is GroupState.DEAD:
            callback(JoinResult(ErrorCode.coordinator_not_available, member_id=member_id))
            return
        if not group.supports_protocols(params.protocol_type, [n for n, _ in params.protocols]):
            callback(JoinResult(ErrorCode.inconsistent_group_protocol, member_id=member_id))
            return
        if not member_id:
            self._join_unknown_member(
                group, instance_id, require_known_member_id, params, callback, now_ms
            )
        else:
            self._join_known_member(group, member_id, instance_id, params, callback, now_ms)
        if (
            not group.members
            and not group.pending_members
            and group.state is GroupState.EMPTY
            and not group.offsets
        ):
            del self._groups.groups[group.group_id]

    def _join_unknown_member(
        self,
        group: ClassicGroup,
        instance_id: str | None,
        require_known_member_id: bool,
        params: JoinParams,
        callback: JoinCallback,
        now_ms: int,
    ) -> None:
        if len(group.members) + len(group.pending_members) >= self.config.group_max_size:
            callback(JoinResult(ErrorCode.group_max_size_reached))
            return
        new_id = f"{instance_id or params.client_id}-{uuid.uuid4()}"
        if instance_id is not None and instance_id in group.static_members:
            self._rejoin_static_member(group, instance_id, new_id, params, callback, now_ms)
            return
        if instance_id is None and require_known_member_id:
            # KIP-394: hand out the id and wait for the member to come back with it.
            group.pending_members[new_id] = now_ms + params.session_timeout_ms
            callback(JoinResult(ErrorCode.member_id_required, member_id=new_id))
            return
        self._add_member_and_rebalance(group, new_id, instance_id, params, callback, now_ms)

    def _rejoin_static_member(
        self,
        group: ClassicGroup,
        instance_id: str,
        new_id: str,
        params: JoinParams,
        callback: JoinCallback,
        now_ms: int,
    ) -> None:
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
        _refresh(member, params)
        _heartbeat(member, now_ms)
        # As Kafka: only a change of the group's selected protocol rebalances a Stable group. New
        # metadata alone does not (a restarted consumer reports no owned partitions, its old
        # instance did: that difference must not disturb the other members).
        if group.state is GroupState.STABLE and group.select_protocol() == group.protocol_name:
            # No rebalance. A rejoining leader gets the members (KIP-814: v9+ also tells it to
            # skip the assignment; an older leader's SyncGroup in Stable just returns what it has).
            is_leader = group.leader_id == new_id
            self._groups.store_classic(group)
            callback(
                JoinResult(
                    ErrorCode.none,
                    group.generation_id,
                    group.protocol_type,
                    group.protocol_name,
                    group.leader_id or "",
                    new_id,
                    _member_list(group) if is_leader else [],
                    skip_assignment=is_leader,
                )
            )
            return
        member.awaiting_join = callback
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self.prepare_rebalance(group, now_ms)
        else:
            self._maybe_complete_join(group, now_ms)

    def _join_known_member(
        self,
        group: ClassicGroup,
        member_id: str,
        instance_id: str | None,
        params: JoinParams,
        callback: JoinCallback,
        now_ms: int,
    ) -> None:
        if member_id in group.pending_members:
            self._add_member_and_rebalance(group, member_id, instance_id, params, callback, now_ms)
            return
        if group.is_fenced(member_id, instance_id):
            callback(JoinResult(ErrorCode.fenced_instance_id, member_id=member_id))
            return
        member = group.members.get(member_id)
        if member is None or group.state is GroupState.EMPTY:
            callback(JoinResult(ErrorCode.unknown_member_id, member_id=member_id))
            return
        same = member.protocols == list(params.protocols)
        _heartbeat(member, now_ms)
        if group.state is GroupState.PREPARING_REBALANCE:
            self._update_member(member, params, callback)
            self._maybe_complete_join(group, now_ms)
        elif group.state is GroupState.COMPLETING_REBALANCE and same:
            # The member lost the JoinGroup response: send it again.
            callback(_join_result(group, member_id))
        elif group.state is GroupState.STABLE and same and group.leader_id != member_id:
            callback(_join_result(group, member_id))
        else:
            self._update_member(member, params, callback)
            self.prepare_rebalance(group, now_ms)

    def _update_member(self, member: Member, params: JoinParams, callback: JoinCallback) -> None:
        _refresh(member, params)
        if member.awaiting_join is not None and member.awaiting_join is not callback:
            # A second join from the same member replaces the first; the first gets nothing useful.
            member.awaiting_join(
                JoinResult(ErrorCode.rebalance_in_progress, member_id=member.member_id)
            )
        member.awaiting_join = callback

    def _add_member_and_rebalance(
        self,
        group: ClassicGroup,
        member_id: str,
        instance_id: str | None,
        params: JoinParams,
        callback: JoinCallback,
        now_ms: int,
    ) -> None:
        member = Member(
            member_id,
            instance_id,
            params.client_id,
            params.client_host,
            params.rebalance_timeout_ms,
            params.session_timeout_ms,
            params.protocol_type,
            list(params.protocols),
            awaiting_join=callback,
        )
        _heartbeat(member, now_ms)
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
            self.prepare_rebalance(group, now_ms)

    def prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> None:
        """Start a join phase: members waiting in SyncGroup are told to rejoin."""
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
        REBALANCES.classic += 1
        if not group.members:
            group.protocol_name = None
            group.transition_to(GroupState.EMPTY, now_ms)
            self._groups.store_classic(group)
            return
        group.protocol_name = group.select_protocol()
        group.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        for m in group.members.values():
            callback, m.awaiting_join = m.awaiting_join, None
            _heartbeat(m, now_ms)
            assert callback is not None
            callback(_join_result(group, m.member_id))

    # ---- SyncGroup / Heartbeat / LeaveGroup -------------------------------------------------

    def _check_member(
        self,
        group: ClassicGroup | None,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
    ) -> int:
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.unknown_member_id
        if group.is_fenced(member_id, instance_id):
            return ErrorCode.fenced_instance_id
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        return ErrorCode.none

    def sync(
        self,
        group: ClassicGroup | None,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        callback: SyncCallback,
        now_ms: int,
    ) -> None:
        error = self._check_member(group, member_id, instance_id, generation_id)
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
        _heartbeat(member, now_ms)
        if group.state is GroupState.PREPARING_REBALANCE:
            callback(SyncResult(ErrorCode.rebalance_in_progress))
        elif group.state is GroupState.COMPLETING_REBALANCE:
            member.awaiting_sync = callback
            if member_id == group.leader_id:
                for m in group.members.values():
                    m.assignment = assignments.get(m.member_id, b"")
                group.transition_to(GroupState.STABLE, now_ms)
                self._groups.store_classic(group)
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
        group: ClassicGroup | None,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        now_ms: int,
    ) -> int:
        error = self._check_member(group, member_id, instance_id, generation_id)
        if error:
            return error
        assert group is not None
        if group.state is GroupState.EMPTY:
            return ErrorCode.unknown_member_id
        _heartbeat(group.members[member_id], now_ms)
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(
        self, group: ClassicGroup | None, members: list[tuple[str, str | None]], now_ms: int
    ) -> tuple[int, list[int]]:
        """Remove members given as (member id, group instance id); per-member error codes."""
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.unknown_member_id, [ErrorCode.unknown_member_id] * len(members)
        errors: list[int] = []
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
            self.prepare_rebalance(group, now_ms)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group, now_ms)

    # ---- timers -----------------------------------------------------------------------------

    def expire(self, group: ClassicGroup, now_ms: int) -> None:
        """The group's passed deadlines: pending and session expiry, end of the join phase."""
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


def _member_list(group: ClassicGroup) -> list[tuple[str, str | None, bytes]]:
    protocol = group.protocol_name
    assert protocol is not None
    return [
        (m.member_id, m.group_instance_id, m.metadata(protocol)) for m in group.members.values()
    ]


def _join_result(group: ClassicGroup, member_id: str) -> JoinResult:
    return JoinResult(
        ErrorCode.none,
        group.generation_id,
        group.protocol_type,
        group.protocol_name,
        group.leader_id or "",
        member_id,
        _member_list(group) if member_id == group.leader_id else [],
    )
