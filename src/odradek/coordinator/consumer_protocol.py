"""The consumer group protocol (KIP-848): ConsumerGroupHeartbeat, and members leaving.

Kafka's GroupMetadataManager.consumerGroupHeartbeat: a heartbeat joins (member
epoch 0), leaves (-1, or -2 for a static member that will be back) or reports
what the member owns; whatever changes bumps the group epoch once, a new target
assignment is computed when the epochs differ, and the member reconciles toward
it (ConsumerGroup.compute_target, ConsumerGroup.reconcile). Members are removed
here whichever protocol they speak, since a consumer group's last
consumer-protocol member leaving may turn it back into a classic group
(migration.py decides).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from odradek.coordinator.assignors import ASSIGNORS, Assignment
from odradek.coordinator.classic_group import ClassicGroup
from odradek.coordinator.config import GroupCoordinatorConfig
from odradek.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    TopicMetadata,
    compile_regex,
    without,
)
from odradek.coordinator.group_metadata import GroupMetadataManager
from odradek.coordinator.migration import GroupMigration, classic_member
from odradek.metrics.stats import REBALANCES
from odradek.protocol.errors import ErrorCode

#: ConsumerGroupHeartbeat member epochs of a member leaving for good, and of a static member leaving
#: for now (its instance keeps the assignment until its session ends).
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


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
class ConsumerHeartbeat:
    """What a ConsumerGroupHeartbeat says; None (or -1 for the timeout) means unchanged."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: Assignment | None
    #: v1+ clients make their own member id (KIP-1082).
    member_id_required: bool


