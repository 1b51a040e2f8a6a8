"""Compressed record batches written and read from the v2 specification with the codec
libraries directly (not odradek.storage.compression), for the cleaner and compression.type tests."""

from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass

import cramjam
import lz4.frame
import zstandard
from crc32c import crc32c
from spec import _read_varint, _zigzag

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
XERIAL = b"\x82SNAPPY\x00"


def compress(codec: int, data: bytes) -> bytes:
    if codec == 1:
        return gzip.compress(data, mtime=0)
    if codec == 2:  # raw snappy, as librdkafka writes it
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == 3:
        return lz4.frame.compress(data)
    if codec == 4:
        return zstandard.ZstdCompressor().compress(data)
    return data


def decompress(codec: int, data: bytes) -> bytes:
    if codec == 1:
        return gzip.decompress(data)
    if codec == 2:
        if not data.startswith(XERIAL):
            return bytes(cramjam.snappy.decompress_raw(data))
        out, pos = b"", 16
        while pos < len(data):
            (n,) = struct.unpack_from(">I", data, pos)
            out += bytes(cramjam.snappy.decompress_raw(data[pos + 4 : pos + 4 + n]))
            pos += 4 + n
        return out
    if codec == 3:
        return lz4.frame.decompress(data)
    if codec == 4:
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    return data


def build(
    records: list[tuple[bytes | None, bytes | None, int]],
    *,
    codec: int = 0,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    extra_attributes: int = 0,
    headers: list[list[tuple[bytes, bytes]]] | None = None,
) -> bytes:
    """A batch of (key, value, timestamp) records (record i with ``headers[i]``), compressed with ``codec``."""
    base_ts = records[0][2]
    body = bytearray()
    for i, (key, value, ts) in enumerate(records):
        rec = bytearray(b"\x00") + _zigzag(ts - base_ts) + _zigzag(i)
        rec += _zigzag(-1) if key is None else _zigzag(len(key)) + key
        rec += _zigzag(-1) if value is None else _zigzag(len(value)) + value
        record_headers = headers[i] if headers else []
        rec += _zigzag(len(record_headers))
        for hk, hv in record_headers:
            rec += _zigzag(len(hk)) + hk + _zigzag(len(hv)) + hv
        body += _zigzag(len(rec)) + rec
    payload = compress(codec, bytes(body))
    max_ts = max(ts for _, _, ts in records)
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            codec | extra_attributes,
            len(records) - 1,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
        + payload
    )
    return (
        struct.pack(">qiib", base_offset, 9 + len(after_crc), -1, 2)
        + struct.pack(">I", crc32c(after_crc))
        + after_crc
    )


@dataclass
class Rec:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[bytes, bytes]]


@dataclass
class Batch:
    base_offset: int
    last_offset: int
    attributes: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[Rec]

    @property
    def codec(self) -> int:
        return self.attributes & 7

    @property
    def delete_horizon(self) -> int | None:
        return self.base_timestamp if self.attributes & 0x40 else None


def parse(data: bytes) -> list[Batch]:
    """Every batch of a log or fetch blob; asserts CRC and structure, decompresses the records."""
    out, pos = [], 0
    while pos < len(data):
        base_offset, length, _, magic, crc = struct.unpack_from(">qiibI", data, pos)
        assert magic == 2
        end = pos + 12 + length
        assert end <= len(data), "torn batch"
        assert crc32c(data[pos + 21 : end]) == crc, "bad CRC"
        attributes, delta, base_ts, max_ts, pid, epoch, seq, count = struct.unpack_from(
            ">hiqqqhii", data, pos + 21
        )
        assert count <= delta + 1
        body = decompress(attributes & 7, data[pos + 61 : end])
        p, records = 0, []
        for _ in range(count):
            n, p = _read_varint(body, p)
            rec_end = p + n
            p += 1
            ts_delta, p = _read_varint(body, p)
            off_delta, p = _read_varint(body, p)
            klen, p = _read_varint(body, p)
            key = None if klen < 0 else body[p : p + klen]
            p += max(klen, 0)
            vlen, p = _read_varint(body, p)
            value = None if vlen < 0 else body[p : p + vlen]
            p += max(vlen, 0)
            nh, p = _read_varint(body, p)
            headers = []
            for _ in range(nh):
                hk, p = _read_varint(body, p)
                k = body[p : p + hk]
                p += hk
                hv, p = _read_varint(body, p)
                headers.append((k, body[p : p + hv]))
                p += hv
            assert p == rec_end
            records.append(Rec(base_offset + off_delta, base_ts + ts_delta, key, value, headers))
        assert p == len(body)
        out.append(
            Batch(
                base_offset,
                base_offset + delta,
                attributes,
                base_ts,
                max_ts,
                pid,
                epoch,
                seq,
                records,
            )
        )
        pos = end
    return out
