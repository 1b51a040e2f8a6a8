"""Hand-written Fetch codec: a response encoder (v4-v18) whose record data are file regions,
a response decoder (v13-v18) whose record data are slices of the received frame, and an
encoder of the requests a follower sends (v15-v18).

The encoder emits bytes for the fields and the storage FileRegions unchanged, so
the network layer can sendfile record data straight from the segment files.
Tested byte-for-byte against kio's encoder in tests/network/test_codecs.py and
tests/protocol/test_fetch_versions.py. Responses v17 and v18 have v16's format:
those versions only add tagged fields to the request (the fetching replica's
directory id, KIP-853, and its high watermark), which kio decodes and a leader
without followers ignores.

The decoder serves the replica fetcher, which reads a megabyte of records per response:
kio would copy each partition's records into a new ``bytes``, this hands the follower's
log a ``memoryview`` of the frame the records arrived in (tested against kio in
tests/protocol/test_fetch_response_decoder.py). It reads the versions that name topics
by id, which are the ones a follower speaks (v15+), and skips the tagged fields (a
partition's diverging epoch, current leader and snapshot id, the response's node
endpoints): the fetcher finds its truncation point with OffsetForLeaderEpoch and its
leaders in the metadata.

The follower's request encoder exists because a follower sends one Fetch per round of
replication, and kio's encoder, pure Python over its entity classes, took a sixth of a
follower's interpreter time doing it (py-spy, 2026-11-28); written by hand it is a few
``struct`` packs. It writes what a follower sends: topics by id, ReplicaState as the
tagged field, no cluster id, rack or replica directory id (tested byte for byte against
kio in tests/protocol/test_fetch_request_encoder.py).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from odradek.protocol import wire
from odradek.protocol.response import EncodedResponse, Region

FIRST_FLEXIBLE_VERSION = 12
ZERO_UUID = uuid.UUID(int=0)
#: From v13 topics are named by id (KIP-516).
FIRST_TOPIC_ID_VERSION = 13


@dataclass(slots=True)
class FetchPartitionResponse:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    #: (producer id, first offset) pairs; None is a null array (read_uncommitted).
    aborted_transactions: list[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    records: list[Region] = field(default_factory=list)

    @property
    def records_size(self) -> int:
        return sum(r.length for r in self.records)


@dataclass(slots=True)
class FetchTopicResponse:
    topic: str
    partitions: list[FetchPartitionResponse]
    #: Written instead of the name from v13 on.
    topic_id: uuid.UUID | None = None


def encode_fetch_response(
    api_version: int,
    topics: list[FetchTopicResponse],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
) -> EncodedResponse:
    """The Fetch response body; records of each partition as FileRegions (none -> empty records)."""
    flexible = api_version >= FIRST_FLEXIBLE_VERSION
    out = EncodedResponse(throttle_at=(0, 0))
    head = bytearray(wire.int32(throttle_time_ms))
    if api_version >= 7:
        head += wire.int16(error_code) + wire.int32(session_id)
    head += wire.array_length(len(topics), flexible)
    errors = out.error_counts = {error_code: 1}
    for topic in topics:
        if api_version >= FIRST_TOPIC_ID_VERSION:
            head += (topic.topic_id or ZERO_UUID).bytes
        else:
            head += wire.string(topic.topic, flexible)
        head += wire.array_length(len(topic.partitions), flexible)
        for p in topic.partitions:
            errors[p.error_code] = errors.get(p.error_code, 0) + 1
            head += (
                wire.int32(p.partition_index)
                + wire.int16(p.error_code)
                + wire.int64(p.high_watermark)
            )
            head += wire.int64(p.last_stable_offset)
            if api_version >= 5:
                head += wire.int64(p.log_start_offset)
            if p.aborted_transactions is None:
                head += wire.array_length(-1, flexible)
            else:
                head += wire.array_length(len(p.aborted_transactions), flexible)
                for producer_id, first_offset in p.aborted_transactions:
                    head += wire.int64(producer_id) + wire.int64(first_offset)
                    if flexible:
                        head += b"\x00"
            if api_version >= 11:
                head += wire.int32(p.preferred_read_replica)
            head += wire.bytes_length(p.records_size, flexible)
            if p.records:
                out.add(bytes(head))
                head = bytearray()
                for region in p.records:
                    out.add_region(region)
            if flexible:
                head += b"\x00"  # partition tagged fields
        if flexible:
            head += b"\x00"  # topic tagged fields
    if flexible:
        head += b"\x00"  # response tagged fields
    out.add(bytes(head))
    return out


@dataclass(slots=True)
class FetchedPartition:
    """One partition of a decoded Fetch response."""

    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    #: (producer id, first offset) pairs; None for a null array.
    aborted_transactions: list[tuple[int, int]] | None
    preferred_read_replica: int
    #: A slice of the response frame (None for null records).
    records: memoryview | None


#: Newest Fetch response version the decoder reads.
LAST_DECODED_VERSION = 18


class FetchedResponse(NamedTuple):
    """A decoded Fetch response: what a follower's fetch and its fetch session need."""

    error_code: int
    #: The fetch session the leader keeps for the fetcher (0: none).
    session_id: int
    #: Partitions by topic id.
    topics: list[tuple[uuid.UUID, list[FetchedPartition]]]


