"""Plain (uncompressed, non-transactional) v2 record batches for the coordinators' topics.

A coordinator writes small batches of key/value records to its topic
(__consumer_offsets) and reads them back when it loads a partition; this is the
little codec it needs for that.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from odradek.protocol.records import iter_batches, new_batch, read_varint, write_varint


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """One record a coordinator core queues for a partition of its topic; value None is a
    tombstone."""

    partition: int
    key: bytes
    value: bytes | None


def _field(data: bytes | None) -> bytes:
    return write_varint(-1) if data is None else write_varint(len(data)) + data


def encode_batch(records: list[tuple[bytes, bytes | None]], timestamp_ms: int) -> bytes:
    """One batch of (key, value) records; a None value is a tombstone."""
    body = bytearray()
    for delta, (key, value) in enumerate(records):
        record = (
            b"\x00"
            + write_varint(0)
            + write_varint(delta)
            + _field(key)
            + _field(value)
            + write_varint(0)
        )
        body += write_varint(len(record)) + record
    return new_batch(
        bytes(body),
        attributes=0,
        last_offset_delta=len(records) - 1,
        base_timestamp=timestamp_ms,
        max_timestamp=timestamp_ms,
        records_count=len(records),
    )


def decode_records(data: bytes) -> Iterator[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every record in uncompressed batches; control batches skipped."""
    for batch in iter_batches(
        data, strict_count=False
    ):  # compaction leaves fewer records than offsets
        if batch.is_control:
            continue
        if batch.compression_type != 0:
            raise ValueError("compressed batches are not written to __consumer_offsets by Odradek")
        payload = bytes(batch.records_payload())
        pos = 0
        for _ in range(batch.records_count):
            _length, pos = read_varint(payload, pos)
            pos += 1  # attributes
            _ts, pos = read_varint(payload, pos)
            offset_delta, pos = read_varint(payload, pos)
            key_len, pos = read_varint(payload, pos)
            key = payload[pos : pos + key_len] if key_len >= 0 else b""
            pos += max(key_len, 0)
            value_len, pos = read_varint(payload, pos)
            value = payload[pos : pos + value_len] if value_len >= 0 else None
            pos += max(value_len, 0)
            headers, pos = read_varint(payload, pos)
            for _ in range(headers):
                n, pos = read_varint(payload, pos)
                pos += n
                n, pos = read_varint(payload, pos)
                pos += max(n, 0)
            yield batch.base_offset + offset_delta, key, value
