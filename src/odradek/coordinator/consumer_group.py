"""A consumer-protocol group (KIP-848): the broker assigns, members reconcile.

The group epoch moves whenever membership, subscriptions or the subscribed
topics' partition counts change; the target assignment is then recomputed by
the server-side assignor and stamped with that epoch. Each member reconciles
toward its target on its heartbeats: first it is asked to revoke what it must
give up, then it gets the partitions that no other member still owns, and its
member epoch advances to the target's.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import overload

from odradek.coordinator.assignors import ASSIGNORS, DEFAULT_ASSIGNOR, Assignment
from odradek.coordinator.classic_group import GroupState
from odradek.coordinator.offsets import OffsetAndMetadata
from odradek.coordinator.records import ClassicMemberMetadata
from odradek.protocol.errors import ErrorCode

#: The topics a consumer group may subscribe to: name -> (topic id, partition count).
TopicMetadata = Mapping[str, tuple[uuid.UUID, int]]


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    server_assignor: str | None
    rebalance_timeout_ms: int
    session_deadline_ms: int
    member_epoch: int = 0
    previous_member_epoch: int = -1
    #: SubscribedTopicRegex, matched against whole topic names (see ``resolve_regex``).
    subscribed_topic_regex: str | None = None
    #: The topics the regex matched when last resolved (None: not resolved since loaded).
    regex_topics: frozenset[str] | None = None
    #: While the member must revoke partitions: when it is fenced unless it has (its rebalance timeout).
    revocation_deadline_ms: int | None = None
    #: Everything the member holds, including partitions it is asked to revoke.
    assigned: Assignment = field(default_factory=dict)
    #: What the member should own now (its assignment minus partitions being revoked).
    to_send: Assignment = field(default_factory=dict)
    #: The assignment as last sent, so unchanged ones are not sent again.
    last_sent: Assignment | None = None
    #: What the member last reported owning.
    reported_owned: Assignment = field(default_factory=dict)
    #: Set for a member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) in this group.
    classic: ClassicMemberMetadata | None = None

    def subscribed_topics(self) -> set[str]:
        return set(self.subscribed_topic_names) | (self.regex_topics or frozenset())

    def pending_revocation(self) -> Assignment:
        return without(self.assigned, self.to_send)


def compile_regex(pattern: str) -> re.Pattern[str]:
    """SubscribedTopicRegex as a Python regular expression.

    Kafka uses RE2/J; its syntax is (for the patterns consumers send: classes,
    alternation, repetition, anchors) a subset of Python's, and both match the
    whole topic name. RE2/J rejects backreferences and lookaround, which Python
    accepts; such patterns are the one place where the two differ.
    Raises re.error for a pattern Python cannot compile (INVALID_REGULAR_EXPRESSION).
    """
    return re.compile(pattern)


def resolve_regex(pattern: str, topic_names: list[str]) -> frozenset[str]:
    compiled = compile_regex(pattern)
    return frozenset(t for t in topic_names if compiled.fullmatch(t))


@overload
def copy_assignment(a: Assignment) -> Assignment: ...
@overload
def copy_assignment(a: Assignment | None) -> Assignment | None: ...
def copy_assignment(a: Assignment | None) -> Assignment | None:
    return None if a is None else {t: set(ps) for t, ps in a.items()}


def without(a: Assignment, b: Assignment) -> Assignment:
    out = {t: ps - b.get(t, set()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def union(a: Assignment, b: Assignment) -> Assignment:
    out = {t: set(ps) for t, ps in a.items()}
    for t, ps in b.items():
        out.setdefault(t, set()).update(ps)
    return out


class ConsumerGroup:
    protocol_type = "consumer"

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.target: dict[str, Assignment] = {}
        #: topic name -> (topic id, partition count) of every subscribed topic, when the target was computed.
        self.subscribed_metadata: dict[str, tuple[uuid.UUID, int]] = {}
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        self.state_timestamp_ms = now_ms
        #: Always empty (no KIP-394 round trip here); offset expiry reads it for any group.
        self.pending_members: dict[str, int] = {}
        #: __consumer_offsets key -> value as last written for this group (see consumer_group_records).
        self.persisted: dict[bytes, bytes] = {}

    @property
    def state(self) -> GroupState:
        return GroupState.STABLE if self.members else GroupState.EMPTY

    @property
    def state_name(self) -> str:
        """KIP-848 state: Empty, Assigning, Reconciling or Stable."""
        if not self.members:
            return "Empty"
        if self.assignment_epoch != self.group_epoch:
            return "Assigning"
        if any(
            m.member_epoch != self.assignment_epoch
            or m.assigned != self.target.get(m.member_id, {})
            for m in self.members.values()
        ):
            return "Reconciling"
        return "Stable"

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topics()}

    def all_classic_except(self, member_id: str) -> bool:
        """Every other member speaks the classic protocol (and there is one): the group may downgrade."""
        others = [m for m in self.members.values() if m.member_id != member_id]
        return bool(others) and all(m.classic is not None for m in others)

    def preferred_assignor(self) -> str:
        """The server assignor most members ask for (Kafka's computePreferredServerAssignor), else uniform."""
        counts = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        return counts.most_common(1)[0][0] if counts else DEFAULT_ASSIGNOR

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m
        return None

    def owned_by_others(self, member_id: str) -> set[tuple[uuid.UUID, int]]:
        return {
            (t, p)
            for m in self.members.values()
            if m.member_id != member_id
            for t, ps in m.assigned.items()
            for p in ps
        }

    def resolve_regexes(self, topics: TopicMetadata) -> bool:
        """Match every member's SubscribedTopicRegex against the topics; True if a resolution changed
        (not counting the first one after a load, whose topics the persisted metadata already holds)."""
        changed = False
        names = sorted(topics)
        for m in self.members.values():
            if m.subscribed_topic_regex is None:
                continue
            resolved = resolve_regex(m.subscribed_topic_regex, names)
            if resolved != m.regex_topics:
                changed |= m.regex_topics is not None
                m.regex_topics = resolved
        return changed

    def compute_target(self, topics: TopicMetadata) -> None:
        """A new target assignment from the preferred server assignor, stamped with the group epoch."""
        self.subscribed_metadata = {t: topics[t] for t in self.subscribed_topics() if t in topics}
        subscriptions = {
            m.member_id: {topics[t][0] for t in m.subscribed_topics() if t in topics}
            for m in self.members.values()
        }
        partitions = dict(self.subscribed_metadata.values())
        assignor = ASSIGNORS[self.preferred_assignor()]
        self.target = assignor(
            subscriptions, partitions, {m.member_id: m.assigned for m in self.members.values()}
        )
        self.assignment_epoch = self.group_epoch

    def reconcile(self, member: ConsumerMember, owned: Assignment | None, now_ms: int) -> None:
        """Revoke first; once the member confirms, hand it the target partitions nobody else holds.

        ``owned`` is what the member reports owning, None when unchanged since its last report.
        A member asked to revoke must do so within its rebalance timeout or be fenced.
        """
        if owned is not None:
            member.reported_owned = owned
        target = self.target.get(member.member_id, {})
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
        taken = self.owned_by_others(member.member_id)
        for topic_id, parts in without(target, member.assigned).items():
            free = {p for p in parts if (topic_id, p) not in taken}
            if free:
                member.assigned.setdefault(topic_id, set()).update(free)
        member.to_send = member.assigned
        # Until the member reports otherwise, it owns what it was given.
        member.reported_owned = union(member.reported_owned, member.assigned)
        if member.member_epoch != self.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch

    def validate_offset_commit(self, member_id: str, member_epoch: int) -> int:
        """KIP-848: a commit names a member and its current epoch (or none at all in an empty group);
        a classic member's generation is its member epoch (ILLEGAL_GENERATION when it is not)."""
        if member_epoch < 0 and not member_id and not self.members:
            return ErrorCode.none
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.member_epoch:
            return (
                ErrorCode.illegal_generation
                if member.classic is not None
                else ErrorCode.stale_member_epoch
            )
        return ErrorCode.none

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int:
        """OffsetFetch v9+ names the member asking; an admin names none (validateOffsetFetch)."""
        if member_id is None and member_epoch < 0:
            return ErrorCode.none
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.member_epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none

    def copy(self) -> ConsumerGroup:
        """An independent copy (for coordinator snapshots), much cheaper than copy.deepcopy."""
        c = copy.copy(self)
        c.members = {
            mid: dataclasses.replace(
                m,
                subscribed_topic_names=list(m.subscribed_topic_names),
                assigned=copy_assignment(m.assigned),
                to_send=copy_assignment(m.to_send),
                last_sent=copy_assignment(m.last_sent),
                reported_owned=copy_assignment(m.reported_owned),
            )
            for mid, m in self.members.items()
        }
        c.target = {mid: copy_assignment(a) for mid, a in self.target.items()}
        c.subscribed_metadata = dict(self.subscribed_metadata)
        c.offsets = dict(self.offsets)
        c.pending_members = dict(self.pending_members)
        c.persisted = dict(self.persisted)
        return c