def validate_heartbeat(hb: ConsumerHeartbeat) -> tuple[int, str | None]:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid: (error, message)."""

    def invalid(message: str) -> tuple[int, str]:
        return ErrorCode.invalid_request, message

    if not hb.group_id:
        return invalid("GroupId can't be empty.")
    if hb.instance_id == "":
        return invalid("InstanceId can't be empty.")
    if hb.rack_id == "":
        return invalid("RackId can't be empty.")
    if hb.member_id_required and not hb.member_id:
        return invalid("MemberId can't be empty.")
    if hb.member_epoch > 0 or hb.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if not hb.member_id:
            return invalid("MemberId can't be empty.")
    elif hb.member_epoch == 0:
        if hb.rebalance_timeout_ms == -1:
            return invalid("RebalanceTimeoutMs must be provided in first request.")
        if hb.owned:
            return invalid("TopicPartitions must be empty when (re-)joining.")
        if not hb.subscribed_topic_names and hb.subscribed_topic_regex is None:
            return invalid(
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
            )
    elif hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if not hb.member_id:
            return invalid("MemberId can't be empty.")
        if hb.instance_id is None:
            return invalid("InstanceId can't be null.")
    else:
        return invalid("MemberEpoch is invalid.")
    if hb.server_assignor is not None and hb.server_assignor not in ASSIGNORS:
        return (
            ErrorCode.unsupported_assignor,
            f"ServerAssignor {hb.server_assignor} is not supported. "
            f"Supported assignors: {', '.join(ASSIGNORS)}.",
        )
    if hb.subscribed_topic_regex is not None:
        try:
            compile_regex(hb.subscribed_topic_regex)
        except re.error as e:
            return ErrorCode.invalid_regular_expression, f"SubscribedTopicRegex was invalid: {e}"
    return ErrorCode.none, None


class ConsumerGroupProtocol:
    def __init__(
        self,
        config: GroupCoordinatorConfig,
        groups: GroupMetadataManager,
        migration: GroupMigration,
    ) -> None:
        self.config = config
        self._groups = groups
        self._migration = migration

    def heartbeat(
        self,
        hb: ConsumerHeartbeat,
        client_id: str,
        client_host: str,
        topics: TopicMetadata,
        now_ms: int,
    ) -> ConsumerHeartbeatResult:
        """ConsumerGroupHeartbeat: join (epoch 0), leave (-1, or -2 for a static member that will be
        back), or heartbeat and reconcile."""
        interval = self.config.group_consumer_heartbeat_interval_ms
        member_id, member_epoch, group_id = hb.member_id, hb.member_epoch, hb.group_id
        error, message = validate_heartbeat(hb)

        def fail(code: int, text: str | None = None) -> ConsumerHeartbeatResult:
            return ConsumerHeartbeatResult(
                code, member_id, member_epoch, interval, error_message=text
            )

        if error:
            return fail(error, message)
        group = self._groups.groups.get(group_id)
        if isinstance(group, ClassicGroup) and group.members and member_epoch == 0:
            group = self._migration.maybe_upgrade(group, topics, now_ms) or group
        if isinstance(group, ClassicGroup):
            if group.members or group.pending_members or member_epoch != 0:
                return fail(
                    ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group."
                )
            # An empty classic group becomes a consumer group, keeping its offsets.
            converted = ConsumerGroup(group_id, now_ms)
            converted.offsets = group.offsets
            if group.generation_id > 0 or group.protocol_type is not None:
                self._groups.drop_classic_metadata(group, now_ms)
            self._groups.groups[group_id] = group = converted
        if group is None:
            if member_epoch != 0:
                return fail(ErrorCode.group_id_not_found, f"Consumer group {group_id} not found.")
            group = self._groups.groups[group_id] = ConsumerGroup(group_id, now_ms)
        if member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(group, hb, topics, now_ms, fail)
        if (
            member_epoch == 0
            and len(group.members) >= self.config.group_consumer_max_size
            and member_id not in group.members
            and (hb.instance_id is None or group.static_member(hb.instance_id) is None)
        ):
            return fail(
                ErrorCode.group_max_size_reached,
                "The consumer group has reached its maximum capacity of "
                f"{self.config.group_consumer_max_size} members.",
            )
        if not member_id:
            member_id = str(uuid.uuid4())
        before = set(group.members)
        member, error, message = self._member(
            group, member_id, member_epoch, hb.instance_id, hb.owned, client_id, client_host, now_ms
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
        if hb.rack_id is not None:
            member.rack_id = hb.rack_id
        if hb.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = hb.rebalance_timeout_ms
        names = hb.subscribed_topic_names
        if names is not None and sorted(names) != sorted(member.subscribed_topic_names):
            member.subscribed_topic_names = list(names)
            changed = True
        regex = hb.subscribed_topic_regex
        if regex is not None and regex != member.subscribed_topic_regex:
            member.subscribed_topic_regex = regex or None
            member.regex_topics = None
            changed = True
        if hb.server_assignor is not None:
            member.server_assignor = hb.server_assignor
        changed |= group.resolve_regexes(topics)
        metadata = {t: topics[t] for t in group.subscribed_topics() if t in topics}
        if changed or metadata != group.subscribed_metadata:
            group.group_epoch += 1
            REBALANCES.consumer += 1
        retargeted = group.assignment_epoch != group.group_epoch
        if retargeted:
            group.compute_target(topics)
        group.reconcile(member, hb.owned, now_ms)
        # A plain heartbeat changes this member only; a new target or member touches every record.
        self._groups.store_consumer(
            group, only_members=None if retargeted or changed or replaced else (member.member_id,)
        )
        full_request = member_epoch == 0 or (
            hb.rebalance_timeout_ms != -1 and names is not None and hb.owned is not None
        )
        assignment = None
        if full_request or member.last_sent != member.to_send:
            assignment = {t: set(ps) for t, ps in member.to_send.items()}
            member.last_sent = assignment
        return ConsumerHeartbeatResult(
            ErrorCode.none, member.member_id, member.member_epoch, interval, assignment
        )

    def _member(
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

        def new_member() -> tuple[ConsumerMember, int, None]:
            joining = ConsumerMember(
                member_id, instance_id, None, client_id, client_host, [], None, -1, session_deadline
            )
            return joining, ErrorCode.none, None

        member: ConsumerMember | None
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if member_epoch != 0:
                    return (
                        None,
                        ErrorCode.unknown_member_id,
                        f"Member {member_id} is not a member of the group.",
                    )
                return new_member()
        else:
            existing = group.static_member(instance_id)
            if member_epoch == 0:
                if existing is None:
                    member = group.members.get(member_id)
                    if member is None:
                        return new_member()
                elif existing.member_id == member_id:
                    member = existing
                else:
                    if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                        return (
                            None,
                            ErrorCode.unreleased_instance_id,
                            f"Static member {member_id} with instance id {instance_id} cannot "
                            f"join the group because the instance id is owned by "
                            f"{existing.member_id} member.",
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
                        f"Static member {member_id} with instance id {instance_id} was fenced by "
                        f"member {existing.member_id}.",
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
            relation = "greater" if member_epoch > member.member_epoch else "smaller"
            return (
                None,
                ErrorCode.fenced_member_epoch,
                f"The consumer group member has a {relation} member epoch ({member_epoch}) than "
                f"the one known by the group coordinator ({member.member_epoch}). The member "
                f"must abandon all its partitions and rejoin.",
            )
        return member, ErrorCode.none, None

    def _leave(
        self,
        group: ConsumerGroup,
        hb: ConsumerHeartbeat,
        topics: TopicMetadata,
        now_ms: int,
        fail: Callable[[int, str], ConsumerHeartbeatResult],
    ) -> ConsumerHeartbeatResult:
        interval = self.config.group_consumer_heartbeat_interval_ms
        member_id, instance_id = hb.member_id, hb.instance_id
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
            if hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # Gone for now, back within its session: keep its assignment for the next instance.
                member.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH
                member.to_send = member.assigned
                member.revocation_deadline_ms = None
                self._groups.store_consumer(group, only_members=(member.member_id,))
                return ConsumerHeartbeatResult(
                    ErrorCode.none, member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH, interval
                )
        self._fence(group, member, topics, now_ms)
        return ConsumerHeartbeatResult(ErrorCode.none, member_id, hb.member_epoch, interval)

    def leave_classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, now_ms: int
    ) -> int:
        """A LeaveGroup from a classic member of a consumer group."""
        if instance_id is not None and not member_id:
            static = group.static_member(instance_id)
            member_id = static.member_id if static is not None else ""
        member, error = classic_member(group, member_id, instance_id)
        if member is None:
            return error
        if self._groups.groups.get(group.group_id) is group:
            self._fence(group, member, None, now_ms)
        return ErrorCode.none

    def _fence(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        topics: TopicMetadata | None,
        now_ms: int,
    ) -> None:
        """Remove a member (leave, session or rebalance timeout) and bump the group epoch.

        With topic metadata at hand the new target is computed at once; otherwise (timers) on the
        next heartbeat, which carries fresh metadata.
        """
        if self._migration.maybe_downgrade(group, member.member_id, now_ms):
            return
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        group.group_epoch += 1
        REBALANCES.consumer += 1
        group.state_timestamp_ms = now_ms
        if topics is not None:
            group.compute_target(topics)
        self._groups.store_consumer(group)

    def expire(self, group: ConsumerGroup, now_ms: int) -> None:
        """Fence members whose session ended, or that did not revoke within their rebalance timeout."""
        for member in list(group.members.values()):
            if self._groups.groups.get(group.group_id) is not group:
                return  # downgraded to a classic group by the previous fence
            if member.session_deadline_ms <= now_ms or (
                member.revocation_deadline_ms is not None
                and member.revocation_deadline_ms <= now_ms
            ):
                self._fence(group, member, None, now_ms)
