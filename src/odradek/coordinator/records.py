"""The __consumer_offsets record formats, byte for byte as Kafka writes them.

Key: int16 version then the key struct (OffsetCommitKey v0/1: group, topic,
partition; GroupMetadataKey v2: group). Value: int16 version then the value
struct (OffsetCommitValue v0-4, GroupMetadataValue v0-4; v4 is flexible). A
null value is a tombstone that removes the key when the topic is compacted.
Kafka writes OffsetCommitValue v3 (v1 when an explicit expire timestamp is set)
and GroupMetadataValue v3; we do the same and read every version.

Consumer-protocol groups (KIP-848) add six record types, told apart by the key's
leading int16 (Kafka's record type): ConsumerGroupMetadata (3, the group epoch),
ConsumerGroupPartitionMetadata (4, the subscribed topics' partition counts),
ConsumerGroupMemberMetadata (5), ConsumerGroupTargetAssignmentMetadata (6, the
assignment epoch), ConsumerGroupTargetAssignmentMember (7) and
ConsumerGroupCurrentMemberAssignment (8). Their keys are not flexible; their
values are version 0, flexible (compact strings and arrays, tagged fields).
Kafka 4.1 replaced record type 4 by a metadata hash in ConsumerGroupMetadataValue
(KIP-1101) but still reads type 4; we write the 4.0 form.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

#: The compacted topic that holds every group's offsets and metadata.
OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberMetadata] = field(default_factory=list)


class Writer:
    """Kafka primitive types, classic or flexible (compact) encoding."""

    def __init__(self, flexible: bool) -> None:
        self.parts: list[bytes] = []
        self.flexible = flexible

    def int8(self, v: int) -> None:
        self.parts.append(struct.pack(">b", v))

    def int16(self, v: int) -> None:
        self.parts.append(struct.pack(">h", v))

    def uuid(self, v: uuid.UUID) -> None:
        self.parts.append(v.bytes)

    def int32(self, v: int) -> None:
        self.parts.append(struct.pack(">i", v))

    def int64(self, v: int) -> None:
        self.parts.append(struct.pack(">q", v))

    def uvarint(self, v: int) -> None:
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        self.parts.append(bytes(out))

    def bytes_(self, v: bytes | None) -> None:
        if self.flexible:
            self.uvarint(0 if v is None else len(v) + 1)
        else:
            self.int32(-1 if v is None else len(v))
        if v is not None:
            self.parts.append(v)

    def string(self, v: str | None) -> None:
        raw = None if v is None else v.encode()
        if self.flexible:
            self.bytes_(raw)
        else:
            self.int16(-1 if raw is None else len(raw))
            if raw is not None:
                self.parts.append(raw)

    def array_len(self, n: int) -> None:
        if self.flexible:
            self.uvarint(n + 1)
        else:
            self.int32(n)

    def tags(self) -> None:
        if self.flexible:
            self.uvarint(0)

    def done(self) -> bytes:
        return b"".join(self.parts)


class Reader:
    """Reads what Writer writes; raises ValueError on truncated input."""

    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.flexible = flexible

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("truncated __consumer_offsets record")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int8(self) -> int:
        value: int = struct.unpack(">b", self._take(1))[0]
        return value

    def int16(self) -> int:
        value: int = struct.unpack(">h", self._take(2))[0]
        return value

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self._take(16)))

    def int32(self) -> int:
        value: int = struct.unpack(">i", self._take(4))[0]
        return value

    def int64(self) -> int:
        value: int = struct.unpack(">q", self._take(8))[0]
        return value

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def bytes_(self) -> bytes | None:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        return None if n < 0 else bytes(self._take(n))

    def string(self) -> str | None:
        if self.flexible:
            raw = self.bytes_()
        else:
            n = self.int16()
            raw = None if n < 0 else bytes(self._take(n))
        return None if raw is None else raw.decode()

    def array_len(self) -> int:
        return self.uvarint() - 1 if self.flexible else self.int32()

    def skip_tags(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self._take(self.uvarint())


def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    w = Writer(False)
    w.int16(OFFSET_COMMIT_KEY_VERSION)
    w.string(key.group)
    w.string(key.topic)
    w.int32(key.partition)
    return w.done()


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    w = Writer(False)
    w.int16(GROUP_METADATA_KEY_VERSION)
    w.string(key.group)
    return w.done()


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | ConsumerGroupKey:
    """Any key, told apart by its leading int16 as Kafka does (0/1 offsets, 2 group, 3-8 KIP-848)."""
    r = Reader(data)
    version = r.int16()
    group = r.string() or ""
    if version in (0, 1):
        return OffsetCommitKey(group, r.string() or "", r.int32())
    if version == 2:
        return GroupMetadataKey(group)
    if version in (GROUP_EPOCH, PARTITION_METADATA, TARGET_ASSIGNMENT_METADATA):
        return ConsumerGroupKey(version, group)
    if version in (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT):
        return ConsumerGroupKey(version, group, r.string() or "")
    raise ValueError(f"unknown __consumer_offsets key version {version}")


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    version = 1 if value.expire_timestamp >= 0 else OFFSET_COMMIT_VALUE_VERSION
    w = Writer(False)
    w.int16(version)
    w.int64(value.offset)
    if version >= 3:
        w.int32(value.leader_epoch)
    w.string(value.metadata)
    w.int64(value.commit_timestamp)
    if version == 1:
        w.int64(value.expire_timestamp)
    return w.done()


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    r = Reader(data)
    version = r.int16()
    if not 0 <= version <= 4:
        raise ValueError(f"unknown OffsetCommitValue version {version}")
    r.flexible = version >= 4
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string() or ""
    commit_timestamp = r.int64()
    expire = r.int64() if version == 1 else -1
    r.skip_tags()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire)


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    w = Writer(False)
    w.int16(GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    w.int64(value.current_state_timestamp)
    w.array_len(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return w.done()


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = Reader(data)
    version = r.int16()
    if not 0 <= version <= 4:
        raise ValueError(f"unknown GroupMetadataValue version {version}")
    r.flexible = version >= 4
    protocol_type = r.string() or ""
    generation = r.int32()
    protocol = r.string()
    leader = r.string()
    state_ts = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.string() or ""
        instance_id = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        subscription = r.bytes_() or b""
        assignment = r.bytes_() or b""
        r.skip_tags()
        members.append(
            MemberMetadata(
                member_id,
                client_id,
                client_host,
                rebalance_timeout if version >= 1 else session_timeout,
                session_timeout,
                subscription,
                assignment,
                instance_id,
            )
        )
    r.skip_tags()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, members)


# ---- KIP-848 consumer group records ------------------------------------------------------

#: Record types (the key's leading int16) of consumer-protocol groups.
GROUP_EPOCH = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8

#: Topic id -> partitions, as ConsumerGroup*Assignment values hold them.
TopicPartitions = dict[uuid.UUID, set[int]]


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """Key of record types 3-8: the group, and the member for the per-member types (5, 7, 8)."""

    record_type: int
    group: str
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """A consumer group member that speaks the classic protocol (tagged field 0 of its metadata)."""

    session_timeout_ms: int
    #: (protocol name, metadata) as in its JoinGroup.
    protocols: list[tuple[str, bytes]]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    #: MemberState: 0 stable, 1 unrevoked partitions, 2 unreleased partitions.
    state: int
    assigned: TopicPartitions
    pending_revocation: TopicPartitions


def encode_consumer_group_key(key: ConsumerGroupKey) -> bytes:
    w = Writer(False)
    w.int16(key.record_type)
    w.string(key.group)
    if key.member_id is not None:
        w.string(key.member_id)
    return w.done()


def _epoch_value(epoch: int) -> bytes:
    w = Writer(True)
    w.int16(0)
    w.int32(epoch)
    w.tags()
    return w.done()


def encode_group_epoch_value(epoch: int) -> bytes:
    """ConsumerGroupMetadataValue v0: the group epoch."""
    return _epoch_value(epoch)


def encode_target_assignment_metadata_value(assignment_epoch: int) -> bytes:
    """ConsumerGroupTargetAssignmentMetadataValue v0: the assignment epoch."""
    return _epoch_value(assignment_epoch)


def decode_epoch_value(data: bytes) -> int:
    """The epoch of a ConsumerGroupMetadataValue or ConsumerGroupTargetAssignmentMetadataValue."""
    r = Reader(data, flexible=True)
    r.int16()
    epoch = r.int32()
    r.skip_tags()
    return epoch


def encode_partition_metadata_value(topics: dict[str, tuple[uuid.UUID, int]]) -> bytes:
    """ConsumerGroupPartitionMetadataValue v0: (name, id, partition count) per subscribed topic, no racks."""
    w = Writer(True)
    w.int16(0)
    w.array_len(len(topics))
    for name, (topic_id, count) in sorted(topics.items()):
        w.uuid(topic_id)
        w.string(name)
        w.int32(count)
        w.array_len(0)
        w.tags()
    w.tags()
    return w.done()


def decode_partition_metadata_value(data: bytes) -> dict[str, tuple[uuid.UUID, int]]:
    r = Reader(data, flexible=True)
    r.int16()
    topics = {}
    for _ in range(r.array_len()):
        topic_id = r.uuid()
        name = r.string() or ""
        count = r.int32()
        for _ in range(r.array_len()):
            r.int32()
            for _ in range(r.array_len()):
                r.string()
            r.skip_tags()
        r.skip_tags()
        topics[name] = (topic_id, count)
    r.skip_tags()
    return topics


def encode_member_metadata_value(v: ConsumerGroupMemberMetadataValue) -> bytes:
    w = Writer(True)
    w.int16(0)
    w.string(v.instance_id)
    w.string(v.rack_id)
    w.string(v.client_id)
    w.string(v.client_host)
    w.array_len(len(v.subscribed_topic_names))
    for name in v.subscribed_topic_names:
        w.string(name)
    w.string(v.subscribed_topic_regex)
    w.int32(v.rebalance_timeout_ms)
    w.string(v.server_assignor)
    if v.classic is None:
        w.tags()
    else:
        c = Writer(True)
        c.int32(v.classic.session_timeout_ms)
        c.array_len(len(v.classic.protocols))
        for name, metadata in v.classic.protocols:
            c.string(name)
            c.bytes_(metadata)
            c.tags()
        c.tags()
        body = c.done()
        w.uvarint(1)
        w.uvarint(0)
        w.uvarint(len(body))
        w.parts.append(body)
    return w.done()


def decode_member_metadata_value(data: bytes) -> ConsumerGroupMemberMetadataValue:
    r = Reader(data, flexible=True)
    r.int16()
    instance_id = r.string()
    rack_id = r.string()
    client_id = r.string() or ""
    client_host = r.string() or ""
    names = [r.string() or "" for _ in range(r.array_len())]
    regex = r.string()
    rebalance_timeout = r.int32()
    assignor = r.string()
    classic = None
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        body = bytes(r._take(size))
        if tag == 0:  # ClassicMemberMetadata
            c = Reader(body, flexible=True)
            session = c.int32()
            protocols = []
            for _ in range(c.array_len()):
                name = c.string() or ""
                protocols.append((name, c.bytes_() or b""))
                c.skip_tags()
            classic = ClassicMemberMetadata(session, protocols)
    return ConsumerGroupMemberMetadataValue(
        instance_id,
        rack_id,
        client_id,
        client_host,
        names,
        regex,
        rebalance_timeout,
        assignor,
        classic,
    )


def _write_topic_partitions(w: Writer, tps: TopicPartitions) -> None:
    w.array_len(len(tps))
    for topic_id, parts in sorted(tps.items(), key=lambda kv: str(kv[0])):
        w.uuid(topic_id)
        w.array_len(len(parts))
        for p in sorted(parts):
            w.int32(p)
        w.tags()


def _read_topic_partitions(r: Reader) -> TopicPartitions:
    out: TopicPartitions = {}
    for _ in range(r.array_len()):
        topic_id = r.uuid()
        parts = {r.int32() for _ in range(r.array_len())}
        r.skip_tags()
        if parts:
            out[topic_id] = parts
    return out


def encode_target_assignment_member_value(assignment: TopicPartitions) -> bytes:
    w = Writer(True)
    w.int16(0)
    _write_topic_partitions(w, assignment)
    w.tags()
    return w.done()


def decode_target_assignment_member_value(data: bytes) -> TopicPartitions:
    r = Reader(data, flexible=True)
    r.int16()
    out = _read_topic_partitions(r)
    r.skip_tags()
    return out


def encode_current_member_assignment_value(v: ConsumerGroupCurrentMemberAssignmentValue) -> bytes:
    w = Writer(True)
    w.int16(0)
    w.int32(v.member_epoch)
    w.int32(v.previous_member_epoch)
    w.int8(v.state)
    _write_topic_partitions(w, v.assigned)
    _write_topic_partitions(w, v.pending_revocation)
    w.tags()
    return w.done()


def decode_current_member_assignment_value(
    data: bytes,
) -> ConsumerGroupCurrentMemberAssignmentValue:
    r = Reader(data, flexible=True)
    r.int16()
    epoch = r.int32()
    previous = r.int32()
    state = r.int8()
    assigned = _read_topic_partitions(r)
    pending = _read_topic_partitions(r)
    r.skip_tags()
    return ConsumerGroupCurrentMemberAssignmentValue(epoch, previous, state, assigned, pending)
