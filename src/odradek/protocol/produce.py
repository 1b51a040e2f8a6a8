"""Hand-written Produce request decoder (v3-v11): record blobs stay slices of the frame.

kio would copy every partition's records into a new bytes object; here each one
is a memoryview into the received frame, handed unchanged to the log. Tested
byte-for-byte against kio's decoder in tests/network/test_produce_codec.py.
"""

from __future__ import annotations

from dataclasses import dataclass

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
