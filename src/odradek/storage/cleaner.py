"""LogCleaner: log compaction that keeps the latest record per key (Kafka's LogCleaner and Cleaner).

Cleaning is split in two so that the slow part runs outside the event loop:

``prepare`` (any thread) picks the cleanable range as LogCleanerManager does
(first dirty offset from the cleaner checkpoint, first uncleanable offset at the
active segment, the high watermark or the first segment younger than
min.compaction.lag.ms;
min.cleanable.dirty.ratio and max.compaction.lag.ms decide whether to clean),
builds an OffsetMap of the dirty section (bounded by log.cleaner.dedupe.buffer.size:
when it fills, only the part mapped is cleaned and the rest waits for the next
round), then streams every segment below the end of the mapped range batch by
batch into ``<segment>.log.cleaned``. Memory stays bounded by the map, the read
buffer and the largest batch; a segment is only written out from its first
changed batch on (what precedes it is copied from the file), and a segment that
does not change is not written at all.

``install`` (the log's owner, on the event loop) drops the plan if the log was
truncated meanwhile or went offline or was deleted, then lets
``Log.install_cleaned`` record the new first dirty offset in the log dir's
cleaner-offset-checkpoint and swap every segment through ``.swap``. A crash at any point leaves either the old or the
new segment: .cleaned files are deleted on load, .swap files are completed.

Per record, as Kafka's Cleaner.shouldRetainRecord: records after the mapped range
stay; records without a key go; a record stays when it is the latest for its
key, and for a tombstone only until its batch's delete horizon (KIP-534). A
retained tombstone's batch without a horizon is rewritten with one, now +
delete.retention.ms, in its base timestamp (attributes bit 6), so it is removed
by a cleaning after that time.

Per batch, as MemoryRecords.filterTo: a batch whose records all stay (and needs
no horizon) is copied byte for byte; otherwise its retained records are
rebuilt into one batch with the original base offset, lastOffsetDelta,
producer id, epoch, base sequence and codec (recompressed); a batch left
without records is dropped unless it is the last batch of a producer the log
still tracks, which stays as an empty batch so the producer's last sequence
survives. Control batches (transaction markers) are always kept: the broker has
no transactions yet, so there is no aborted-transaction index telling when a
marker is no longer needed, and transactional data batches are treated as
committed.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from odradek.protocol import records as rb
from odradek.storage import errors
from odradek.storage.offset_map import (
    DEFAULT_DEDUPE_BUFFER_SIZE,
    DEFAULT_LOAD_FACTOR,
    OffsetMap,
)
from odradek.storage.records_builder import (
    build_batch,
    delete_horizon_ms,
    empty_batch,
    read_records,
)
from odradek.storage.segment import LogSegment

logger = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
#: log.cleaner.io.buffer.size: the read buffer (a larger batch is read whole on its own).
DEFAULT_IO_BUFFER_SIZE = 512 * 1024


@dataclass
class CleanPlan:
    cleaned: list[tuple[int, Path]]  # (segment base offset, .cleaned file)
    cleaner_offset: int  # the new first dirty offset
    bytes_before: int
    bytes_after: int
    #: Size of each segment when it was read: a segment of another size changed under the cleaner.
    sizes: dict[int, int] = field(default_factory=dict)
    #: The log's truncation count when the cleaning began: a truncation since voids the plan.
    truncations: int = 0


@dataclass(frozen=True)
class CleanableRange:
    first_dirty: int
    first_uncleanable: int
    segments: list[LogSegment]  # every inactive segment below first_uncleanable


class LogCleaner:
    def __init__(self, dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
                 load_factor: float = DEFAULT_LOAD_FACTOR, io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE) -> None:
        self.dedupe_buffer_size = dedupe_buffer_size
        self.load_factor = load_factor
        # log.cleaner.io.buffer.size may be 0 (Kafka's lower bound); reads and writes still need a batch header's worth.
        self.io_buffer_size = max(io_buffer_size, rb.HEADER_SIZE)
        #: Logs whose cleaning failed on a bad batch (Kafka's uncleanable partitions): log dir ->
        #: (the log, its truncation count then). Skipped while that log lives untruncated; a log
        #: deleted (and maybe created again under the same name) or truncated since is tried again,
        #: as Kafka's maintainUncleanablePartitions drops partitions whose log is gone.
        self.uncleanable: dict[Path, tuple[weakref.ref, int]] = {}

    def is_uncleanable(self, log) -> bool:
        """Whether ``log`` is marked uncleanable; drops the mark of a log deleted or truncated since."""
        entry = self.uncleanable.get(log.dir)
        if entry is None:
            return False
        marked, truncations = entry
        if marked() is log and not log.deleted and log._truncations == truncations:
            return True
        del self.uncleanable[log.dir]
        return False

    def cleanable_range(self, log, now_ms: int, upper_bound: int | None = None) -> CleanableRange | None:
        """The range to clean now, or None (dirty ratio and compaction lags as Kafka's LogCleanerManager).

        Only whole inactive segments below ``upper_bound`` (the high watermark: Kafka never
        cleans what a new leader could still truncate) and older than min.compaction.lag.ms.
        """
        cfg = log.config
        if not cfg.compact or self.is_uncleanable(log):
            return None
        segments = log.segments[:-1]  # a copy: the owner may roll meanwhile
        candidates = []
        for seg in segments:
            if seg.max_timestamp > now_ms - cfg.min_compaction_lag_ms or (
                    upper_bound is not None and seg.next_offset > upper_bound):
                break
            candidates.append(seg)
        if not candidates:
            return None
        first_uncleanable = candidates[-1].next_offset
        first_dirty = log.cleaner_offset
        if not log.log_start_offset <= first_dirty <= log.log_end_offset:
            first_dirty = log.log_start_offset
        dirty = [s for s in candidates if s.next_offset > first_dirty]
        dirty_bytes = sum(s.size for s in dirty)
        if not dirty_bytes:
            return None
        total = sum(s.size for s in candidates)
        first_ts = dirty[0].first_batch_timestamp
        overdue = (cfg.max_compaction_lag_ms < 2**63 - 1 and first_ts is not None and first_ts >= 0
                   and now_ms - first_ts > cfg.max_compaction_lag_ms)
        if overdue or dirty_bytes / total > cfg.min_cleanable_dirty_ratio:
            return CleanableRange(first_dirty, first_uncleanable, candidates)
        return None

    def needs_cleaning(self, log, now_ms: int) -> bool:
        return self.cleanable_range(log, now_ms) is not None

    def prepare(self, log, now_ms: int, upper_bound: int | None = None) -> CleanPlan | None:
        """Write the cleaned version of every segment that changes; safe off the event loop.

        None when there is nothing to clean, or the log's data cannot be read as valid
        batches (the log is then left alone from now on, and the error logged).
        """
        cleanable = self.cleanable_range(log, now_ms, upper_bound)
        return None if cleanable is None else self.clean(log, cleanable, now_ms)

    def clean(self, log, cleanable: CleanableRange, now_ms: int) -> CleanPlan | None:
        """prepare for a range chosen earlier by cleanable_range (Kafka's Cleaner.clean of a LogToClean)."""
        plan = CleanPlan([], cleanable.first_uncleanable, 0, 0, truncations=log._truncations)
        try:
            offset_map = self._build_offset_map(cleanable)
            plan.cleaner_offset = offset_map.latest_offset + 1
            active_producers = {pid: entry.batches[-1].last_offset
                                for pid, entry in dict(log.producer_state.producers).items() if entry.batches}
            retention = _Retention(offset_map, now_ms, log.config.delete_retention_ms, active_producers)
            for seg in cleanable.segments:
                if seg.base_offset >= plan.cleaner_offset:
                    break
                size = seg.size
                path = self._clean_segment(seg, size, retention)
                plan.sizes[seg.base_offset] = size
                plan.bytes_before += size
                if path is None:
                    plan.bytes_after += size
                else:
                    plan.bytes_after += path.stat().st_size
                    plan.cleaned.append((seg.base_offset, path))
        except BaseException as exc:
            for _, path in plan.cleaned:
                path.unlink(missing_ok=True)
            if _changed_under(log, cleanable, plan.truncations):
                # retention, DeleteRecords, a truncation or a deletion took segments away meanwhile
                logger.info("cleaning of %s abandoned, the log changed: %s", log.dir.name, exc)
                return None
            if isinstance(exc, (errors.KafkaError, rb.InvalidBatch)):
                logger.error("cannot clean %s, marking it uncleanable: %s", log.dir.name, exc)
                self.uncleanable[log.dir] = (weakref.ref(log), plan.truncations)
                return None
            raise
        return plan

    def install(self, log, plan: CleanPlan, now_ms: int) -> bool:
        """Swap the cleaned segments in (on the log's owner); False when the log changed under
        the cleaner (a truncation, Kafka aborts the cleaning then) and the plan was dropped."""
        if log.offline or log._truncations != plan.truncations:
            for _, path in plan.cleaned:
                path.unlink(missing_ok=True)
            return False
        by_base = {seg.base_offset: seg for seg in log.segments[:-1]}
        for base, size in plan.sizes.items():
            seg = by_base.get(base)
            if seg is None and base < log.segments[0].base_offset:
                continue  # deleted by retention meanwhile: the cleaned copy is simply not used
            if seg is None or seg.size != size:
                for _, path in plan.cleaned:
                    path.unlink(missing_ok=True)
                return False
        log.install_cleaned(plan, now_ms)
        return True

    # -- the offset map ----------------------------------------------------------------
    def _build_offset_map(self, cleanable: CleanableRange) -> OffsetMap:
        """Map every key of the dirty section to its latest offset, until the map is full
        (Kafka's buildOffsetMap: latest_offset then says how far the map reaches)."""
        offset_map = OffsetMap(self.dedupe_buffer_size, self.load_factor)
        start = cleanable.first_dirty
        offset_map.update_latest_offset(start - 1)
        segments = cleanable.segments
        for i, seg in enumerate(segments):
            if seg.next_offset <= start:
                continue
            for batch in _read_batches(seg.path, seg.size, self.io_buffer_size):
                if batch.last_offset < start:
                    continue
                if not batch.is_control:
                    for record in read_records(batch):
                        if record.key is not None and record.offset >= start and not offset_map.put(
                                record.key, record.offset):
                            return offset_map
                offset_map.update_latest_offset(batch.last_offset)
            next_base = segments[i + 1].base_offset if i + 1 < len(segments) else cleanable.first_uncleanable
            offset_map.update_latest_offset(next_base - 1)
        return offset_map

    # -- rewriting a segment -------------------------------------------------------------
    def _clean_segment(self, seg: LogSegment, size: int, retention: _Retention) -> Path | None:
        """Stream ``seg`` through the retention rules into ``<seg>.log.cleaned``; None when nothing changes."""
        writer = _CleanedWriter(seg.path, seg.path.with_name(seg.path.name + CLEANED_SUFFIX), self.io_buffer_size)
        try:
            for batch in _read_batches(seg.path, size, self.io_buffer_size):
                kept = retention.filter(batch)
                if kept is None:
                    writer.keep(batch.position_in_file, batch.size_in_bytes)
                else:
                    writer.replace(batch.position_in_file, batch.size_in_bytes, kept)
            return writer.finish(size)
        except BaseException:
            writer.abort()
            raise


def _changed_under(log, cleanable: CleanableRange, truncations: int) -> bool:
    """Whether segments the cleaner was reading left the log (or the log was truncated or closed)."""
    if log.offline or log._truncations != truncations:
        return True
    current = {id(seg) for seg in log.segments}
    return any(id(seg) not in current for seg in cleanable.segments)


class _Retention:
    """What stays of each batch (Kafka's RecordFilter inside Cleaner.cleanInto)."""

    def __init__(self, offset_map: OffsetMap, now_ms: int, delete_retention_ms: int,
                 active_producers: dict[int, int]) -> None:
        self.map = offset_map
        self.now_ms = now_ms
        self.delete_retention_ms = delete_retention_ms
        #: producer id -> last offset of its last batch, for the producers the log still tracks.
        self.active_producers = active_producers

    def filter(self, batch: _FileBatch) -> bytes | None:
        """None to keep the batch as it is, else its replacement (b"" to drop it)."""
        if batch.is_control:
            return None
        records = read_records(batch)
        horizon = delete_horizon_ms(batch)
        latest = self.map.latest_offset
        retained = [r for r in records if r.offset > latest or (
            r.key is not None and r.offset >= self.map.get(r.key)
            and (r.has_value or horizon is None or self.now_ms < horizon))]
        if retained:
            needs_horizon = horizon is None and any(not r.has_value for r in retained)
            if len(retained) == len(records) and not needs_horizon:
                return None
            return build_batch(batch, retained,
                               delete_horizon_ms=self.now_ms + self.delete_retention_ms if needs_horizon else horizon)
        pid = batch.producer_id
        if pid >= 0 and self.active_producers.get(pid) == batch.last_offset:
            return empty_batch(batch) if records else None
        return b""


class _FileBatch(rb.RecordBatch):
    """A batch read from a segment file, remembering where it lies in the file."""

    __slots__ = ("position_in_file",)

    def __init__(self, buffer: bytes | memoryview, position: int, fields: tuple[int, ...],
                 position_in_file: int) -> None:
        super().__init__(buffer, position, fields)
        self.position_in_file = position_in_file


def _read_batches(path: Path, size: int, buffer_size: int) -> Iterator[_FileBatch]:
    """The batches of the first ``size`` bytes of a segment file, CRC-checked, read ``buffer_size``
    bytes at a time (a larger batch alone). Reads through its own descriptor, so a segment
    closed or deleted meanwhile is still read to the end."""
    fd = os.open(path, os.O_RDONLY)
    try:
        position = 0
        while position < size:
            chunk = os.pread(fd, min(buffer_size, size - position), position)
            if len(chunk) < rb.HEADER_SIZE:
                raise rb.InvalidBatch("corrupt", f"{path}: {size - position} bytes left at {position}, no batch")
            view = memoryview(chunk)
            offset = 0
            while offset < len(chunk):
                try:
                    fields = rb.check_header(view, offset, len(chunk), strict_count=False)
                except rb.InvalidBatch:
                    if offset:
                        break  # the batch runs past this chunk: read again from it
                    length = int.from_bytes(chunk[rb.BATCH_LENGTH:rb.BATCH_LENGTH + 4], "big", signed=True)
                    whole = rb.LOG_OVERHEAD + length
                    if length <= 0 or whole <= len(chunk) or position + whole > size:
                        raise
                    chunk = os.pread(fd, whole, position)
                    view = memoryview(chunk)
                    fields = rb.check_header(view, 0, len(chunk), strict_count=False)
                yield _FileBatch(view, offset, fields, position + offset)
                offset += rb.LOG_OVERHEAD + fields[1]
            position += offset
    finally:
        os.close(fd)


class _CleanedWriter:
    """Writes a segment's cleaned copy, lazily: nothing until the first changed batch, then the
    unchanged bytes before it are copied from the source file and the rest streamed in."""

    def __init__(self, source: Path, target: Path, buffer_size: int) -> None:
        self.source, self.target, self.buffer_size = source, target, buffer_size
        self.fd: int | None = None
        self.src_fd: int | None = None
        self.copied = 0  # source bytes up to here are accounted for (copied or replaced)
        self.pending = bytearray()

    def keep(self, position: int, size: int) -> None:
        if self.fd is not None:
            self._copy_until(position + size)

    def replace(self, position: int, size: int, data: bytes) -> None:
        if self.fd is None:
            self.fd = os.open(self.target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            self.src_fd = os.open(self.source, os.O_RDONLY)
        self._copy_until(position)
        self._write(data)
        self.copied = position + size

    def _copy_until(self, end: int) -> None:
        while self.copied < end:
            chunk = os.pread(self.src_fd, min(self.buffer_size, end - self.copied), self.copied)
            if not chunk:
                raise OSError(f"{self.source} ended at {self.copied} while cleaning")
            self._write(chunk)
            self.copied += len(chunk)

    def _write(self, data: bytes) -> None:
        self.pending += data
        if len(self.pending) >= self.buffer_size:
            self._drain()

    def _drain(self) -> None:
        written, pending = 0, self.pending
        while written < len(pending):
            written += os.write(self.fd, memoryview(pending)[written:])
        pending.clear()

    def finish(self, size: int) -> Path | None:
        if self.fd is None:
            return None
        self._copy_until(size)
        self._drain()
        os.fsync(self.fd)
        self._close()
        return self.target

    def abort(self) -> None:
        if self.fd is not None:
            self._close()
            self.target.unlink(missing_ok=True)

    def _close(self) -> None:
        os.close(self.fd)
        os.close(self.src_fd)
        self.fd = self.src_fd = None
