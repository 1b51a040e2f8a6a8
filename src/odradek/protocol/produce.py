"""Hand-written Produce codecs (v3-v11): the request decoder and the response encoder.

kio would copy every partition's records into a new bytes object; here each one
is a memoryview into the received frame, handed unchanged to the log. The
response is the other half of every Produce round trip: encoded here with a few
struct packs instead of building and walking kio's dataclasses, which cost more
than the append itself for small requests. Both are tested byte-for-byte against
kio in tests/network/test_codecs.py and tests/protocol/test_produce_response.py.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from odradek.protocol import wire

FIRST_FLEXIBLE_VERSION = 9


@dataclass(frozen=True, slots=True)
class ProducePartitionData:
    index: int
    records: memoryview | None


@dataclass(frozen=True, slots=True)
class ProduceTopicData:
    name: str
    partitions: list[ProducePartitionData]


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topics: list[ProduceTopicData]


def decode_produce_request(api_version: int, body: memoryview) -> ProduceRequest:
    """Decode a Produce request body (the bytes after the request header)."""
    flexible = api_version >= FIRST_FLEXIBLE_VERSION
    transactional_id, pos = wire.read_string(body, 0, flexible)
    acks, pos = wire.read_int16(body, pos)
    timeout_ms, pos = wire.read_int32(body, pos)
    n_topics, pos = wire.read_array_length(body, pos, flexible)
    topics = []
    for _ in range(max(n_topics, 0)):
        name, pos = wire.read_string(body, pos, flexible)
        if name is None:
            raise ValueError("null topic name in produce request")
        n_partitions, pos = wire.read_array_length(body, pos, flexible)
        partitions = []
        for _ in range(max(n_partitions, 0)):
            index, pos = wire.read_int32(body, pos)
            records, pos = wire.read_bytes(body, pos, flexible)
            if flexible:
                pos = wire.skip_tagged_fields(body, pos)
            partitions.append(ProducePartitionData(index, records))
        if flexible:
            pos = wire.skip_tagged_fields(body, pos)
        topics.append(ProduceTopicData(name, partitions))
    if flexible:
        pos = wire.skip_tagged_fields(body, pos)
    return ProduceRequest(transactional_id, acks, timeout_ms, topics)


@dataclass(slots=True)
class ProducePartitionResponse:
    index: int
    error_code: int = 0
    base_offset: int = -1
    #: -1 unless the topic uses LogAppendTime.
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    #: (batch index, message) per rejected record (v8+).
    record_errors: list[tuple[int, str | None]] = field(default_factory=list)


#: index, error code, base offset, log append time.
_PARTITION = struct.Struct(">ihqq")


def encode_produce_response(
    api_version: int, topics: list[tuple[str, list[ProducePartitionResponse]]], throttle_time_ms: int = 0
) -> bytes:
    """The Produce response body (no header). No tagged fields are written: Kafka sends
    current_leader and node_endpoints only with NOT_LEADER_OR_FOLLOWER, which a single
    leader never answers."""
    flexible = api_version >= FIRST_FLEXIBLE_VERSION
    array_length, string = wire.array_length, wire.string
    out = [array_length(len(topics), flexible)]
    for name, partitions in topics:
        out.append(string(name, flexible))
        out.append(array_length(len(partitions), flexible))
        for p in partitions:
            out.append(_PARTITION.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms))
            if api_version >= 5:
                out.append(wire.int64(p.log_start_offset))
            if api_version >= 8:
                out.append(array_length(len(p.record_errors), flexible))
                for batch_index, message in p.record_errors:
                    out.append(wire.int32(batch_index))
                    out.append(string(message, flexible))
                    if flexible:
                        out.append(b"\x00")
                out.append(string(p.error_message, flexible))
            if flexible:
                out.append(b"\x00")
        if flexible:
            out.append(b"\x00")
    out.append(wire.int32(throttle_time_ms))
    if flexible:
        out.append(b"\x00")
    return b"".join(out)
