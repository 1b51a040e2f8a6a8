"""A record-batch v2 writer and parser written from the Kafka specification, independent of
odradek.protocol.records, so the tests check the storage layer against the spec and not itself."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = raw = 0
    while True:
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def build_batch(
    records: list[tuple[bytes | None, bytes | None, int]],
    *,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
    leader_epoch: int = -1,
    magic: int = 2,
) -> bytes:
    """Records are (key, value, timestamp)."""
    base_ts = records[0][2] if records else 0
    body = bytearray()
    for i, (key, value, ts) in enumerate(records):
        rec = bytearray(b"\x00")
        rec += _zigzag(ts - base_ts) + _zigzag(i)
        rec += _zigzag(-1) if key is None else _zigzag(len(key)) + key
        rec += _zigzag(-1) if value is None else _zigzag(len(value)) + value
        rec += _zigzag(0)  # headers
        body += _zigzag(len(rec)) + rec
    max_ts = max((ts for _, _, ts in records), default=-1)
    after_crc = struct.pack(
        ">hiqqqhii",
        attributes,
        len(records) - 1,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    ) + bytes(body)
    batch_length = 4 + 1 + 4 + len(after_crc)
    return (
        struct.pack(">qiib", base_offset, batch_length, leader_epoch, magic)
        + struct.pack(">I", crc32c(after_crc))
        + after_crc
    )


@dataclass
class SpecRecord:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


@dataclass
class SpecBatch:
    base_offset: int
    leader_epoch: int
    attributes: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[SpecRecord]


def parse_batches(data: bytes) -> list[SpecBatch]:
    """Parse a whole .log file or fetch response records; asserts CRC and structure."""
    out, pos = [], 0
    while pos < len(data):
        base_offset, length, leader_epoch, magic, crc = struct.unpack_from(">qiibI", data, pos)
        assert magic == 2, magic
        end = pos + 12 + length
        assert end <= len(data), "torn batch"
        assert crc32c(data[pos + 21 : end]) == crc, "bad CRC"
        (attributes, last_delta, base_ts, max_ts, pid, pepoch, base_seq, count) = (
            struct.unpack_from(">hiqqqhii", data, pos + 21)
        )
        assert count <= last_delta + 1  # fewer after compaction
        assert attributes & 0x7 == 0, "test parser reads uncompressed batches only"
        p = pos + 61
        records = []
        for _ in range(count):
            rec_len, p = _read_varint(data, p)
            rec_end = p + rec_len
            p += 1
            ts_delta, p = _read_varint(data, p)
            off_delta, p = _read_varint(data, p)
            klen, p = _read_varint(data, p)
            key = None if klen < 0 else data[p : p + klen]
            p += max(klen, 0)
            vlen, p = _read_varint(data, p)
            value = None if vlen < 0 else data[p : p + vlen]
            p += max(vlen, 0)
            records.append(SpecRecord(base_offset + off_delta, base_ts + ts_delta, key, value))
            p = rec_end
        assert p == end
        out.append(
            SpecBatch(base_offset, leader_epoch, attributes, max_ts, pid, pepoch, base_seq, records)
        )
        pos = end
    return out
