"""Record-level reading and rebuilding of v2 batches (Kafka's DefaultRecord and MemoryRecordsBuilder).

The cleaner needs it: it reads every record of a batch (decompressing it) to
find keys, then writes the retained records back as one batch with the
original base offset, lastOffsetDelta, producer id, epoch, base sequence,
leader epoch, timestamp type and codec. Records are copied as they are except
for their timestamp delta, which is re-encoded when the batch's base timestamp
changes (KIP-534 stores the delete horizon there).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from fastcrc.crc32 import iscsi as crc32c  # CRC-32C (Castagnoli), as v2 batches use

from odradek.protocol import records as rb
from odradek.storage import compression, errors

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")


@dataclass(slots=True)
class Record:
    """One record of a batch: what the cleaner decides on, and where its bytes are."""

    offset: int
    timestamp: int
    key: bytes | None
    has_value: bool
    attributes: int
    #: The batch's decompressed records and, in it, this record's bytes after its timestamp
    #: delta (offsetDelta, key, value and headers), copied as they are when the batch is rebuilt.
    payload: bytes
    tail_start: int
    end: int


def read_records(batch: rb.RecordBatch) -> list[Record]:
    """Every record of ``batch``, decompressed when needed; CorruptRecord when they do not parse.

    The cleaner's per-record loop: short varints (record lengths and offset deltas up to
    two bytes, the usual timestamp deltas and key lengths) are decoded inline, longer ones by
    read_varint; of the value length only the sign matters.
    """
    codec = batch.compression_type
    payload = (
        compression.decompress(codec, batch.records_payload())
        if codec
        else bytes(batch.records_payload())
    )
    base_offset, base_ts = batch.base_offset, batch.base_timestamp
    varint = rb.read_varint
    out = []
    position = 0
    try:
        for _ in range(batch.records_count):
            b = payload[position]
            if b < 0x80:
                length, position = (b >> 1) ^ -(b & 1), position + 1
            elif payload[position + 1] < 0x80:
                raw = (b & 0x7F) | payload[position + 1] << 7
                length, position = (raw >> 1) ^ -(raw & 1), position + 2
            else:
                length, position = varint(payload, position)
            end = position + length
            attributes = payload[position]
            b = payload[position + 1]
            if b < 0x80:
                ts_delta, tail_start = (b >> 1) ^ -(b & 1), position + 2
            else:
                ts_delta, tail_start = varint(payload, position + 1)
            b = payload[tail_start]
            if b < 0x80:
                offset_delta, p = (b >> 1) ^ -(b & 1), tail_start + 1
            elif payload[tail_start + 1] < 0x80:
                raw = (b & 0x7F) | payload[tail_start + 1] << 7
                offset_delta, p = (raw >> 1) ^ -(raw & 1), tail_start + 2
            else:
                offset_delta, p = varint(payload, tail_start)
            b = payload[p]
            if b < 0x80:
                key_length, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                key_length, p = varint(payload, p)
            if key_length < 0:
                key = None
            else:
                key = payload[p : p + key_length]
                p += key_length
            has_value = (
                not payload[p] & 1
            )  # a zig-zag varint is negative (-1: null) when its lowest bit is set
            if end > len(payload) or p >= end:
                raise IndexError
            out.append(
                Record(
                    base_offset + offset_delta,
                    base_ts + ts_delta,
                    key,
                    has_value,
                    attributes,
                    payload,
                    tail_start,
                    end,
                )
            )
            position = end
    except IndexError:
        raise errors.CorruptRecord(
            f"a record of the batch at offset {base_offset} runs past its end"
        ) from None
    return out


def build_batch(
    template: rb.RecordBatch,
    records: list[Record],
    *,
    delete_horizon_ms: int | None = None,
    level: int | None = None,
) -> bytes:
    """``records`` as one batch with ``template``'s header fields and codec (as Kafka's
    buildRetainedRecordsInto): lastOffsetDelta stays so the producer's last sequence survives.

    With ``delete_horizon_ms`` the batch carries it as its base timestamp with attributes
    bit 6 set (KIP-534); otherwise the base timestamp is the first record's. maxTimestamp is
    the largest record timestamp, or the original LogAppendTime.
    """
    attributes = template.attributes & ~rb.DELETE_HORIZON_MASK
    if delete_horizon_ms is not None:
        attributes |= rb.DELETE_HORIZON_MASK
        base_ts = delete_horizon_ms
    else:
        base_ts = records[0].timestamp if records else rb.NO_TIMESTAMP
    if attributes & rb.TIMESTAMP_TYPE_MASK:
        max_ts = template.max_timestamp
    else:
        max_ts = max((r.timestamp for r in records), default=rb.NO_TIMESTAMP)
    body = bytearray()
    for r in records:
        inner = (
            bytes((r.attributes,))
            + rb.write_varint(r.timestamp - base_ts)
            + r.payload[r.tail_start : r.end]
        )
        body += rb.write_varint(len(inner)) + inner
    codec = template.compression_type
    payload = compression.compress(codec, body, level) if codec else bytes(body)
    return rewrap(
        template,
        payload,
        attributes=attributes,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        records_count=len(records),
    )


def empty_batch(template: rb.RecordBatch) -> bytes:
    """A batch with no records that keeps ``template``'s offsets, producer id, epoch and sequence
    (Kafka's writeEmptyHeader): the cleaner leaves one where a producer's last batch lost every
    record, so the producer's last sequence survives."""
    attributes = template.attributes & (
        rb.TIMESTAMP_TYPE_MASK | rb.TRANSACTIONAL_MASK | rb.CONTROL_MASK
    )
    return rewrap(
        template,
        b"",
        attributes=attributes,
        base_timestamp=template.max_timestamp,
        max_timestamp=template.max_timestamp,
        records_count=0,
    )


def rewrap(
    template: rb.RecordBatch,
    payload: bytes,
    *,
    attributes: int,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    records_count: int | None = None,
) -> bytes:
    """``template``'s header over a new ``payload``: the given attributes (and, when given, base
    timestamp, max timestamp and record count), a new batchLength and CRC; every other field
    (offsets, leader epoch, producer id, epoch, base sequence) kept."""
    header = bytearray(template.buffer[template.position : template.position + rb.HEADER_SIZE])
    _I32.pack_into(header, rb.BATCH_LENGTH, rb.HEADER_SIZE - rb.LOG_OVERHEAD + len(payload))
    _I16.pack_into(header, rb.ATTRIBUTES, attributes)
    if base_timestamp is not None:
        _I64.pack_into(header, rb.BASE_TIMESTAMP, base_timestamp)
    if max_timestamp is not None:
        _I64.pack_into(header, rb.MAX_TIMESTAMP, max_timestamp)
    if records_count is not None:
        _I32.pack_into(header, rb.RECORDS_COUNT, records_count)
    _U32.pack_into(header, rb.CRC, crc32c(payload, crc32c(header[rb.ATTRIBUTES :])))
    return bytes(header) + payload


def delete_horizon_ms(batch: rb.RecordBatch) -> int | None:
    """The batch's KIP-534 delete horizon (its base timestamp when attributes bit 6 is set)."""
    return batch.base_timestamp if batch.attributes & rb.DELETE_HORIZON_MASK else None
