"""Arrow key/value columns to Kafka v2 record batches, and Kafka's murmur2 partitioner, vectorised.

Sans-I/O, the sink's counterpart of record_columns. Each record field that
varies (length, offset delta, key and value lengths) is a varint built with
numpy for all rows at once; Arrow's element-wise binary join interleaves them
with the keys and values in one C++ pass, and its data buffer is the batch's
records section. Headers, when a row has them, take a Python step per header.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from odradek.protocol import records as rb
from odradek.storage.compression import compress

_MAX_VARINT = 5  # every length and offset delta here fits in an int32
_NO_HEADERS = b"\x00"
_M = np.uint32(0x5BD1E995)
_SEED = 0x9747B28C


def _zigzag(values: np.ndarray) -> np.ndarray:
    values = values.astype(np.int64)
    return ((values << 1) ^ (values >> 63)).astype(np.uint64)


def _varint_sizes(zigzag: np.ndarray) -> np.ndarray:
    size = np.ones(len(zigzag), np.int64)
    for k in range(1, _MAX_VARINT):
        size += zigzag >= np.uint64(1 << (7 * k))
    return size


@dataclass(frozen=True)
class Zeros:
    """A varints_column field of zero bytes: ``count`` in every row, or per row."""

    count: int | np.ndarray


def varints_column(n: int, fields: list[Zeros | np.ndarray]) -> pa.Array:
    """A binary column whose row i is the concatenation of each field's bytes for row i.

    A field is Zeros or an array: zig-zag varints of int32-sized values. Bytes
    are written with numpy into one zeroed buffer, a handful of array
    operations per field and varint byte.
    """
    #: Per field: its Zeros, or its zig-zag values and their varint sizes.
    encoded: list[Zeros | tuple[np.ndarray, np.ndarray]] = []
    row_size = np.zeros(n, np.int64)
    for f in fields:
        if isinstance(f, Zeros):
            encoded.append(f)
            row_size += f.count
        else:
            zigzag = _zigzag(f)
            size = _varint_sizes(zigzag)
            encoded.append((zigzag, size))
            row_size += size
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(row_size, out=offsets[1:])
    out = np.zeros(int(offsets[-1]), np.uint8)
    cursor = offsets[:-1].copy()
    for entry in encoded:
        if isinstance(entry, Zeros):
            cursor += entry.count
            continue
        zigzag, size = entry
        rows = None  # every row has a first byte
        for k in range(int(size.max(initial=1))):
            if k:
                rows = np.flatnonzero(size > k)
            z = zigzag if rows is None else zigzag[rows]
            byte = ((z >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
            byte |= ((size if rows is None else size[rows]) > k + 1).astype(np.uint8) << 7
            out[(cursor if rows is None else cursor[rows]) + k] = byte
        cursor += size
    return pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(out)]
    )


def _offsets(column: pa.Array) -> np.ndarray:
    """The n+1 value offsets of a binary column, into its data buffer."""
    offsets = np.frombuffer(column.buffers()[1], np.int32)
    return offsets[column.offset : column.offset + len(column) + 1].astype(np.int64)


def _lengths(column: pa.Array) -> np.ndarray:
    """Byte lengths of a binary column, -1 for nulls (the records' null)."""
    lengths = np.diff(_offsets(column))
    if column.null_count:
        lengths[column.is_null().to_numpy(zero_copy_only=False)] = -1
    return lengths


def encode_headers(rows: list | None) -> bytes:
    """A record's headers section: count, then key and value of each (a null value is -1)."""
    out = bytearray(rb.write_varint(len(rows or ())))
    for header in rows or ():
        key = header["key"].encode() if isinstance(header["key"], str) else header["key"]
        value = header["value"]
        out += rb.write_varint(len(key)) + key
        out += rb.write_varint(-1) if value is None else rb.write_varint(len(value)) + value
    return bytes(out)


def build_batch(
    keys: pa.Array,
    values: pa.Array,
    headers: pa.Array | None = None,
    *,
    producer_id: int = rb.NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = rb.NO_SEQUENCE,
    codec: int = 0,
    timestamp_ms: int | None = None,
    transactional: bool = False,
) -> bytes:
    """One v2 batch of the rows (binary keys and values, nulls allowed), base offset 0, CreateTime now;
    ``transactional`` sets the attribute bit of a batch written inside a transaction."""
    n = len(values)
    if n == 0:
        raise ValueError("a record batch holds at least one record")
    key_lengths, value_lengths = _lengths(keys), _lengths(values)
    offset_deltas = np.arange(n)
    fields: list[pa.Array] = []
    if headers is None:
        header_size: np.ndarray | int = 1
        # Row i starts with row i-1's empty headers section (a zero count); the last one ends the batch.
        previous_headers = np.ones(n, np.int64)
        previous_headers[0] = 0
    else:
        header_bytes = [encode_headers(row) for row in headers.to_pylist()]
        header_size = np.array([len(h) for h in header_bytes], np.int64)
        fields.append(pa.array([b""] + header_bytes[:-1], pa.binary()))
    body = (
        2
        + _varint_sizes(_zigzag(offset_deltas))
        + _varint_sizes(_zigzag(key_lengths))
        + np.maximum(key_lengths, 0)
        + _varint_sizes(_zigzag(value_lengths))
        + np.maximum(value_lengths, 0)
        + header_size
    )
    # previous headers, length, attributes and timestamp delta (0, 0), offset delta, key length
    lead = [body, Zeros(2), offset_deltas, key_lengths]
    if headers is None:
        lead.insert(0, Zeros(previous_headers))
    fields += [varints_column(n, lead), keys, varints_column(n, [value_lengths]), values]
    joined = pc.binary_join_element_wise(
        *fields, b"", null_handling="replace", null_replacement=b""
    )
    bounds = _offsets(joined)
    start, stop = int(bounds[0]), int(bounds[-1])
    last_headers = _NO_HEADERS if headers is None else header_bytes[-1]
    records = joined.buffers()[2][start:stop].to_pybytes() + last_headers
    payload = compress(codec, records) if codec else records
    now = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    return rb.new_batch(
        payload,
        attributes=codec | (rb.TRANSACTIONAL_MASK if transactional else 0),
        last_offset_delta=n - 1,
        base_timestamp=now,
        max_timestamp=now,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=n,
    )


def murmur2(keys: pa.Array) -> np.ndarray:
    """Kafka's Utils.murmur2 of every (non-null) binary key, as unsigned 32-bit values."""
    n = len(keys)
    lengths = np.maximum(_lengths(keys), 0)
    offsets = _offsets(keys)[:n]
    data = keys.buffers()[2]
    buf = np.frombuffer(data.to_pybytes() + bytes(4) if data is not None else bytes(4), np.uint8)
    h = np.uint32(_SEED) ^ lengths.astype(np.uint32)
    with np.errstate(over="ignore"):
        for chunk in range(int(lengths.max(initial=0)) // 4):
            rows = np.flatnonzero(lengths >= 4 * (chunk + 1))
            at = offsets[rows] + 4 * chunk
            k = (
                buf[at].astype(np.uint32)
                | buf[at + 1].astype(np.uint32) << 8
                | buf[at + 2].astype(np.uint32) << 16
                | buf[at + 3].astype(np.uint32) << 24
            )
            k *= _M
            k ^= k >> np.uint32(24)
            k *= _M
            h[rows] = (h[rows] * _M) ^ k
        tail = lengths % 4
        rows = np.flatnonzero(tail)
        at = offsets[rows] + lengths[rows] - tail[rows]
        extra = np.zeros(len(rows), np.uint32)
        for i in (2, 1, 0):
            has = tail[rows] > i
            extra[has] ^= buf[at[has] + i].astype(np.uint32) << np.uint32(8 * i)
        h[rows] = (h[rows] ^ extra) * _M
        h ^= h >> np.uint32(13)
        h *= _M
        h ^= h >> np.uint32(15)
    return h


def key_partitions(keys: pa.Array, partitions: int) -> np.ndarray:
    """The partition of each key as Kafka's Java client (and librdkafka's murmur2 partitioner) picks it."""
    return (murmur2(keys) & np.uint32(0x7FFFFFFF)).astype(np.int64) % partitions
