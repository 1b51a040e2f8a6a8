"""A view over Kafka v2 record batches (magic 2) that never copies the payload.

The broker's Produce/Fetch codecs and the storage layer share this module. It
knows the fixed 61-byte batch header: where each field lives, how to walk the
batches of a records blob, how to patch baseOffset and partitionLeaderEpoch in
place (the CRC32C covers bytes 21..end, so those patches keep it valid), and how
to re-stamp LogAppendTime (which does change the CRC). Only ``crc32c`` and the
protocol's own wire primitives are imported, so any layer can use it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from fastcrc.crc32 import iscsi as crc32c  # CRC-32C (Castagnoli), as v2 batches use

from odradek.protocol.int_struct import IntStruct
from odradek.protocol.wire import uvarint

if TYPE_CHECKING:
    from typing_extensions import Buffer

    from odradek.protocol._fastpath import ScanResult

scan_for_append: Callable[[Buffer, int, int, int, int, int, int], ScanResult | None] | None
_native_delta_range: Callable[[Buffer, int], tuple[int, int] | None] | None
try:
    from odradek.protocol._fastpath import scan_for_append
    from odradek.protocol._fastpath import timestamp_delta_range as _native_delta_range
except (
    ImportError
):  # installed without a C compiler: batches are checked and records walked in Python
    scan_for_append = None
    _native_delta_range = None

# Field offsets of the v2 batch header (the record-batch specification).
BASE_OFFSET = 0
BATCH_LENGTH = 8
PARTITION_LEADER_EPOCH = 12
MAGIC = 16
CRC = 17
ATTRIBUTES = 21
LAST_OFFSET_DELTA = 23
BASE_TIMESTAMP = 27
MAX_TIMESTAMP = 35
PRODUCER_ID = 43
PRODUCER_EPOCH = 51
BASE_SEQUENCE = 53
RECORDS_COUNT = 57
RECORDS = 61

#: baseOffset + batchLength: the bytes not counted in batchLength.
LOG_OVERHEAD = 12
HEADER_SIZE = RECORDS

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
_LONG_MAX = 2**63 - 1

CREATE_TIME = 0
LOG_APPEND_TIME = 1

_I64: IntStruct = struct.Struct(">q")
_I32: IntStruct = struct.Struct(">i")
_U32: IntStruct = struct.Struct(">I")
_I16: IntStruct = struct.Struct(">h")
# attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
_TAIL = struct.Struct(">hiqqqhii")
#: The whole 61-byte header in one unpack (hot paths read every field at once).
HEADER = struct.Struct(">qiibIhiqqqhii")
_unpack_header = HEADER.unpack_from


class InvalidBatch(ValueError):
    """A batch that breaks the v2 format; ``reason`` says which rule.

    reason is one of "corrupt" (sizes or CRC), "magic" (not magic 2) or
    "invalid" (a field inconsistent with another); the storage layer maps these
    to Kafka's CORRUPT_MESSAGE, UNSUPPORTED_FOR_MESSAGE_FORMAT and INVALID_RECORD.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class RecordBatch:
    """One v2 batch at ``position`` of ``buffer`` (bytes, bytearray or memoryview).

    Reading fields unpacks them from the buffer on demand; setters need a
    writable buffer.
    """

    __slots__ = ("buffer", "fields", "position")

    def __init__(
        self,
        buffer: bytes | bytearray | memoryview,
        position: int = 0,
        fields: tuple[int, ...] | None = None,
    ) -> None:
        self.buffer = buffer
        self.position = position
        #: The unpacked header (HEADER order) when check_batch read it; stale after a patch.
        self.fields = fields

    # -- header fields -------------------------------------------------
    @property
    def base_offset(self) -> int:
        return _I64.unpack_from(self.buffer, self.position)[0]

    @property
    def batch_length(self) -> int:
        return _I32.unpack_from(self.buffer, self.position + BATCH_LENGTH)[0]

    @property
    def size_in_bytes(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def partition_leader_epoch(self) -> int:
        return _I32.unpack_from(self.buffer, self.position + PARTITION_LEADER_EPOCH)[0]

    @property
    def magic(self) -> int:
        return self.buffer[self.position + MAGIC]

    @property
    def crc(self) -> int:
        return _U32.unpack_from(self.buffer, self.position + CRC)[0]

    @property
    def attributes(self) -> int:
        return _I16.unpack_from(self.buffer, self.position + ATTRIBUTES)[0]

    @property
    def last_offset_delta(self) -> int:
        return _I32.unpack_from(self.buffer, self.position + LAST_OFFSET_DELTA)[0]

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def base_timestamp(self) -> int:
        return _I64.unpack_from(self.buffer, self.position + BASE_TIMESTAMP)[0]

    @property
    def max_timestamp(self) -> int:
        return _I64.unpack_from(self.buffer, self.position + MAX_TIMESTAMP)[0]

    @property
    def producer_id(self) -> int:
        return _I64.unpack_from(self.buffer, self.position + PRODUCER_ID)[0]

    @property
    def producer_epoch(self) -> int:
        return _I16.unpack_from(self.buffer, self.position + PRODUCER_EPOCH)[0]

    @property
    def base_sequence(self) -> int:
        return _I32.unpack_from(self.buffer, self.position + BASE_SEQUENCE)[0]

    @property
    def last_sequence(self) -> int:
        """The sequence of the last record (wrapping at 2**31 as Kafka does)."""
        base = self.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        return (base + self.last_offset_delta) % (2**31)

    @property
    def records_count(self) -> int:
        return _I32.unpack_from(self.buffer, self.position + RECORDS_COUNT)[0]

    @property
    def compression_type(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    def header_fields(self) -> tuple[int, int, int, int, int, int, int, int]:
        """(attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId,
        producerEpoch, baseSequence, recordsCount) in one unpack, for hot loops."""
        return _TAIL.unpack_from(self.buffer, self.position + ATTRIBUTES)

    # -- checks ----------------------------------------------------------
    def compute_crc(self) -> int:
        end = self.position + self.size_in_bytes
        return crc32c(memoryview(self.buffer)[self.position + ATTRIBUTES : end])

    def is_valid(self) -> bool:
        return self.compute_crc() == self.crc

    def records_payload(self) -> memoryview:
        """The bytes after the header: the records, compressed or not."""
        return memoryview(self.buffer)[self.position + RECORDS : self.position + self.size_in_bytes]

    # -- in-place patches (not covered by the CRC) -------------------------
    def set_base_offset(self, offset: int) -> None:
        _I64.pack_into(self.buffer, self.position, offset)

    def set_partition_leader_epoch(self, epoch: int) -> None:
        _I32.pack_into(self.buffer, self.position + PARTITION_LEADER_EPOCH, epoch)

    # -- patches covered by the CRC ----------------------------------------
    def set_log_append_time(self, timestamp: int) -> None:
        """Stamp LogAppendTime: timestamp-type bit and maxTimestamp, then a new CRC."""
        _I16.pack_into(
            self.buffer, self.position + ATTRIBUTES, self.attributes | TIMESTAMP_TYPE_MASK
        )
        _I64.pack_into(self.buffer, self.position + MAX_TIMESTAMP, timestamp)
        _U32.pack_into(self.buffer, self.position + CRC, self.compute_crc())


def check_batch(
    buffer: bytes | bytearray | memoryview,
    position: int,
    end: int,
    *,
    verify_crc: bool = True,
    strict_count: bool = True,
) -> RecordBatch:
    """check_header, returning a RecordBatch view (fields filled in)."""
    return RecordBatch(
        buffer,
        position,
        check_header(buffer, position, end, verify_crc=verify_crc, strict_count=strict_count),
    )


def check_header(
    buffer: bytes | bytearray | memoryview,
    position: int,
    end: int,
    *,
    verify_crc: bool = True,
    strict_count: bool = True,
) -> tuple[int, ...]:
    """The header fields (HEADER order) of the batch at ``position`` after checking sizes,
    magic and (optionally) CRC.

    Raises InvalidBatch when the batch is truncated, not magic 2, has a bad CRC
    or a record count inconsistent with lastOffsetDelta. A producer's batch has
    exactly lastOffsetDelta + 1 records (``strict_count``); compaction may leave
    fewer, keeping the batch's last offset.
    """
    remaining = end - position
    if remaining < HEADER_SIZE:
        raise InvalidBatch(
            "corrupt", f"{remaining} bytes left, fewer than a batch header ({HEADER_SIZE})"
        )
    fields = _unpack_header(buffer, position)
    _, length, _, magic, stored, _, delta, _, _, _, _, _, count = fields
    if length < HEADER_SIZE - LOG_OVERHEAD:
        raise InvalidBatch("corrupt", f"batchLength {length} is smaller than the header")
    if LOG_OVERHEAD + length > remaining:
        raise InvalidBatch(
            "corrupt", f"batchLength {length} runs past the end of the records ({remaining} bytes)"
        )
    if magic != 2:
        raise InvalidBatch("magic", f"magic {magic} is not supported, only record batch v2")
    if verify_crc:
        # A slice of a memoryview is a view; of bytes it would be a copy of the whole batch.
        view = buffer if type(buffer) is memoryview else memoryview(buffer)
        computed = crc32c(view[position + ATTRIBUTES : position + LOG_OVERHEAD + length])
        if stored != computed:
            raise InvalidBatch(
                "corrupt", f"CRC32C mismatch: stored {stored:#010x}, computed {computed:#010x}"
            )
    if delta < 0 or count > delta + 1 or (strict_count and count != delta + 1):
        raise InvalidBatch(
            "invalid", f"recordsCount {count} does not match lastOffsetDelta {delta}"
        )
    return fields


def stamped_header(
    buffer: bytes | bytearray | memoryview,
    position: int,
    size: int,
    *,
    base_offset: int,
    leader_epoch: int,
    log_append_time: int | None = None,
    max_timestamp: int | None = None,
) -> bytearray:
    """A copy of a batch's header with baseOffset and partitionLeaderEpoch set, and, with
    ``log_append_time``, LogAppendTime stamped (or, with ``max_timestamp``, the batch made
    CreateTime with that maxTimestamp, as Kafka's setMaxTimestamp(CREATE_TIME, ...)) and the
    CRC recomputed over the new header and the unchanged records.
    Lets a writer send header + original payload without copying the payload."""
    header = bytearray(memoryview(buffer)[position : position + HEADER_SIZE])
    _I64.pack_into(header, BASE_OFFSET, base_offset)
    _I32.pack_into(header, PARTITION_LEADER_EPOCH, leader_epoch)
    stamp = log_append_time if log_append_time is not None else max_timestamp
    if stamp is not None:
        attributes = _I16.unpack_from(header, ATTRIBUTES)[0]
        if log_append_time is not None:
            attributes |= TIMESTAMP_TYPE_MASK
        else:
            attributes &= ~TIMESTAMP_TYPE_MASK
        _I16.pack_into(header, ATTRIBUTES, attributes)
        _I64.pack_into(header, MAX_TIMESTAMP, stamp)
        crc = crc32c(
            memoryview(buffer)[position + HEADER_SIZE : position + size],
            crc32c(header[ATTRIBUTES:]),
        )
        _U32.pack_into(header, CRC, crc)
    return header


_HEAD = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic


def new_batch(
    payload: bytes,
    *,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    records_count: int,
) -> bytes:
    """A v2 batch (base offset 0, no leader epoch) around an encoded, possibly compressed,
    records ``payload``: the one place clients of the format (the coordinator, the Spark
    sink) build a header and its CRC."""
    tail = _TAIL.pack(
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    )
    crc = crc32c(payload, crc32c(tail))
    return (
        _HEAD.pack(0, HEADER_SIZE - LOG_OVERHEAD + len(payload), -1, 2)
        + _U32.pack(crc)
        + tail
        + payload
    )


#: ControlRecordType of a transaction marker (the key's second int16).
CONTROL_TYPE_ABORT = 0
CONTROL_TYPE_COMMIT = 1


class EndTxnMarker(NamedTuple):
    """A control batch's EndTransactionMarker: COMMIT or ABORT and the coordinator epoch."""

    commit: bool
    coordinator_epoch: int


def control_batch(
    producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, timestamp_ms: int
) -> bytes:
    """A transaction marker as Kafka's MemoryRecords.withEndTransactionMarker writes it: a
    transactional control batch of one uncompressed record whose key is the ControlRecordType
    (version 0, ABORT 0 or COMMIT 1) and whose value is the EndTransactionMarker (version 0,
    coordinator epoch). Its base sequence is -1: markers take no part in sequences."""
    key = _I16.pack(0) + _I16.pack(CONTROL_TYPE_COMMIT if commit else CONTROL_TYPE_ABORT)
    value = _I16.pack(0) + _I32.pack(coordinator_epoch)
    record = (
        b"\x00"  # attributes
        + write_varint(0)  # timestamp delta
        + write_varint(0)  # offset delta
        + write_varint(len(key))
        + key
        + write_varint(len(value))
        + value
        + write_varint(0)  # no headers
    )
    return new_batch(
        write_varint(len(record)) + record,
        attributes=TRANSACTIONAL_MASK | CONTROL_MASK,
        last_offset_delta=0,
        base_timestamp=timestamp_ms,
        max_timestamp=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        records_count=1,
    )


def end_txn_marker(buffer: bytes | memoryview, position: int, size: int) -> EndTxnMarker | None:
    """The EndTransactionMarker of the control batch at ``position`` (``size`` bytes, already
    checked), or None for a control batch of another type (Kafka's LEADER_CHANGE and
    snapshot records are control batches too, without transaction meaning).

    Reads the one record's key and value (a few bytes) and raises InvalidBatch for a
    compressed or malformed one: Kafka writes markers uncompressed, and its
    ControlRecordType.parse rejects what it cannot read."""
    if _I16.unpack_from(buffer, position + ATTRIBUTES)[0] & COMPRESSION_MASK:
        raise InvalidBatch("corrupt", "a compressed control batch")
    end = position + size
    try:
        pos = position + RECORDS
        length, pos = read_varint(buffer, pos)
        if pos + length > end:
            raise InvalidBatch("corrupt", "control record runs past its batch")
        pos += 1  # attributes
        _, pos = read_varint(buffer, pos)  # timestamp delta
        _, pos = read_varint(buffer, pos)  # offset delta
        key_length, pos = read_varint(buffer, pos)
        if key_length < 4:
            raise InvalidBatch("corrupt", "control record key shorter than 4 bytes")
        control_type = _I16.unpack_from(buffer, pos + 2)[0]
        pos += key_length
        if control_type not in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
            return None
        value_length, pos = read_varint(buffer, pos)
        if value_length < 6 or pos + value_length > end:
            raise InvalidBatch("corrupt", "end transaction marker value shorter than 6 bytes")
        coordinator_epoch = _I32.unpack_from(buffer, pos + 2)[0]
    except (IndexError, struct.error):
        raise InvalidBatch("corrupt", "control record runs past its batch") from None
    return EndTxnMarker(control_type == CONTROL_TYPE_COMMIT, coordinator_epoch)


def iter_batches(
    buffer: bytes | bytearray | memoryview, *, verify_crc: bool = True, strict_count: bool = True
) -> Iterator[RecordBatch]:
    """Every batch of a records blob, checked; raises InvalidBatch at the first bad one."""
    position, end = 0, len(buffer)
    while position < end:
        batch = check_batch(buffer, position, end, verify_crc=verify_crc, strict_count=strict_count)
        yield batch
        position += batch.size_in_bytes


# -- record-level decoding (only where a feature needs it) -------------------


def write_varint(value: int) -> bytes:
    """A zig-zag varint as records use (the inverse of ``read_varint``)."""
    return uvarint((value << 1) ^ (value >> 63))


def read_varint(buffer: bytes | memoryview, position: int) -> tuple[int, int]:
    """A zig-zag varint (as records use) and the position after it."""
    result, position = _read_uvarint(buffer, position)
    return (result >> 1) ^ -(result & 1), position


def timestamp_delta_range(payload: bytes | memoryview, count: int) -> tuple[int, int]:
    """(smallest, largest) timestampDelta of the ``count`` records of an uncompressed records
    payload, which they must fill exactly (Kafka's "Incorrect declared batch size").

    The produce path runs this on every CreateTime batch while a timestamp window is
    set (Kafka 4 bounds message.timestamp.after.max.ms by default), since a batch header's
    maxTimestamp is the producer's word, not the records'. The C walk (``_fastpath``,
    built at install when a compiler is there) decides every regular payload; an
    irregular one, or an install without it, goes through ``walk_timestamp_deltas``,
    which names the error. Raises InvalidBatch("invalid") when the records do not fit.
    """
    if _native_delta_range is not None:
        found = _native_delta_range(payload, count)
        if found is not None:
            return found
    return walk_timestamp_deltas(payload, count)


def walk_timestamp_deltas(payload: bytes | memoryview, count: int) -> tuple[int, int]:
    """``timestamp_delta_range`` in Python: reads only each record's length and timestampDelta,
    with the one- and two-byte varints records of up to 8 KiB have decoded inline."""
    low, high = _LONG_MAX, -_LONG_MAX - 1
    position = 0
    try:
        for _ in range(count):
            length = payload[position]
            if length < 0x80:
                position += 1
            elif (second := payload[position + 1]) < 0x80:
                length = (length & 0x7F) | (second << 7)
                position += 2
            else:
                length, position = _read_uvarint(payload, position)
            if length & 1:  # zig-zag: a negative length
                raise InvalidBatch("invalid", f"negative record length at {position}")
            delta = payload[position + 1]  # after the attributes byte
            if delta < 0x80:
                delta = (delta >> 1) ^ -(delta & 1)
            else:
                delta = read_varint(payload, position + 1)[0]
            if delta < low:
                low = delta
            if delta > high:
                high = delta
            position += length >> 1
    except IndexError:
        raise InvalidBatch(
            "invalid", "Incorrect declared batch size, premature EOF reached"
        ) from None
    if position != len(payload):
        raise InvalidBatch(
            "invalid",
            f"Incorrect declared batch size: {count} records end at {position} "
            f"of {len(payload)} bytes",
        )
    return low, high


def _read_uvarint(buffer: bytes | memoryview, position: int) -> tuple[int, int]:
    """An unsigned varint and the position after it."""
    shift = result = 0
    while True:
        byte = buffer[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7
        if shift > 63:
            raise InvalidBatch("corrupt", "varint too long")


def record_timestamps(batch: RecordBatch) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of each record of an uncompressed batch."""
    if batch.compression_type:
        raise ValueError("record_timestamps needs an uncompressed batch")
    payload = batch.records_payload()
    base_offset, base_ts = batch.base_offset, batch.base_timestamp
    position = 0
    for _ in range(batch.records_count):
        length, position = read_varint(payload, position)
        end = position + length
        position += 1  # attributes
        ts_delta, position = read_varint(payload, position)
        offset_delta, position = read_varint(payload, position)
        yield base_offset + offset_delta, base_ts + ts_delta
        position = end


def first_batch_is_transactional(records: memoryview | bytes | None) -> bool:
    """Whether the first batch of a partition's records is transactional (Kafka's
    RequestUtils.hasTransactionalRecords looks at the first batch only): two header bytes."""
    if records is None or len(records) < ATTRIBUTES + 2 or records[MAGIC] != 2:
        return False
    return bool(_I16.unpack_from(records, ATTRIBUTES)[0] & TRANSACTIONAL_MASK)


class TransactionalProducer(NamedTuple):
    """Who wrote a transactional first batch: what a leader asks the coordinator about."""

    producer_id: int
    producer_epoch: int
    base_sequence: int


def transactional_producer(records: memoryview | bytes | None) -> TransactionalProducer | None:
    """The producer of the partition's first batch if it is transactional, else None (a
    transactional produce sends one batch per partition; the header's fields only)."""
    if records is None or len(records) < RECORDS_COUNT or not first_batch_is_transactional(records):
        return None
    return TransactionalProducer(
        _I64.unpack_from(records, PRODUCER_ID)[0],
        _I16.unpack_from(records, PRODUCER_EPOCH)[0],
        _I32.unpack_from(records, BASE_SEQUENCE)[0],
    )
