"""Hand-written Produce codecs (v3-v13): the request decoder and the response encoder.

kio would copy every partition's records into a new bytes object; here each one
is a memoryview into the received frame, handed unchanged to the log. The
response is the other half of every Produce round trip: encoded here with a few
struct packs instead of building and walking kio's dataclasses, which cost more
than the append itself for small requests. Both are tested byte-for-byte against
kio in tests/network/test_codecs.py, tests/protocol/test_produce_response.py and
tests/protocol/test_produce_versions.py.

v12 has v11's format (it only tells the broker the client follows KIP-890 part 2);
v13 names each topic by its id instead of its name (KIP-516), in the request and
the response.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from typing import NamedTuple

from odradek.protocol import wire

FIRST_FLEXIBLE_VERSION = 9
#: From v13 topics are named by id (KIP-516).
FIRST_TOPIC_ID_VERSION = 13


class ProducePartitionData(NamedTuple):
    # Kafka's field name; it shadows tuple.index, which nothing calls on this tuple.
    index: int  # type: ignore[assignment]
    records: memoryview | None


class ProduceTopicData(NamedTuple):
    #: "" from v13, where the request carries only ``topic_id``.
    name: str
    partitions: list[ProducePartitionData]
    #: None before v13.
    topic_id: uuid.UUID | None = None


class ProduceRequest(NamedTuple):
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topics: list[ProduceTopicData]


_ACKS_TIMEOUT = struct.Struct(">hi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def decode_produce_request(api_version: int, body: memoryview) -> ProduceRequest:
    """Decode a Produce request body (the bytes after the request header).

    Every request of a producer passes through here, so the fields are read with
    struct directly rather than through wire's general readers. A short or
    malformed body raises ValueError (wire.Truncated is one).
    """
    try:
        return _decode(api_version, body)
    except (IndexError, struct.error) as e:
        raise wire.Truncated(f"produce request body ends early: {e}") from None


def _uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    byte = buf[pos]  # IndexError past the end
    if byte < 0x80:
        return byte, pos + 1
    return wire.read_uvarint(buf, pos)


def _length(buf: memoryview, pos: int, flexible: bool, legacy: struct.Struct) -> tuple[int, int]:
    """A string, bytes or array length: compact (n + 1 as a varint) or ``legacy`` (int16/int32)."""
    if flexible:
        n, pos = _uvarint(buf, pos)
        return n - 1, pos
    return legacy.unpack_from(buf, pos)[0], pos + legacy.size


def _skip_tags(buf: memoryview, pos: int) -> int:
    if buf[pos] == 0:  # the usual empty section
        return pos + 1
    return wire.skip_tagged_fields(buf, pos)


def _decode(api_version: int, body: memoryview) -> ProduceRequest:
    flexible = api_version >= FIRST_FLEXIBLE_VERSION
    end = len(body)
    n, pos = _length(body, 0, flexible, _I16)
    transactional_id = None
    if n >= 0:
        if pos + n > end:
            raise IndexError("transactional id")
        transactional_id = str(body[pos : pos + n], "utf-8")
        pos += n
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(body, pos)
    n_topics, pos = _length(body, pos + 6, flexible, _I32)
    topics = []
    by_id = api_version >= FIRST_TOPIC_ID_VERSION
    for _ in range(n_topics):
        topic_id = None
        if by_id:
            if pos + 16 > end:
                raise IndexError("topic id")
            name, topic_id = "", uuid.UUID(bytes=bytes(body[pos : pos + 16]))
            pos += 16
        else:
            n, pos = _length(body, pos, flexible, _I16)
            if n < 0 or pos + n > end:
                raise ValueError("null or truncated topic name in produce request")
            name = str(body[pos : pos + n], "utf-8")
            pos += n
        n_partitions, pos = _length(body, pos, flexible, _I32)
        partitions = []
        for _ in range(n_partitions):
            index = _I32.unpack_from(body, pos)[0]
            n, pos = _length(body, pos + 4, flexible, _I32)
            records = None
            if n >= 0:
                if pos + n > end:
                    raise IndexError("records")
                records = body[pos : pos + n]
                pos += n
            if flexible:
                pos = _skip_tags(body, pos)
            partitions.append(ProducePartitionData(index, records))
        if flexible:
            pos = _skip_tags(body, pos)
        topics.append(ProduceTopicData(name, partitions, topic_id))
    if flexible:
        _skip_tags(body, pos)
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
    api_version: int,
    topics: list[tuple[str | uuid.UUID, list[ProducePartitionResponse]]],
    throttle_time_ms: int = 0,
) -> bytes:
    """The Produce response body (no header); each topic is keyed by its name, or from
    v13 by its id. No tagged fields are written: Kafka sends current_leader and
    node_endpoints only with NOT_LEADER_OR_FOLLOWER, which a single leader never answers."""
    flexible = api_version >= FIRST_FLEXIBLE_VERSION
    array_length, string = wire.array_length, wire.string
    out = [array_length(len(topics), flexible)]
    for key, partitions in topics:
        out.append(key.bytes if isinstance(key, uuid.UUID) else string(key, flexible))
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


def throttle_time_position(api_version: int, body: bytes) -> int:
    """Where ``encode_produce_response`` put throttle_time_ms in ``body``: its last four
    bytes, before the flexible versions' empty tagged-field section."""
    return len(body) - 4 - (api_version >= FIRST_FLEXIBLE_VERSION)
