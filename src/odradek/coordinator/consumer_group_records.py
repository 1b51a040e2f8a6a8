"""A consumer-protocol group as __consumer_offsets records, and back.

Kafka writes each change of a KIP-848 group as the records that changed
(member metadata, group epoch, subscribed partition counts, target assignment,
current assignment). We get the same records by rendering the whole group and
comparing with what was last written (``ConsumerGroup.persisted``): only keys
whose value differs are written, keys no longer present get a tombstone. After
a restart ``replay`` rebuilds the group from the records in log order.
"""

from __future__ import annotations

from collections.abc import Collection

from odradek.coordinator import records as rec
from odradek.coordinator.consumer_group import ConsumerGroup, ConsumerMember, union

#: MemberState values of ConsumerGroupCurrentMemberAssignmentValue.
STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS = 0, 1, 2

#: Order in which Kafka writes a change's new values: member, subscription metadata, group epoch,
#: target assignment (members, then its epoch), current assignments.
_VALUE_ORDER = (
    rec.MEMBER_METADATA,
    rec.PARTITION_METADATA,
    rec.GROUP_EPOCH,
    rec.TARGET_ASSIGNMENT_MEMBER,
    rec.TARGET_ASSIGNMENT_METADATA,
    rec.CURRENT_MEMBER_ASSIGNMENT,
)


def member_state(group: ConsumerGroup, member: ConsumerMember) -> int:
    if member.pending_revocation():
        return UNREVOKED_PARTITIONS
    if member.assigned != group.target.get(member.member_id, {}):
        return UNRELEASED_PARTITIONS
    return STABLE


def render(
    group: ConsumerGroup, only_members: Collection[str] | None = None
) -> dict[int, list[tuple[bytes, bytes]]]:
    """Every record that describes the group now, by record type; with ``only_members``, the
    group-level records and those of these members only."""
    gid = group.group_id
    out: dict[int, list[tuple[bytes, bytes]]] = {t: [] for t in _VALUE_ORDER}

    def key(record_type: int, member_id: str | None = None) -> bytes:
        return rec.encode_consumer_group_key(rec.ConsumerGroupKey(record_type, gid, member_id))

    members = (
        group.members.values()
        if only_members is None
        else [group.members[m] for m in only_members if m in group.members]
    )
    for m in members:
        out[rec.MEMBER_METADATA].append(
            (
                key(rec.MEMBER_METADATA, m.member_id),
                rec.encode_member_metadata_value(
                    rec.ConsumerGroupMemberMetadataValue(
                        m.instance_id,
                        m.rack_id,
                        m.client_id,
                        m.client_host,
                        list(m.subscribed_topic_names),
                        m.subscribed_topic_regex,
                        m.rebalance_timeout_ms,
                        m.server_assignor,
                        m.classic,
                    )
                ),
            )
        )
        pending = m.pending_revocation()
        out[rec.CURRENT_MEMBER_ASSIGNMENT].append(
            (
                key(rec.CURRENT_MEMBER_ASSIGNMENT, m.member_id),
                rec.encode_current_member_assignment_value(
                    rec.ConsumerGroupCurrentMemberAssignmentValue(
                        m.member_epoch,
                        m.previous_member_epoch,
                        member_state(group, m),
                        m.to_send,
                        pending,
                    )
                ),
            )
        )
    out[rec.PARTITION_METADATA].append(
        (
            key(rec.PARTITION_METADATA),
            rec.encode_partition_metadata_value(group.subscribed_metadata),
        )
    )
    out[rec.GROUP_EPOCH].append(
        (key(rec.GROUP_EPOCH), rec.encode_group_epoch_value(group.group_epoch))
    )
    targets = (
        group.target.items()
        if only_members is None
        else [(m, group.target[m]) for m in only_members if m in group.target]
    )
    for member_id, target in targets:
        out[rec.TARGET_ASSIGNMENT_MEMBER].append(
            (
                key(rec.TARGET_ASSIGNMENT_MEMBER, member_id),
                rec.encode_target_assignment_member_value(target),
            )
        )
    out[rec.TARGET_ASSIGNMENT_METADATA].append(
        (
            key(rec.TARGET_ASSIGNMENT_METADATA),
            rec.encode_target_assignment_metadata_value(group.assignment_epoch),
        )
    )
    return out


