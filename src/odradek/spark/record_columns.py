"""A Fetch response's record batches (magic 2), straight into the source's Arrow columns.

Sans-I/O. Batches are walked one Python step per batch (header, CRC32C,
transaction filtering, decompression with the storage layer's codecs), records
one Python step per record (only the length varint, to find where each record
starts); every other field is decoded with numpy over all records at once, and
keys and values become Arrow binary-view arrays pointing into the decompressed
bytes, cast to plain binary in one C++ pass. No Python object per record.

What a consumer must drop is dropped as Kafka's Java consumer does: control
batches always, and under read_committed the transactional batches of the
aborted transactions the Fetch response lists (a producer id becomes aborted
at its transaction's first offset and stops being so at its abort marker).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from fastcrc.crc32 import iscsi as crc32c  # CRC-32C (Castagnoli), as v2 batches use

from odradek.protocol import records as rb
from odradek.spark.schema import HEADERS_ARROW_TYPE, arrow_schema
from odradek.storage.compression import decompress

_CONTROL_KEY = struct.Struct(">hh")  # version, type
ABORT_MARKER = 0
# Gathers read a few bytes past a record's last field (the rest of an inline view, a
# varint's bytes); padding the buffer keeps them inside it.
_PAD = bytes(16)
_INLINE = 12  # Arrow binary-view values this short live in the view itself
_MS_TO_US = 1000


class CorruptBatch(ValueError):
    """Bytes that break the v2 record format or fail their CRC."""


@dataclass(frozen=True)
class Decoded:
    """The records of one Fetch partition response inside [from_offset, until_offset).

    ``next_offset`` is where the next Fetch starts: past the last complete batch,
    filtered ones included. ``reached_end`` is true once a batch at or past
    until_offset was seen.
    """

    batch: pa.RecordBatch | None
    next_offset: int
    reached_end: bool


def decode_fetched(
    records: bytes,
    topic: str,
    partition: int,
    from_offset: int,
    until_offset: int,
    *,
    include_headers: bool,
    aborted: Sequence[tuple[int, int]] | None = None,
    verify_crc: bool = True,
) -> Decoded:
    """Arrow columns of the data records of ``records`` with offsets in [from_offset, until_offset).

    ``aborted`` is the Fetch response's (producer id, first offset) list, given only
    under read_committed. A partial batch at the end (a Fetch cut at its byte limit)
    is left for the next Fetch.
    """
    view = memoryview(records)
    end = len(view)
    pending = sorted(aborted or (), key=lambda t: t[1])
    next_aborted = 0
    aborted_producers: set[int] = set()
    sections: list[bytes | memoryview] = []
    per_batch: list[
        tuple[int, int, int, int]
    ] = []  # count, base offset, base timestamp, log-append time or -1
    next_offset, reached_end = from_offset, False
    position = 0
    while position + rb.HEADER_SIZE <= end:
        (
            base,
            length,
            _epoch,
            magic,
            crc,
            attributes,
            last_delta,
            base_ts,
            max_ts,
            producer_id,
            _producer_epoch,
            _sequence,
            count,
        ) = rb.HEADER.unpack_from(view, position)
        size = rb.LOG_OVERHEAD + length
        if length < rb.HEADER_SIZE - rb.LOG_OVERHEAD:
            raise CorruptBatch(f"batch at offset {base} of {topic}-{partition} has length {length}")
        if position + size > end:
            break
        if magic != 2:
            raise CorruptBatch(
                f"batch at offset {base} of {topic}-{partition} has magic {magic}; only v2 is read"
            )
        if verify_crc and crc32c(view[position + rb.ATTRIBUTES : position + size]) != crc:
            raise CorruptBatch(f"batch at offset {base} of {topic}-{partition} fails its CRC32C")
        payload = view[position + rb.HEADER_SIZE : position + size]
        position += size
        if base >= until_offset:
            reached_end = True
            break
        last = base + last_delta
        next_offset = max(next_offset, last + 1)
        if last < from_offset:
            continue
        codec = attributes & rb.COMPRESSION_MASK
        control = attributes & rb.CONTROL_MASK
        if aborted is not None and producer_id >= 0:
            while next_aborted < len(pending) and pending[next_aborted][1] <= last:
                aborted_producers.add(pending[next_aborted][0])
                next_aborted += 1
            if control:
                if _is_abort_marker(decompress(codec, payload) if codec else payload):
                    aborted_producers.discard(producer_id)
            elif attributes & rb.TRANSACTIONAL_MASK and producer_id in aborted_producers:
                continue
        if control or count <= 0:
            continue
        sections.append(decompress(codec, payload) if codec else payload)
        append_time = max_ts if attributes & rb.TIMESTAMP_TYPE_MASK else -1
        per_batch.append((count, base, base_ts, append_time))
    reached_end = reached_end or next_offset >= until_offset
    if not sections:
        return Decoded(None, next_offset, reached_end)
    batch = _columns(
        b"".join(sections), per_batch, topic, partition, from_offset, until_offset, include_headers
    )
    return Decoded(batch, next_offset, reached_end)


def _is_abort_marker(payload: bytes | memoryview) -> bool:
    """Whether a control batch's first record is an ABORT marker (key: version int16, type int16)."""
    position = rb.read_varint(payload, 0)[1] + 1  # length, attributes
    for _ in range(2):  # timestamp delta, offset delta
        position = rb.read_varint(payload, position)[1]
    key_length, position = rb.read_varint(payload, position)
    if key_length < _CONTROL_KEY.size:
        raise CorruptBatch("control record without a version and type")
    return _CONTROL_KEY.unpack_from(payload, position)[1] == ABORT_MARKER


