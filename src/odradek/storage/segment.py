"""LogSegment: one .log file of v2 batches plus its .index, .timeindex and (when a
transaction was aborted in it) .txnindex."""

from __future__ import annotations

import ctypes
import logging
import os
import struct
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, NamedTuple

from odradek.protocol import records as rb
from odradek.storage.index import CorruptIndex, OffsetIndex, TimeIndex
from odradek.storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

if TYPE_CHECKING:
    from typing_extensions import Buffer

log = logging.getLogger(__name__)

_HEAD = struct.Struct(">qi")  # baseOffset, batchLength
_unpack_scan = struct.Struct(">qiiBIhiqq").unpack_from  # ... up to maxTimestamp (43 bytes)
_HEADER_SIZE = rb.HEADER_SIZE
_LOG_OVERHEAD = rb.LOG_OVERHEAD
RECOVERY_CHUNK = 8 * 1024 * 1024
INT_MAX = 2**31 - 1
_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024

#: Blocks are reserved ahead of the writes of a segment once it holds PREALLOCATE_FROM bytes,
#: as much again as it holds, at most PREALLOCATE_MAX at a time (see LogSegment._reserve).
PREALLOCATE_FROM = 1 << 20
PREALLOCATE_MAX = 16 << 20
_FALLOC_FL_KEEP_SIZE = 1
_fallocate = getattr(ctypes.CDLL(None, use_errno=True), "fallocate", None)
if _fallocate is not None:
    _fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
_NEVER = 2**63


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class CorruptSegment(Exception):
    """A batch header of a segment loaded without recovery that cannot be right; the
    segment is recovered (validated batch by batch, cut at the first bad one)."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"{reason} at position {position}")
        self.position = position
        self.reason = reason


class NothingAppended(OSError):
    """An append that failed leaving the segment exactly as it was (its errno tells why:
    ENOSPC for a full disk), so the log may go on once the cause is gone."""


class FileRegion(NamedTuple):
    """A byte range of an open segment file, ready for os.sendfile / loop.sock_sendfile
    (a NamedTuple, like BatchMeta: every fetch makes one)."""

    file: BinaryIO
    position: int
    length: int

    def read_bytes(self) -> bytes:
        return os.pread(self.file.fileno(), self.length, self.position)


class BatchMeta(NamedTuple):
    """What reads, truncation and loading need to know of one batch without touching its
    records. A NamedTuple: every fetch makes two, and a frozen dataclass's __init__ costs
    twice as much."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    #: The 61 header bytes when read from a file (producer fields for state rebuilds).
    header: bytes = b""


#: What producer state rebuilds need of a batch with a producer id: (base offset, last offset,
#: max timestamp, producer id, producer epoch, base sequence, attributes, transaction marker).
ProducerBatch = tuple[int, int, int, int, int, int, int, "rb.EndTxnMarker | None"]


