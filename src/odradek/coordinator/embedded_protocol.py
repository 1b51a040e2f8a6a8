"""The consumer protocol embedded in classic JoinGroup and SyncGroup (protocol type "consumer").

ConsumerProtocolSubscription (v0 topics and user data, v1 owned partitions, v2
generation, v3 rack) is what a classic consumer sends in JoinGroup metadata;
ConsumerProtocolAssignment (same layout in v0-v3) is what SyncGroup hands it.
The coordinator reads and writes them only when classic members live in a
consumer-protocol group (KIP-848 migration), where the broker assigns.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from odradek.coordinator.records import Reader, Writer

#: Newest version of the embedded protocol we know.
MAX_VERSION = 3


@dataclass(slots=True)
class Subscription:
    version: int
    topics: list[str]
    owned: dict[str, set[int]] = field(default_factory=dict)
    rack_id: str | None = None


def version_of(metadata: bytes) -> int:
    return struct.unpack(">h", metadata[:2])[0] if len(metadata) >= 2 else 0


def decode_subscription(data: bytes) -> Subscription:
    r = Reader(data)
    version = r.int16()
    topics = [r.string() or "" for _ in range(max(r.array_len(), 0))]
    r.bytes_()  # user data
    owned: dict[str, set[int]] = {}
    rack = None
    if version >= 1:
        for _ in range(max(r.array_len(), 0)):
            topic = r.string() or ""
            owned[topic] = {r.int32() for _ in range(max(r.array_len(), 0))}
    if version >= 2:
        r.int32()  # generation
    if version >= 3:
        rack = r.string()
    return Subscription(version, topics, {t: ps for t, ps in owned.items() if ps}, rack)


def encode_assignment(partitions: dict[str, set[int]], version: int) -> bytes:
    w = Writer(False)
    w.int16(min(max(version, 0), MAX_VERSION))
    w.array_len(len(partitions))
    for topic, parts in sorted(partitions.items()):
        w.string(topic)
        w.array_len(len(parts))
        for p in sorted(parts):
            w.int32(p)
    w.bytes_(None)
    return w.done()


def decode_assignment(data: bytes) -> dict[str, set[int]]:
    if not data:
        return {}
    r = Reader(data)
    r.int16()
    out: dict[str, set[int]] = {}
    for _ in range(max(r.array_len(), 0)):
        topic = r.string() or ""
        parts = {r.int32() for _ in range(max(r.array_len(), 0))}
        if parts:
            out[topic] = parts
    return out