def _record_steps() -> list[int]:
    """For each two bytes a record may begin with, read little-endian: the distance to the next
    record when its length varint takes one or two bytes (records up to 8 KiB), else 0."""
    steps = [0] * 65536
    for first in range(0x80):
        length = (first >> 1) ^ -(first & 1)
        if length > 0:
            steps[first::256] = [1 + length] * 256
    for first in range(0x80, 0x100):
        for second in range(0x80):
            zigzag = (first & 0x7F) | (second << 7)
            length = (zigzag >> 1) ^ -(zigzag & 1)
            if length > 0:
                steps[first | second << 8] = 2 + length
    return steps


_STEPS = _record_steps()


def record_heads(data: bytes, size: int) -> list[int]:
    """Where each record (its length varint) begins in data[:size]: the one per-record Python loop.

    ``data`` carries padding past ``size``, so peeking at a second byte never fails.
    """
    heads: list[int] = []
    add, steps, position = heads.append, _STEPS, 0
    while position < size:
        add(position)
        step = steps[data[position] | data[position + 1] << 8]
        if step:
            position += step
            continue
        length, after = rb.read_varint(data, position)
        if length <= 0:
            raise CorruptBatch(f"record of length {length}")
        position = after + length
    if position != size:
        raise CorruptBatch(f"record sizes add up to {position} bytes, the batches hold {size}")
    return heads


