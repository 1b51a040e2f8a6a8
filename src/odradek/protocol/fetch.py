"""Hand-written Fetch response encoder (v4-v18) whose record data are file regions.

The encoder emits bytes for the fields and the storage FileRegions unchanged, so
the network layer can sendfile record data straight from the segment files.
Tested byte-for-byte against kio's encoder in tests/network/test_codecs.py and
tests/protocol/test_fetch_versions.py. Responses v17 and v18 have v16's format:
those versions only add tagged fields to the request (the fetching replica's
directory id, KIP-853, and its high watermark), which kio decodes and a leader
without followers ignores.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

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
    out = EncodedResponse()
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