class LogSegment:
    """Append-only batches from ``base_offset``; indexes are sparse and rebuilt when in doubt."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        index_bytes: int,
        index_interval: int,
        created_ms: int,
        *,
        suffix: str = "",
        txn_index_exists: bool | None = None,
    ) -> None:
        """``txn_index_exists`` says whether a .txnindex is there when the caller knows (a new
        segment, a load that listed the directory); None looks."""
        self.base_offset = base_offset
        self.index_interval = index_interval
        name = segment_name(base_offset)
        self.path = directory / f"{name}.log{suffix}"
        self.file: BinaryIO = open(self.path, "a+b", buffering=0)  # noqa: SIM115 - lives as long as the segment
        self.fd = self.file.fileno()
        self.offset_index = OffsetIndex(
            directory / f"{name}.index{suffix}", base_offset, index_bytes
        )
        self.time_index = TimeIndex(
            directory / f"{name}.timeindex{suffix}", base_offset, index_bytes
        )
        self.txn_index = TransactionIndex(
            directory / f"{name}{TXN_INDEX_SUFFIX}{suffix}", exists=txn_index_exists
        )
        self.size = os.fstat(self.fd).st_size
        self.next_offset = base_offset
        self.max_timestamp = rb.NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self.created_ms = created_ms
        #: segment.jitter.ms drawn for this segment, so segments of many partitions do not roll together.
        self.roll_jitter_ms = 0
        self._contiguous = True
        #: Filled by recover(): (partitionLeaderEpoch, base offset) of each batch that starts a
        #: newer epoch, for the leader epoch cache (its checkpoint may lag behind a crash) ...
        self.recovered_epochs: list[tuple[int, int]] = []
        #: ... and producer_batches() tuples of the batches it re-read, so the log rebuilds
        #: producer state without reading their headers again (None when not recovered).
        self.recovered_producer_batches: list[ProducerBatch] | None = None
        self.first_batch_timestamp: int | None = None
        self._bytes_since_index = _NEVER  # index the first batch
        #: Whether either index is full (a reason to roll); kept up to date by _indexes_changed.
        self.index_full = False
        #: The end of the blocks reserved ahead of the writes; no reservation below it.
        self._reserved = PREALLOCATE_FROM
        #: Whether blocks beyond the data are reserved (by this process) and should be given back.
        self._holds_reserve = False
        #: Guards ``closed`` and the descriptor against flush() in another thread (see flush).
        self._close_lock = threading.Lock()
        self.closed = False

    # -- appending -----------------------------------------------------------
    def append(
        self,
        pieces: Sequence[Buffer],
        size: int,
        batches: list[tuple[int, int, int, int, int]],
    ) -> None:
        """Write ``pieces`` (``size`` bytes in all) with one writev, then index their batches,
        given as (position relative to the start of the write, size, base offset, last offset,
        max timestamp).

        All or nothing: disk blocks for the index entries are taken first (see
        OffsetIndex.make_room), and what a failed write left is cut off again, so a
        failure raises NothingAppended (with the errno of the cause) and the segment is as
        it was; should the cut fail too, that OSError is raised instead."""
        start = self.size
        end = start + size
        count = len(batches)
        offset_index, time_index = self.offset_index, self.time_index
        try:
            if len(offset_index.keys) + count > offset_index.allocated:
                offset_index.make_room(count)
            if len(time_index.keys) + count > time_index.allocated:
                time_index.make_room(count)
            if end > self._reserved:
                self._reserve(end)
            if len(pieces) > _IOV_MAX:
                pieces = [b"".join(pieces)]
            written = os.writev(self.fd, pieces)  # raises only when it wrote nothing
            if written != size:  # the rest once more: it ends the write or says why it cannot
                rest = memoryview(b"".join(pieces))[written:]  # a copy, but on this rare path only
                while rest:
                    rest = rest[os.write(self.fd, rest) :]
        except OSError as exc:
            if os.fstat(self.fd).st_size != start:
                os.ftruncate(self.fd, start)  # leave the segment as it was: all or nothing
                self._holds_reserve = False  # the cut gave the reserved blocks back
                self._reserved = max(start, PREALLOCATE_FROM)
            raise NothingAppended(exc.errno, f"append to {self.path}: {exc.strerror}") from exc
        self._index_batches(batches, start)
        self.size = end

    def _reserve(self, end: int) -> None:
        """Reserve disk blocks ahead of the writes, as much again as the segment holds (at most
        PREALLOCATE_MAX), without changing the file's size (FALLOC_FL_KEEP_SIZE).

        A write into reserved blocks skips the file system's block allocation, which on
        ext4 is a good part of an append's cost. Readers, recovery and the file size see
        nothing of it; the blocks beyond the data are released when the segment rolls,
        closes or is truncated. Where fallocate is missing or refused, writes go on without.
        """
        length = end - self.size + min(end, PREALLOCATE_MAX)
        if (
            _fallocate is not None
            and _fallocate(self.fd, _FALLOC_FL_KEEP_SIZE, self.size, length) == 0
        ):
            self._reserved = self.size + length
            self._holds_reserve = True
        else:
            self._reserved = _NEVER

    def _release_reserved(self) -> None:
        """Give back the blocks reserved beyond the data (truncating to the same size does that)."""
        if self._holds_reserve:
            os.ftruncate(self.fd, self.size)
            self._holds_reserve = False
        self._reserved = max(self.size, PREALLOCATE_FROM)

    def _index_batches(self, batches: list[tuple[int, int, int, int, int]], start: int) -> None:
        """Take in batches (position relative to ``start``, size, base offset, last offset, max
        timestamp) that now follow the segment's last batch, as Kafka indexes them: an offset
        index entry once index.interval.bytes went by since the last one, and with it a time
        index entry when the largest timestamp grew. Appends pass a batch or a few, recovery
        a chunk's worth."""
        since, max_ts, max_ts_offset = (
            self._bytes_since_index,
            self.max_timestamp,
            self.offset_of_max_timestamp,
        )
        base_offset, interval, offset_index, time_index = (
            self.base_offset,
            self.index_interval,
            self.offset_index,
            self.time_index,
        )
        time_keys = time_index.keys
        for position, size, base, last, batch_max_ts in batches:
            if batch_max_ts > max_ts:
                max_ts, max_ts_offset = batch_max_ts, last
            if since >= interval:
                if offset_index.append(base - base_offset, start + position):
                    self.index_full = True
                if (not time_keys or max_ts > time_keys[-1]) and time_index.append(
                    max_ts, max_ts_offset - base_offset
                ):
                    self.index_full = True
                since = size
            else:
                since += size
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = batches[0][4]
        self._bytes_since_index, self.max_timestamp, self.offset_of_max_timestamp = (
            since,
            max_ts,
            max_ts_offset,
        )
        self.next_offset = last + 1

    # -- loading and recovery ------------------------------------------------
    def load(self, *, recover: bool, contiguous: bool = True) -> int:
        """Open an existing segment. With ``recover``, validate every batch, cut a torn or
        corrupt tail and rebuild the indexes; otherwise trust the indexes if they are sane
        and every batch header read to find the end checks out (see _load_from_indexes),
        and recover when either does not.

        Returns the number of bytes cut.
        """
        if not recover:
            try:
                self.offset_index.load()
                self.time_index.load()
                self._load_from_indexes()
                self._indexes_changed()
                return 0
            except CorruptIndex as exc:
                log.warning("rebuilding indexes of %s (%d bytes): %s", self.path, self.size, exc)
            except CorruptSegment as exc:
                log.warning(
                    "%s (%d bytes) is damaged at position %d: %s; recovering it",
                    self.path,
                    self.size,
                    exc.position,
                    exc.reason,
                )
        return self.recover(contiguous=contiguous)

    def _load_from_indexes(self) -> None:
        """Find the end of a segment a clean shutdown closed without reading all of it: from
        the last offset index entry, batch header by batch header.

        Nothing read here is trusted: a clean shutdown says the process finished its
        writes, not that the disk kept them (a bad sector, a file system repair, a copy
        cut short). A header with a length below the v2 header would stall this walk or
        run it backwards, one past the end of the file would make the log serve bytes it
        does not have, and stray bytes after the last batch would sit under the next
        append. So each header is checked as _checked_header does, and so are the index's
        last entry (a batch starting at the offset it names, within the file) and the
        first batch (its timestamp decides segment.ms rolls); any doubt raises
        CorruptSegment and the segment is recovered as after a crash. The walk always
        moves forward by at least a header, so it ends.
        """
        size = self.size
        indexed, position = self.offset_index.lookup(_NEVER)
        if position > size:
            raise CorruptSegment(position, f"index entry points past the end of the file ({size})")
        first = self._checked_header(0, self.base_offset - 1) if size else None
        self.first_batch_timestamp = None if first is None else first.max_timestamp
        last = self.time_index.last_entry
        if last is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last
        previous = indexed - 1  # the batch at an indexed position starts at the indexed offset
        b = first if position == 0 else self._checked_header(position, previous)
        if b is not None and self.offset_index.keys and b.base_offset != indexed:
            raise CorruptSegment(position, f"the batch there does not start at offset {indexed}")
        while b is not None:
            if b.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = b.max_timestamp, b.last_offset
            previous = b.last_offset
            position += b.size
            b = self._checked_header(position, previous) if position < size else None
        self.next_offset = previous + 1 if size else self.base_offset
        if last is not None and last[1] >= self.next_offset:
            raise CorruptIndex(f"{self.time_index.path}: offset {last[1]} is past the last batch")
        if self.offset_index.keys:
            self._bytes_since_index = 0

    def _checked_header(self, position: int, previous_last: int) -> BatchMeta:
        """The header at ``position`` if it can be a batch of this segment that follows one
        ending at offset ``previous_last``: magic 2, a length at least the v2 header's and
        within the file, offsets increasing and within a 32-bit delta of the segment's
        base. Raises CorruptSegment naming what is wrong."""
        size = self.size
        if position + _HEADER_SIZE > size:
            raise CorruptSegment(
                position, f"{size - position} bytes after the last batch, fewer than a header"
            )
        head = os.pread(self.fd, _HEADER_SIZE, position)
        if len(head) < _HEADER_SIZE:
            raise CorruptSegment(position, "the file ends within a batch header")
        base, length, _, magic, _, _, delta, _, max_ts = _unpack_scan(head)
        if length < _HEADER_SIZE - _LOG_OVERHEAD:
            raise CorruptSegment(position, f"batchLength {length} is smaller than the header")
        if position + _LOG_OVERHEAD + length > size:
            raise CorruptSegment(
                position, f"batchLength {length} runs past the end of the file ({size})"
            )
        if magic != 2:
            raise CorruptSegment(position, f"magic {magic}, not 2")
        if delta < 0:
            raise CorruptSegment(position, f"lastOffsetDelta {delta} is negative")
        if base <= previous_last or base + delta > self.base_offset + INT_MAX:
            raise CorruptSegment(
                position,
                f"batch offsets {base}..{base + delta} do not follow {previous_last} "
                f"within segment {self.base_offset}",
            )
        return BatchMeta(position, _LOG_OVERHEAD + length, base, base + delta, max_ts, head)

    def recover(self, *, contiguous: bool = True) -> int:
        """Re-validate every batch (CRC32C included), truncate at the first bad one, rebuild indexes.

        baseOffset is outside the CRC, so offsets are checked too: each batch must
        start where the previous one ended (``contiguous``, any log that is not
        compacted) or at least after it, and within a 32-bit relative offset.
        """
        self._contiguous = contiguous
        self.recovered_epochs = []
        self.recovered_producer_batches = []
        self.offset_index.reset()
        self.time_index.reset()
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = rb.NO_TIMESTAMP, self.base_offset
        self.first_batch_timestamp = None
        self._bytes_since_index = _NEVER
        file_size = os.fstat(self.fd).st_size
        buffer = memoryview(
            bytearray(min(RECOVERY_CHUNK, file_size))
        )  # reused: no allocation per chunk
        position = 0
        error = None
        self.offset_index.deferred = self.time_index.deferred = True  # one write each at the end
        while position < file_size and error is None:
            remaining = file_size - position
            read = os.preadv(self.fd, [buffer[:remaining]], position)
            pos, error = self._recover_chunk(buffer[:read], position)
            if pos == 0 and error is None:  # the first batch is not whole in the buffer
                size = (
                    rb.LOG_OVERHEAD + _HEAD.unpack_from(buffer, 0)[1]
                    if read >= rb.LOG_OVERHEAD
                    else 0
                )
                if len(buffer) < size <= remaining:  # a batch larger than the buffer: read it whole
                    buffer = memoryview(bytearray(size))
                    continue
                error = "torn batch at the end of the file"
            position += pos
        valid_end = position
        self.offset_index.write_deferred()
        self.time_index.write_deferred()
        self._indexes_changed()
        cut = file_size - valid_end
        if cut:
            log.warning(
                "recovery of %s: %s; truncating %d bytes at position %d",
                self.path,
                error,
                cut,
                valid_end,
            )
            os.ftruncate(self.fd, valid_end)
        self.txn_index.truncate_to(self.next_offset)  # entries of markers that are not there
        self.size = valid_end
        self._reserved = max(valid_end, PREALLOCATE_FROM)
        # A crash may have left blocks reserved beyond the data (a cut gave them back already).
        self._holds_reserve = os.fstat(self.fd).st_blocks * 512 > valid_end + PREALLOCATE_FROM // 2
        return cut

    def _recover_chunk(self, view: memoryview, position: int) -> tuple[int, str | None]:
        """Validate and index the whole batches at the start of ``view`` (read at ``position``);
        (bytes consumed, the error that stopped it or None when it stopped at a batch that
        continues past the end of ``view``)."""
        pos, end = 0, len(view)
        contiguous, max_last = self._contiguous, self.base_offset + INT_MAX
        next_offset = self.next_offset
        check = rb.check_header
        batches: list[tuple[int, int, int, int, int]] = []
        epochs = self.recovered_epochs
        latest_epoch = epochs[-1][0] if epochs else -1
        producer_batches = self.recovered_producer_batches
        assert producer_batches is not None
        error = None
        while pos < end:
            try:
                base, length, epoch, _, _, attrs, delta, _, max_ts, pid, p_epoch, first_seq, _ = (
                    check(view, pos, end, strict_count=contiguous)
                )
            except rb.InvalidBatch as exc:
                if (
                    end - pos < rb.HEADER_SIZE
                    or pos + rb.LOG_OVERHEAD + _HEAD.unpack_from(view, pos)[1] > end
                ):
                    break  # not whole in this chunk
                error = str(exc)
                break
            last = base + delta
            if base < next_offset or (contiguous and base != next_offset) or last > max_last:
                error = f"batch offset {base} does not follow {next_offset}"
                break
            size = rb.LOG_OVERHEAD + length
            batches.append((pos, size, base, last, max_ts))
            if epoch > latest_epoch:
                epochs.append((epoch, base))
                latest_epoch = epoch
            if pid >= 0:
                marker = None
                if attrs & rb.CONTROL_MASK:
                    try:
                        marker = rb.end_txn_marker(view, pos, size)
                    except rb.InvalidBatch as exc:
                        error = str(exc)
                        break
                producer_batches.append(
                    (base, last, max_ts, pid, p_epoch, first_seq, attrs, marker)
                )
            next_offset = last + 1
            pos += size
        if batches:
            self._index_batches(batches, position)
        return pos, error

    def scan_headers(self, position: int = 0, end: int | None = None) -> Iterator[BatchMeta]:
        """BatchMeta of every batch from ``position`` (a batch boundary), headers only."""
        end = self.size if end is None else end
        while (b := self.header_at(position, end)) is not None:
            yield b
            position += b.size

    def header_at(self, position: int, end: int) -> BatchMeta | None:
        """The BatchMeta of the batch at ``position`` (a batch boundary), or None when no whole
        header lies before ``end``. Reads call this directly: a generator costs more than the
        one or two headers a fetch reads."""
        if position + _HEADER_SIZE > end:
            return None
        head = os.pread(self.fd, _HEADER_SIZE, position)
        if len(head) < _HEADER_SIZE:
            return None
        base, length, _, _, _, _, delta, _, max_ts = _unpack_scan(head)
        return BatchMeta(position, _LOG_OVERHEAD + length, base, base + delta, max_ts, head)

    def producer_batches(self, position: int = 0) -> Iterator[ProducerBatch]:
        """(base offset, last offset, max timestamp, producer id, producer epoch, base sequence,
        attributes, transaction marker of a control batch or None) of each batch from
        ``position`` (a batch boundary) that carries a producer id. Headers only, but for
        control batches (a few dozen bytes each), whose marker is read."""
        unpack = rb.HEADER.unpack
        for b in self.scan_headers(position):
            _, _, _, _, _, attrs, _, _, max_ts, pid, p_epoch, first_seq, _ = unpack(b.header)
            if pid >= 0:
                marker = None
                if attrs & rb.CONTROL_MASK:
                    marker = rb.end_txn_marker(os.pread(self.fd, b.size, b.position), 0, b.size)
                yield (
                    b.base_offset,
                    b.last_offset,
                    max_ts,
                    pid,
                    p_epoch,
                    first_seq,
                    attrs,
                    marker,
                )

    # -- reading -------------------------------------------------------------
    def find_batch(self, offset: int) -> BatchMeta | None:
        """The batch holding ``offset`` or the first one after it."""
        _, position = self.offset_index.lookup(offset)
        end = self.size
        while (b := self.header_at(position, end)) is not None:
            if b.last_offset >= offset:
                return b
            position += b.size
        return None

    def locate(self, offset: int) -> tuple[int, int] | None:
        """(position, base offset) of the batch holding ``offset`` or of the first one after it,
        or None. An index entry for ``offset`` itself marks where its batch starts, so no header
        is read: a consumer's next fetch starts at the batch after its last one, which is
        indexed whenever batches are larger than index.interval.bytes."""
        position = self.offset_index.position_of(offset)
        if position is not None:
            return position, offset
        b = self.find_batch(offset)
        return None if b is None else (b.position, b.base_offset)

    def read_end(self, start: int, limit: int, max_offset: int) -> int:
        """The end of the last whole batch from ``start`` that fits before ``limit`` and starts below ``max_offset``."""
        _, position = self.offset_index.lookup_position(limit, max_offset)
        end = position = max(position, start)
        size = self.size
        while (b := self.header_at(position, size)) is not None:
            position += b.size
            if b.base_offset >= max_offset or position > limit:
                break
            end = position
        return end

    def read_batch(self, position: int) -> rb.RecordBatch:
        size = rb.LOG_OVERHEAD + _HEAD.unpack(os.pread(self.fd, rb.LOG_OVERHEAD, position))[1]
        return rb.RecordBatch(os.pread(self.fd, size, position))

    def find_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        start_offset = self.time_index.lookup_before(timestamp)
        _, position = self.offset_index.lookup(start_offset)
        for b in self.scan_headers(position):
            if b.max_timestamp >= timestamp:
                batch = self.read_batch(b.position)
                if batch.compression_type == 0 and batch.timestamp_type == rb.CREATE_TIME:
                    for offset, ts in rb.record_timestamps(batch):
                        if ts >= timestamp:
                            return offset, ts
                return b.base_offset, b.max_timestamp
        return None

    # -- truncation, flush, lifecycle ----------------------------------------
    def truncate_to(self, offset: int) -> int:
        """Drop batches at or after ``offset`` (cut at the start of the batch holding it) and
        end the segment at ``offset`` (Log.truncate_to says why). Returns bytes cut."""
        b = self.find_batch(offset)
        if b is None:
            self.next_offset = min(self.next_offset, max(offset, self.base_offset))
            return 0
        cut = self.size - b.position
        os.ftruncate(self.fd, b.position)
        self.size = b.position
        self._reserved = max(self.size, PREALLOCATE_FROM)
        self._holds_reserve = False  # the truncation gave the blocks beyond it back
        self.offset_index.truncate_to(b.base_offset)
        self.time_index.truncate_to(b.base_offset)
        self.txn_index.truncate_to(b.base_offset)
        self._indexes_changed()
        # Recompute what depended on the dropped batches from the remaining headers.
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = rb.NO_TIMESTAMP, self.base_offset
        self.first_batch_timestamp = None
        for m in self.scan_headers(0):
            if self.first_batch_timestamp is None:
                self.first_batch_timestamp = m.max_timestamp
            if m.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = m.max_timestamp, m.last_offset
            self.next_offset = m.last_offset + 1
        self.next_offset = max(self.next_offset, offset)
        self._bytes_since_index = _NEVER  # index the next batch
        return cut

    def _indexes_changed(self) -> None:
        oi, ti = self.offset_index, self.time_index
        self.index_full = len(oi.keys) >= oi.max_entries or len(ti.keys) >= ti.max_entries

    def flush(self) -> None:
        """fsync the .log and both index files; safe from any thread, a no-op once closed.

        The LogManager runs this in a thread while the owner may roll, trim, truncate
        or close the segment. So it never touches the index memory maps (which the
        owner unmaps and remaps) nor the segment's own descriptor (which close() may
        hand to another file): it takes private descriptors under the close lock and
        fsyncs those. An fsync of the file covers pages dirtied through a shared
        mapping (Linux tracks them at fault time), so no msync is needed.
        """
        fds: list[int] = []
        try:
            with self._close_lock:
                if self.closed:
                    return
                fds.append(os.dup(self.fd))
                fds.extend(
                    os.open(index.path, os.O_RDONLY)
                    for index in (self.offset_index, self.time_index)
                )
                if self.txn_index.entries:
                    fds.append(os.open(self.txn_index.path, os.O_RDONLY))
            for fd in fds:
                os.fsync(fd)
        finally:
            for fd in fds:
                os.close(fd)

    def on_become_active(self) -> None:
        self.offset_index.preallocate()
        self.time_index.preallocate()

    def on_become_inactive(self) -> None:
        self._release_reserved()
        self.offset_index.trim()
        self.time_index.trim()

    def close(self) -> None:
        try:
            self.retire()
        finally:
            self.file.close()

    def retire(self) -> BinaryIO:
        """Close the segment (appends, indexes, flushes) but for its .log file, handed back open.

        A fetch may still be sending a FileRegion of this file (sendfile goes on across event
        loop turns); closed, its descriptor could be reused by another file and the fetch
        would send that file's bytes. The log closes it when the file is deleted, after
        file.delete.delay.ms, as Kafka keeps a deleted segment readable until then. The
        indexes close now, while their files still have the names they trim by."""
        with self._close_lock:
            self.closed = True
            try:
                self._release_reserved()
            finally:
                self.offset_index.close()
                self.time_index.close()
        return self.file

    def files(self) -> list[Path]:
        """The segment's files on disk (the .txnindex only once it exists)."""
        paths = [self.path, self.offset_index.path, self.time_index.path]
        if self.txn_index.exists:
            paths.append(self.txn_index.path)
        return paths