def _varints(buf: np.ndarray, position: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zig-zag varints at every position at once, and the positions after them."""
    byte = buf[position]
    value = (byte & 0x7F).astype(np.uint64)
    size = np.ones(len(position), np.int64)
    more = np.flatnonzero(byte & 0x80)
    shift = 7
    while more.size:
        if shift > 63:
            raise CorruptBatch("varint longer than 10 bytes")
        byte = buf[position[more] + size[more]]
        value[more] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        size[more] += 1
        more = more[(byte & 0x80) != 0]
        shift += 7
    signed = (value >> np.uint64(1)).astype(np.int64) ^ -(value & np.uint64(1)).astype(np.int64)
    return signed, position + size


def _binary(data: pa.Buffer, buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A binary column of buf[start:start+length] (length -1: null), through Arrow's binary view."""
    n = len(starts)
    sizes = np.maximum(lengths, 0)
    views = np.zeros(
        (n, 4), np.int32
    )  # 16 bytes: size, then 12 inline bytes or prefix, buffer 0, offset
    views[:, 0] = sizes
    raw = views.view(np.uint8)
    long = np.flatnonzero(sizes > _INLINE)
    if long.size:
        views[long, 3] = starts[long]
        raw[long, 4:8] = buf[starts[long, None] + np.arange(4)]
    short = np.flatnonzero((sizes > 0) & (sizes <= _INLINE))
    if short.size:
        inline = buf[starts[short, None] + np.arange(_INLINE)]
        inline[np.arange(_INLINE) >= sizes[short, None]] = 0
        raw[short, 4:16] = inline
    valid = lengths >= 0
    nulls = n - int(np.count_nonzero(valid))
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    column = pa.Array.from_buffers(
        pa.binary_view(), n, [validity, pa.py_buffer(views), data], null_count=nulls
    )
    return column.cast(pa.binary())


def _columns(
    data: bytes,
    per_batch: Sequence[tuple[int, int, int, int]],
    topic: str,
    partition: int,
    from_offset: int,
    until_offset: int,
    include_headers: bool,
) -> pa.RecordBatch | None:
    padded = data + _PAD
    try:
        heads = record_heads(padded, len(data))
    except IndexError:
        raise CorruptBatch("a record runs past its batch") from None
    counts, bases, base_ts, append_ts = (np.array(column, np.int64) for column in zip(*per_batch))
    if len(heads) != counts.sum():
        raise CorruptBatch(f"the batches count {counts.sum()} records and hold {len(heads)}")
    buf = np.frombuffer(padded, np.uint8)
    record_end = np.empty(len(heads), np.int64)
    record_end[:-1] = heads[1:]
    record_end[-1] = len(data)
    try:
        position = (
            _varints(buf, np.array(heads, np.int64))[1] + 1
        )  # past the length and the attributes byte
        ts_delta, position = _varints(buf, position)
        offset_delta, position = _varints(buf, position)
        key_length, key_start = _varints(buf, position)
        value_length, value_start = _varints(buf, key_start + np.maximum(key_length, 0))
        headers_at = value_start + np.maximum(value_length, 0)
    except IndexError:
        raise CorruptBatch("a record runs past its batch") from None
    if np.any(headers_at >= record_end) or np.any(key_length < -1) or np.any(value_length < -1):
        raise CorruptBatch("a record's fields run past its length")
    offsets = np.repeat(bases, counts) + offset_delta
    append = np.repeat(append_ts, counts)
    log_append = append >= 0
    millis = np.where(log_append, append, np.repeat(base_ts, counts) + ts_delta)
    keep = (offsets >= from_offset) & (offsets < until_offset)
    if not keep.all():
        index = np.flatnonzero(keep)
        if not index.size:
            return None
        offsets, millis, log_append = offsets[index], millis[index], log_append[index]
        key_start, key_length = key_start[index], key_length[index]
        value_start, value_length = value_start[index], value_length[index]
        headers_at, record_end = headers_at[index], record_end[index]
    n = len(offsets)
    data_buffer = pa.py_buffer(padded)
    columns = [
        _binary(data_buffer, buf, key_start, key_length),
        _binary(data_buffer, buf, value_start, value_length),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets, pa.int64()),
        pa.array(millis * _MS_TO_US, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.array(log_append.astype(np.int32), pa.int32()),
    ]
    if include_headers:
        columns.append(_headers(data, headers_at.tolist(), record_end.tolist()))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))


def _headers(data: bytes, starts: Sequence[int], ends: Sequence[int]) -> pa.Array:
    """The headers column: a Python step per header, only when includeHeaders asks for them."""
    rows = []
    for position, end in zip(starts, ends):
        count, position = rb.read_varint(data, position)
        row = []
        for _ in range(count):
            key_length, position = rb.read_varint(data, position)
            key = data[position : position + key_length].decode()
            position += key_length
            value_length, position = rb.read_varint(data, position)
            value = None if value_length < 0 else data[position : position + value_length]
            position += max(value_length, 0)
            row.append({"key": key, "value": value})
        if position > end:
            raise CorruptBatch("a record's headers run past its length")
        rows.append(row)
    return pa.array(rows, HEADERS_ARROW_TYPE)
