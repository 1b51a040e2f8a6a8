"""A classic-protocol consumer group: its members, generation and state.

States and transitions follow Kafka's ClassicGroup:
Empty -> PreparingRebalance -> CompletingRebalance -> Stable -> PreparingRebalance ...,
and any state -> Dead when the group is deleted or its offsets expire.

The group also decides whether an offset commit may be applied to it
(``validate_offset_commit``), as Kafka's ClassicGroup.validateOffsetCommit: the
member and its generation are checked before the group's state, so a commit
from a stale or unknown member during a rebalance learns that it must rejoin
(ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID) rather than that a rebalance runs.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from odradek.coordinator.offsets import OffsetAndMetadata
from odradek.protocol.errors import ErrorCode


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


#: Where each state may go next, as in Kafka (Dead is reachable from all).
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.DEAD: frozenset(GroupState),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}


@dataclass(slots=True)
class JoinResult:
    """What a JoinGroup answers once the join completes."""

    error: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    #: (member id, group instance id, metadata); only the leader gets them.
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


JoinCallback = Callable[[JoinResult], Any]
SyncCallback = Callable[[SyncResult], Any]


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    #: (protocol name, metadata) in the member's order of preference.
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: JoinCallback | None = None
    awaiting_sync: SyncCallback | None = None
    #: The moment the session expires unless a heartbeat (or join/sync) comes first.
    session_deadline_ms: int = 0

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(protocol)

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        return next(name for name in self.protocol_names() if name in candidates)


class ClassicGroup:
    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp_ms = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        #: group.instance.id -> member id of the static member holding it.
        self.static_members: dict[str, str] = {}
        #: Member ids handed out by MEMBER_ID_REQUIRED and not yet used to join (KIP-394).
        self.pending_members: dict[str, int] = {}
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        #: When the current join phase ends even if some members have not rejoined.
        self.rebalance_deadline_ms: int | None = None
        #: While the first rebalance of an empty group waits for more members
        #: (group.initial.rebalance.delay.ms); the join completes only when the delay ends.
        self.in_initial_delay = False
        #: How much of the rebalance timeout further delay extensions may still use.
        self.initial_delay_remaining_ms: int = 0

    def is_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A static member whose instance id now belongs to another member id is a zombie (KIP-345)."""
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, generation_id: int
    ) -> int:
        """The error an OffsetCommit to this group gets, or NONE (Kafka's validateOffsetCommit).

        A commit without a generation (an admin client, or a consumer that assigns itself) is
        accepted only while the group is Empty. Otherwise the member, then its generation, are
        checked before the state: only a valid member of the current generation is told that
        the group is completing a rebalance.
        """
        if self.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if generation_id < 0 and self.state is GroupState.EMPTY:
            return ErrorCode.none
        if generation_id >= 0 or member_id or instance_id is not None:
            if instance_id is not None:
                current = self.static_members.get(instance_id)
                if current is None:
                    return ErrorCode.unknown_member_id
                if current != member_id:
                    return ErrorCode.fenced_instance_id
            if member_id not in self.members:
                return ErrorCode.unknown_member_id
            if generation_id != self.generation_id:
                return ErrorCode.illegal_generation
        else:
            return ErrorCode.unknown_member_id
        if self.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise AssertionError(
                f"group {self.group_id}: illegal transition {self.state} -> {state}"
            )
        self.state = state
        self.state_timestamp_ms = now_ms

    def add_member(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.pop(member.member_id, None)

    def remove_member(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(
        self, instance_id: str, old_member_id: str, new_member_id: str
    ) -> Member:
        """Give a restarted static member a new id, keeping its place and assignment (KIP-345)."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[instance_id] = new_member_id
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        return member

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        """Whether a member with these protocols may join (same type, one protocol in common)."""
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & set(names))

    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        common = set(members[0].protocol_names())
        for m in members[1:]:
            common &= set(m.protocol_names())
        return common

    def select_protocol(self) -> str:
        """Kafka's vote: every member votes for its favourite common protocol; most votes win."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(
            m.awaiting_join is not None for m in self.members.values()
        )

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, or None when unknown (not the consumer protocol)."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            try:
                topics |= parse_subscription_topics(m.metadata(self.protocol_name))
            except (KeyError, ValueError):
                return None
        return topics


def parse_subscription_topics(metadata: bytes) -> set[str]:
    """Topic names of a ConsumerProtocolSubscription (any version: the topics come first)."""
    if len(metadata) < 6:
        raise ValueError("short subscription")
    (count,) = struct.unpack_from(">i", metadata, 2)
    pos, topics = 6, set()
    for _ in range(count):
        (n,) = struct.unpack_from(">h", metadata, pos)
        pos += 2
        topics.add(metadata[pos : pos + n].decode())
        pos += n
    return topics
