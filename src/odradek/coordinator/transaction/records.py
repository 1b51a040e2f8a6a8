"""__transaction_state record formats, byte for byte as Kafka writes them.

Kafka's TransactionLog serializes a transactional id's metadata as a
version-prefixed TransactionLogKey (v0 only, not flexible: int16 version 0, then
the id as an int16-length string) and a version-prefixed TransactionLogValue
(v0, or v1 with tagged fields once ``transaction.version`` >= 1 is finalized). A
deleted id is a tombstone. The value's partitions are grouped by topic; the
tagged fields PreviousProducerId (0), NextProducerId (1) and
ClientTransactionVersion (2) are written only when they differ from their
defaults, which is what Kafka's generated writer does. Kafka never sets the
producer-id tags (they default to -1), and neither do we: reading them is
enough to load a log another broker wrote.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from odradek.protocol import wire

_VALUE_HEAD = struct.Struct(">qhib")

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
#: TransactionLogValue versions: 0 up to transaction.version 0, 1 (flexible) from level 1.
VALUE_VERSIONS = (0, 1)
TAG_PREVIOUS_PRODUCER_ID, TAG_NEXT_PRODUCER_ID, TAG_CLIENT_TRANSACTION_VERSION = 0, 1, 2


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """One transactional id's state as the log stores it."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    #: (topic, partition ids) in the order written; None for Empty (Kafka writes null).
    transaction_partitions: tuple[tuple[str, tuple[int, ...]], ...] | None
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    #: Tags this version does not know, kept so a rewrite loses nothing.
    unknown_tags: dict[int, bytes] = field(default_factory=dict, compare=False)


def encode_key(transactional_id: str) -> bytes:
    return wire.int16(KEY_VERSION) + wire.string(transactional_id, False)


def decode_key(data: bytes) -> str:
    buf = memoryview(data)
    version, pos = wire.read_int16(buf, 0)
    if version != KEY_VERSION:
        raise ValueError(f"unknown TransactionLogKey version {version}")
    tid, _ = wire.read_string(buf, pos, False)
    if tid is None:
        raise ValueError("TransactionLogKey without a transactional id")
    return tid


def encode_value(value: TransactionLogValue, version: int) -> bytes:
    """Version-prefixed TransactionLogValue ``version`` (0 or 1)."""
    if version not in VALUE_VERSIONS:
        raise ValueError(f"unknown TransactionLogValue version {version}")
    flexible = version >= 1
    out = bytearray(wire.int16(version))
    out += _VALUE_HEAD.pack(
        value.producer_id,
        value.producer_epoch,
        value.transaction_timeout_ms,
        value.transaction_status,
    )
    parts = value.transaction_partitions
    out += wire.array_length(-1 if parts is None else len(parts), flexible)
    for topic, ids in parts or ():
        out += wire.string(topic, flexible)
        out += wire.array_length(len(ids), flexible)
        out += b"".join(wire.int32(i) for i in ids)
        if flexible:
            out += b"\x00"  # PartitionsSchema's (empty) tagged fields
    out += wire.int64(value.last_update_timestamp_ms)
    out += wire.int64(value.start_timestamp_ms)
    if flexible:
        tags = dict(value.unknown_tags)
        if value.previous_producer_id != -1:
            tags[TAG_PREVIOUS_PRODUCER_ID] = wire.int64(value.previous_producer_id)
        if value.next_producer_id != -1:
            tags[TAG_NEXT_PRODUCER_ID] = wire.int64(value.next_producer_id)
        if value.client_transaction_version != 0:
            tags[TAG_CLIENT_TRANSACTION_VERSION] = wire.int16(value.client_transaction_version)
        out += wire.uvarint(len(tags))
        for tag, raw in sorted(tags.items()):
            out += wire.uvarint(tag) + wire.uvarint(len(raw)) + raw
    return bytes(out)


def decode_value(data: bytes) -> TransactionLogValue:
    """A version-prefixed TransactionLogValue; ValueError for versions Kafka does not define
    and for truncated bytes."""
    buf = memoryview(data)
    version, pos = wire.read_int16(buf, 0)
    if version not in VALUE_VERSIONS:
        raise ValueError(f"unknown TransactionLogValue version {version}")
    flexible = version >= 1
    if len(buf) < pos + _VALUE_HEAD.size:
        raise wire.Truncated("TransactionLogValue is truncated")
    pid, epoch, timeout, status = _VALUE_HEAD.unpack_from(buf, pos)
    pos += _VALUE_HEAD.size
    count, pos = wire.read_array_length(buf, pos, flexible)
    partitions: list[tuple[str, tuple[int, ...]]] | None = None if count < 0 else []
    for _ in range(max(count, 0)):
        topic, pos = wire.read_string(buf, pos, flexible)
        n, pos = wire.read_array_length(buf, pos, flexible)
        ids = []
        for _ in range(max(n, 0)):
            pid_, pos = wire.read_int32(buf, pos)
            ids.append(pid_)
        if flexible:
            pos = wire.skip_tagged_fields(buf, pos)
        assert partitions is not None
        partitions.append((topic or "", tuple(ids)))
    last_update, pos = wire.read_int64(buf, pos)
    start, pos = wire.read_int64(buf, pos)
    previous = next_ = -1
    client_version = 0
    unknown: dict[int, bytes] = {}
    if flexible:
        n, pos = wire.read_uvarint(buf, pos)
        for _ in range(n):
            tag, pos = wire.read_uvarint(buf, pos)
            size, pos = wire.read_uvarint(buf, pos)
            raw = buf[pos : pos + size]
            pos += size
            if tag == TAG_PREVIOUS_PRODUCER_ID:
                previous, _ = wire.read_int64(raw, 0)
            elif tag == TAG_NEXT_PRODUCER_ID:
                next_, _ = wire.read_int64(raw, 0)
            elif tag == TAG_CLIENT_TRANSACTION_VERSION:
                client_version, _ = wire.read_int16(raw, 0)
            else:
                unknown[tag] = bytes(raw)
    return TransactionLogValue(
        pid,
        epoch,
        timeout,
        status,
        None if partitions is None else tuple(partitions),
        last_update,
        start,
        previous,
        next_,
        client_version,
        unknown,
    )
