"""Plain (uncompressed) v2 record batches for the coordinators' topics.

A coordinator writes small batches of key/value records to its topic
(__consumer_offsets, __transaction_state) and reads them back when it loads a
partition; this is the little codec it needs for that. TxnOffsetCommit's records
go in a transactional batch of the producer's id and epoch, and a transaction's
marker in the topic decides them when the partition is read back
(``decode_log``), as Kafka's coordinators replay them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from odradek.protocol.records import (
    CONTROL_TYPE_COMMIT,
    TRANSACTIONAL_MASK,
    iter_batches,
    new_batch,
    read_varint,
    write_varint,
)


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """One record a coordinator core queues for a partition of its topic; value None is a
    tombstone."""

    partition: int
    key: bytes
    value: bytes | None
    #: A transactional record's producer (TxnOffsetCommit), -1 for the others.
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class LoadedRecord:
    """A record read back from a coordinator's topic."""

    offset: int
    key: bytes
    value: bytes | None
    #: The producer of a transactional batch, -1 otherwise.
    producer_id: int


@dataclass(frozen=True, slots=True)
class LoadedMarker:
    """A transaction marker read back: the producer's pending records are committed or not."""

    offset: int
    producer_id: int
    commit: bool


def _field(data: bytes | None) -> bytes:
    return write_varint(-1) if data is None else write_varint(len(data)) + data


def encode_batch(
    records: list[tuple[bytes, bytes | None]],
    timestamp_ms: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
) -> bytes:
    """One batch of (key, value) records; a None value is a tombstone. With a producer id the
    batch is transactional (the records wait for that producer's marker)."""
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
        attributes=TRANSACTIONAL_MASK if producer_id >= 0 else 0,
        last_offset_delta=len(records) - 1,
        base_timestamp=timestamp_ms,
        max_timestamp=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        records_count=len(records),
    )


def decode_records(data: bytes) -> Iterator[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every record in uncompressed batches; markers skipped."""
    for item in decode_log(data):
        if isinstance(item, LoadedRecord):
            yield item.offset, item.key, item.value


def decode_log(data: bytes) -> Iterator[LoadedRecord | LoadedMarker]:
    """Every record and transaction marker of uncompressed batches, in log order."""
    for batch in iter_batches(
        data, strict_count=False
    ):  # compaction leaves fewer records than offsets
        payload = bytes(batch.records_payload())
        if batch.is_control:
            if batch.compression_type == 0 and batch.records_count:
                _offset, key, _value = _read_record(payload, 0)[0]
                # ControlRecordType key: int16 version, int16 type (0 ABORT, 1 COMMIT).
                if len(key) >= 4:
                    commit = int.from_bytes(key[2:4], "big") == CONTROL_TYPE_COMMIT
                    yield LoadedMarker(batch.base_offset, batch.producer_id, commit)
            continue
        if batch.compression_type != 0:
            raise ValueError("compressed batches are not written to coordinator topics by Odradek")
        producer_id = batch.producer_id if batch.is_transactional else -1
        pos = 0
        for _ in range(batch.records_count):
            (offset_delta, key, value), pos = _read_record(payload, pos)
            yield LoadedRecord(batch.base_offset + offset_delta, key, value, producer_id)


def _read_record(payload: bytes, pos: int) -> tuple[tuple[int, bytes, bytes | None], int]:
    """(offset delta, key, value) of the record at ``pos``, and the position after it."""
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
    return (offset_delta, key, value), pos