def decode_fetch_response(version: int, body: memoryview) -> FetchedResponse:
    """A Fetch response body (after the response header) of version 13 to 18.
    Raises ValueError on a short body."""
    if not FIRST_TOPIC_ID_VERSION <= version <= LAST_DECODED_VERSION:
        raise ValueError(f"Fetch response v{version} is not decoded here")
    read_int16, read_int32, read_int64 = wire.read_int16, wire.read_int32, wire.read_int64
    _throttle_ms, pos = read_int32(body, 0)
    error_code, pos = read_int16(body, pos)
    session_id, pos = read_int32(body, pos)
    topic_count, pos = wire.read_array_length(body, pos, True)
    topics = []
    for _ in range(max(topic_count, 0)):
        topic_id, pos = wire.read_uuid(body, pos)
        partition_count, pos = wire.read_array_length(body, pos, True)
        partitions = []
        for _ in range(max(partition_count, 0)):
            index, pos = read_int32(body, pos)
            partition_error, pos = read_int16(body, pos)
            high_watermark, pos = read_int64(body, pos)
            last_stable_offset, pos = read_int64(body, pos)
            log_start_offset, pos = read_int64(body, pos)
            aborted_count, pos = wire.read_array_length(body, pos, True)
            aborted = []
            for _ in range(max(aborted_count, 0)):
                producer_id, pos = read_int64(body, pos)
                first_offset, pos = read_int64(body, pos)
                pos = wire.skip_tagged_fields(body, pos)
                aborted.append((producer_id, first_offset))
            preferred_read_replica, pos = read_int32(body, pos)
            records, pos = wire.read_bytes(body, pos, True)
            pos = wire.skip_tagged_fields(body, pos)
            partitions.append(
                FetchedPartition(
                    index,
                    partition_error,
                    high_watermark,
                    last_stable_offset,
                    log_start_offset,
                    None if aborted_count < 0 else aborted,
                    preferred_read_replica,
                    records,
                )
            )
        pos = wire.skip_tagged_fields(body, pos)
        topics.append((topic_id, partitions))
    wire.skip_tagged_fields(body, pos)
    return FetchedResponse(error_code, session_id, topics)


#: ReplicaState (the fetching replica's id and broker epoch) replaced replica_id in v15.
FIRST_REPLICA_STATE_VERSION = 15
LAST_FOLLOWER_REQUEST_VERSION = 18
#: max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch.
_REQUEST_FIXED = struct.Struct(">iiibii")
#: partition, current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset,
#: partition_max_bytes, and the partition's empty tagged fields.
_REQUEST_PARTITION = struct.Struct(">iiqiqiB")
#: ReplicaState: replica_id, replica_epoch, and its empty tagged fields.
_REPLICA_STATE = struct.Struct(">iqB")
#: The request's tagged fields: one (tag 1, ReplicaState) of _REPLICA_STATE.size bytes.
_REPLICA_STATE_TAG = wire.uvarint(1) + wire.uvarint(1) + wire.uvarint(_REPLICA_STATE.size)


class FetchRequestPartition(NamedTuple):
    """One partition of a follower's Fetch request, in the protocol's field order."""

    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int


def encode_follower_fetch_request(
    version: int,
    *,
    replica_id: int,
    replica_epoch: int,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    session_id: int,
    session_epoch: int,
    topics: Sequence[tuple[uuid.UUID, Sequence[FetchRequestPartition]]],
    forgotten: Sequence[tuple[uuid.UUID, Sequence[int]]],
) -> bytes:
    """The body (after the request header) of a follower's Fetch request of version 15 to 18,
    read_uncommitted, as kio would encode it."""
    if not FIRST_REPLICA_STATE_VERSION <= version <= LAST_FOLLOWER_REQUEST_VERSION:
        raise ValueError(f"a follower's Fetch request v{version} is not encoded here")
    out = bytearray(
        _REQUEST_FIXED.pack(max_wait_ms, min_bytes, max_bytes, 0, session_id, session_epoch)
    )
    out += wire.array_length(len(topics), True)
    pack_partition = _REQUEST_PARTITION.pack
    for topic_id, partitions in topics:
        out += topic_id.bytes
        out += wire.array_length(len(partitions), True)
        for p in partitions:
            out += pack_partition(*p, 0)
        out += b"\x00"  # topic tagged fields
    out += wire.array_length(len(forgotten), True)
    for topic_id, indexes in forgotten:
        out += topic_id.bytes
        out += wire.array_length(len(indexes), True)
        for index in indexes:
            out += wire.int32(index)
        out += b"\x00"  # forgotten topic tagged fields
    out += wire.string("", True)  # rack_id
    out += _REPLICA_STATE_TAG + _REPLICA_STATE.pack(replica_id, replica_epoch, 0)
    return bytes(out)
