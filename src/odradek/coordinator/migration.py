"""Migration between the classic and the consumer protocol (KIP-848), and the classic members
that live in consumer-protocol groups meanwhile.

``group.consumer.migration.policy`` (default bidirectional) decides: a live classic
group whose members speak the embedded consumer protocol becomes a consumer
group when a consumer-protocol member joins (``maybe_upgrade``, Kafka's
ConsumerGroup.fromClassicGroup), and a consumer group whose last
consumer-protocol member leaves becomes a classic group again and rebalances
(``maybe_downgrade``, ClassicGroup.fromConsumerGroup). Until then the classic
members' JoinGroup, SyncGroup and Heartbeat are answered here from the
broker-side assignment (GroupMetadataManager.classicGroup*ToConsumerGroup);
their LeaveGroup removes a consumer-group member like any other, which is
consumer_protocol's job.
"""

from __future__ import annotations

import uuid

from odradek.coordinator import embedded_protocol as ep
from odradek.coordinator import records as rec
from odradek.coordinator.assignors import Assignment
from odradek.coordinator.classic_group import (
    ClassicGroup,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
)
from odradek.coordinator.classic_protocol import ClassicGroupProtocol, JoinParams
from odradek.coordinator.config import GroupCoordinatorConfig
from odradek.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    TopicMetadata,
    copy_assignment,
    without,
)
from odradek.coordinator.group_metadata import GroupMetadataManager
from odradek.protocol.errors import ErrorCode


class GroupMigration:
    def __init__(
        self,
        config: GroupCoordinatorConfig,
        groups: GroupMetadataManager,
        classic: ClassicGroupProtocol,
    ) -> None:
        self.config = config
        self._groups = groups
        self._classic = classic

    # ---- upgrade and downgrade --------------------------------------------------------------

    def maybe_upgrade(
        self, classic: ClassicGroup, topics: TopicMetadata, now_ms: int
    ) -> ConsumerGroup | None:
        """The consumer group a live classic group becomes as a consumer-protocol member joins, or
        None when Kafka's validateOnlineUpgrade refuses (policy, protocol type, group size)."""
        if not (
            self.config.upgrade_enabled
            and classic.protocol_type == "consumer"
            and len(classic.members) <= self.config.group_consumer_max_size
        ):
            return None
        for m in classic.members.values():
            if m.awaiting_join is not None:
                m.awaiting_join(JoinResult(ErrorCode.rebalance_in_progress, member_id=m.member_id))
                m.awaiting_join = None
            if m.awaiting_sync is not None:
                m.awaiting_sync(SyncResult(ErrorCode.rebalance_in_progress))
                m.awaiting_sync = None
        # The classic members keep their assignment at member epoch = generation.
        group = ConsumerGroup(classic.group_id, now_ms)
        group.offsets = classic.offsets
        group.group_epoch = group.assignment_epoch = classic.generation_id
        for m in classic.members.values():
            protocol = classic.protocol_name or m.protocols[0][0]
            subscription = ep.decode_subscription(m.metadata(protocol))
            assigned = to_ids(ep.decode_assignment(m.assignment), topics)
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
                to_send=copy_assignment(assigned),
                reported_owned=copy_assignment(assigned),
                classic=rec.ClassicMemberMetadata(m.session_timeout_ms, list(m.protocols)),
            )
            member.last_sent = copy_assignment(assigned)
            group.members[m.member_id] = member
            group.target[m.member_id] = copy_assignment(assigned)
        group.subscribed_metadata = {t: topics[t] for t in group.subscribed_topics() if t in topics}
        self._groups.drop_classic_metadata(classic, now_ms)
        self._groups.groups[group.group_id] = group
        self._groups.store_consumer(group)
        return group

    def maybe_downgrade(self, group: ConsumerGroup, leaving_id: str, now_ms: int) -> bool:
        """As the member ``leaving_id`` leaves: if only classic members remain and the policy allows,
        they carry on in a classic group, which rebalances (True); else nothing happens (False)."""
        if not (self.config.downgrade_enabled and group.all_classic_except(leaving_id)):
            return False
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
        self._groups.store_consumer(group, deleted=True)
        self._groups.groups[group.group_id] = classic
        self._groups.store_classic(classic)
        self._classic.prepare_rebalance(classic, now_ms)
        return True

    # ---- classic members of consumer groups -------------------------------------------------

    def join(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        require_known_member_id: bool,
        params: JoinParams,
        topics: TopicMetadata,
        now_ms: int,
    ) -> JoinResult:
        """A classic JoinGroup to a consumer-protocol group (classicGroupJoinToConsumerGroup): the broker
        assigns; the answer comes at once, generation = the member's epoch, no member list."""
        protocols = params.protocols
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
        if params.protocol_type != "consumer" or not names or not shared:
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
                params.client_id,
                params.client_host,
                [],
                None,
                params.rebalance_timeout_ms,
                now_ms,
            )
        member.client_id, member.client_host = params.client_id, params.client_host
        member.rebalance_timeout_ms = params.rebalance_timeout_ms
        member.classic = rec.ClassicMemberMetadata(params.session_timeout_ms, list(protocols))
        member.session_deadline_ms = now_ms + params.session_timeout_ms
        if sorted(subscription.topics) != sorted(member.subscribed_topic_names):
            member.subscribed_topic_names = list(subscription.topics)
            changed = True
        metadata = {t: topics[t] for t in group.subscribed_topics() if t in topics}
        if changed or metadata != group.subscribed_metadata:
            group.group_epoch += 1
        if group.assignment_epoch != group.group_epoch:
            group.compute_target(topics)
        # What it owns is what its subscription says (nothing for eager assignors: they revoked all).
        group.reconcile(member, to_ids(subscription.owned, topics), now_ms)
        self._groups.store_consumer(group)
        return JoinResult(
            ErrorCode.none, member.member_epoch, "consumer", protocols[0][0], "", member_id, []
        )

    def sync(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        topics: TopicMetadata,
        now_ms: int,
    ) -> SyncResult:
        member, error = classic_member(group, member_id, instance_id)
        if member is None or member.classic is None:
            return SyncResult(error)
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

    def heartbeat(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        now_ms: int,
    ) -> int:
        """REBALANCE_IN_PROGRESS tells the classic member to rejoin: the group epoch moved, it must
        revoke, or partitions it waits for are free now."""
        member, error = classic_member(group, member_id, instance_id)
        if member is None or member.classic is None:
            return error
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


def classic_member(
    group: ConsumerGroup, member_id: str, instance_id: str | None
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


def to_ids(partitions: dict[str, set[int]], topics: TopicMetadata) -> Assignment:
    """Topic names to ids (the embedded consumer protocol names topics); unknown topics dropped."""
    return {topics[t][0]: set(ps) for t, ps in partitions.items() if t in topics and ps}