def changes(
    group: ConsumerGroup, deleted: bool = False, only_members: Collection[str] | None = None
) -> list[tuple[bytes, bytes | None]]:
    """The records to write so the log matches the group (all tombstones when ``deleted``); updates
    ``group.persisted`` to what they leave in the log.

    ``only_members`` says that nothing changed but these members (still in the group) and the
    group-level records: only those are rendered, which keeps a heartbeat's cost independent of
    the group's size.
    """
    rendered = {} if deleted else render(group, only_members)
    current = {k: v for t in _VALUE_ORDER for k, v in rendered.get(t, ())}
    out: list[tuple[bytes, bytes | None]] = []
    if only_members is None:
        # Tombstones first, the per-member ones before the group's (current, target, member, then group-level).
        gone = sorted(
            (k for k in group.persisted if k not in current),
            key=lambda k: -int.from_bytes(k[:2], "big"),
        )
        out = [(k, None) for k in gone]
    for t in _VALUE_ORDER:
        out.extend((k, v) for k, v in rendered.get(t, ()) if group.persisted.get(k) != v)
    if only_members is None:
        group.persisted = current
    else:
        group.persisted.update(current)
    return out


def replay(
    group: ConsumerGroup,
    key: rec.ConsumerGroupKey,
    raw_key: bytes,
    value: bytes | None,
    session_timeout_ms: int,
    now_ms: int,
) -> None:
    """Apply one record of the group read back at start-up (type 3 tombstones are the caller's)."""
    if value is None:
        group.persisted.pop(raw_key, None)
    else:
        group.persisted[raw_key] = value
    t, member_id = key.record_type, key.member_id
    if t == rec.GROUP_EPOCH:
        if value is not None:
            group.group_epoch = rec.decode_epoch_value(value)
    elif t == rec.PARTITION_METADATA:
        group.subscribed_metadata = (
            {} if value is None else rec.decode_partition_metadata_value(value)
        )
    elif t == rec.TARGET_ASSIGNMENT_METADATA:
        if value is not None:
            group.assignment_epoch = rec.decode_epoch_value(value)
    elif t == rec.TARGET_ASSIGNMENT_MEMBER:
        assert member_id is not None
        if value is None:
            group.target.pop(member_id, None)
        else:
            group.target[member_id] = rec.decode_target_assignment_member_value(value)
    elif t == rec.MEMBER_METADATA:
        assert member_id is not None
        if value is None:
            group.members.pop(member_id, None)
            return
        v = rec.decode_member_metadata_value(value)
        m = _member(group, member_id, session_timeout_ms, now_ms)
        m.instance_id, m.rack_id, m.client_id, m.client_host = (
            v.instance_id,
            v.rack_id,
            v.client_id,
            v.client_host,
        )
        m.subscribed_topic_names, m.subscribed_topic_regex = (
            list(v.subscribed_topic_names),
            v.subscribed_topic_regex,
        )
        m.rebalance_timeout_ms, m.server_assignor = v.rebalance_timeout_ms, v.server_assignor
        m.classic = v.classic
        if v.classic is not None:
            m.session_deadline_ms = now_ms + v.classic.session_timeout_ms
    elif t == rec.CURRENT_MEMBER_ASSIGNMENT and value is not None:
        assert member_id is not None
        a = rec.decode_current_member_assignment_value(value)
        m = _member(group, member_id, session_timeout_ms, now_ms)
        m.member_epoch, m.previous_member_epoch = a.member_epoch, a.previous_member_epoch
        m.to_send = a.assigned
        m.assigned = union(a.assigned, a.pending_revocation)
        # Until it reports otherwise, the member owns everything it was given.
        m.reported_owned = union(m.assigned, {})
        m.last_sent = None
        # Kafka reschedules the rebalance timeout of a member still revoking when it loads the group.
        m.revocation_deadline_ms = now_ms + m.rebalance_timeout_ms if a.pending_revocation else None


def _member(
    group: ConsumerGroup, member_id: str, session_timeout_ms: int, now_ms: int
) -> ConsumerMember:
    m = group.members.get(member_id)
    if m is None:
        # A loaded member gets a fresh session, as Kafka schedules one for every member it loads.
        m = group.members[member_id] = ConsumerMember(
            member_id, None, None, "", "", [], None, -1, now_ms + session_timeout_ms
        )
    return m
