"""LogCleaner: log compaction that keeps the latest record per key (Kafka's LogCleaner and Cleaner).

Cleaning is split in two so that the slow part runs outside the event loop:

``prepare`` (any thread) picks the cleanable range as LogCleanerManager does
(first dirty offset from the cleaner checkpoint, first uncleanable offset at the
active segment, the high watermark or the first segment younger than
min.compaction.lag.ms;
min.cleanable.dirty.ratio and max.compaction.lag.ms decide whether to clean),
builds an OffsetMap of the dirty section (bounded by log.cleaner.dedupe.buffer.size:
when it fills, only the part mapped is cleaned and the rest waits for the next
round), then groups the segments below the end of the mapped range as Kafka's
groupSegmentsBySize (consecutive segments whose log bytes add up to at most
segment.bytes, whose offset index and time index bytes each add up to at most
segment.index.bytes, and whose offsets stay within a 32-bit offset relative to
the group's first) and streams each group batch by batch into one
``<first segment>.log.cleaned``, so that compaction does not leave ever more,
ever smaller segments. Memory stays bounded by the map, the read buffer and the
largest batch. A group of one segment is only written out from its first
changed batch on (what precedes it is copied from the file), and not at all
when it does not change; a group of several is always written, its unchanged
batches copied byte for byte.

``install`` (the log's owner, on the event loop) drops the plan if the log was
truncated meanwhile or went offline or was deleted, then lets
``Log.install_cleaned`` replace each group as Kafka's replaceSegments (the
cleaned file is renamed ``.swap``, the group's segments are retired, and the
``.swap`` takes the name of the group's first segment), then record the new
first dirty offset in the log dir's cleaner-offset-checkpoint. A crash at any
point leaves either a group's old segments or its new one: .cleaned files are
deleted on load, and a .swap file is completed (Kafka's LogLoader), the segments
whose base offsets fall within its offsets deleted first; the checkpoint, not
yet written, has the next cleaning clean again what was left. For that a .swap
must reach the last offset of its group: the last batch of a group of several
segments stays, as an empty batch when none of its records does, as Kafka keeps
the last batch of a cleaning round.

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
survives.

Transactions. Cleaning stops before the first unstable offset (an open transaction,
or a completed one whose marker is not replicated yet), as Kafka's
firstUncleanableDirtyOffset. A cleaned group keeps the .txnindex entries of the
segments it replaces (``Log.install_cleaned``). As Kafka's
CleanedTransactionMetadata, the records of aborted transactions (the .txnindex
entries of the cleaned range say which) take no part in the offset map, so an
aborted value never hides the committed one before it, and they are removed (a
producer's last batch stays empty, as above). A marker goes once a cleaning finds
no batch of its transaction left before it: that cleaning gives it a delete horizon
(now + delete.retention.ms) as a tombstone gets one, and a cleaning after the horizon
removes it, so a consumer that read the transaction's records within
delete.retention.ms still gets its marker. Other control batches are kept.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

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
from odradek.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from odradek.storage.log import Log

logger = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
INT_MAX = 2**31 - 1
#: log.cleaner.io.buffer.size: the read buffer (a larger batch is read whole on its own).
DEFAULT_IO_BUFFER_SIZE = 512 * 1024


@dataclass
class CleanPlan:
    #: (base offsets of a group's segments, the group's .cleaned file), groups in offset order.
    cleaned: list[tuple[tuple[int, ...], Path]]
    cleaner_offset: int  # the new first dirty offset
    bytes_before: int
    bytes_after: int
    #: Size of each segment when it was read: a segment of another size changed under the cleaner.
    sizes: dict[int, int] = field(default_factory=dict)
    #: The log's truncation count when the cleaning began: a truncation since voids the plan.
    truncations: int = 0


class SegmentSizes(NamedTuple):
    """What the grouping weighs of a segment (its sizes when the cleaning began)."""

    base_offset: int
    log_bytes: int
    offset_index_bytes: int
    time_index_bytes: int

    @classmethod
    def of(cls, seg: LogSegment, log_bytes: int) -> SegmentSizes:
        return cls(
            seg.base_offset,
            log_bytes,
            len(seg.offset_index) * seg.offset_index.entry.size,
            len(seg.time_index) * seg.time_index.entry.size,
        )


def group_segments_by_size(
    segments: Sequence[SegmentSizes],
    max_log_bytes: int,
    max_index_bytes: int,
    first_uncleanable_offset: int,
) -> list[list[SegmentSizes]]:
    """Consecutive segments in groups that each fit one segment (Kafka's Cleaner.groupSegmentsBySize).

    A segment joins the group before it while the group's log bytes stay within
    ``max_log_bytes`` (segment.bytes), its offset index bytes and its time index bytes
    each within ``max_index_bytes`` (segment.index.bytes), and the last offset the
    segment can hold (just below the next segment's base offset, or the first
    uncleanable offset after the last) within INT_MAX of the group's base offset, as
    an index stores offsets relative to it. An empty segment always fits that last
    test. A segment too large for any company stays alone.
    """
    groups: list[list[SegmentSizes]] = []
    i, n = 0, len(segments)
    while i < n:
        first = segments[i]
        group = [first]
        log_bytes, offset_index_bytes, time_index_bytes = (
            first.log_bytes,
            first.offset_index_bytes,
            first.time_index_bytes,
        )
        i += 1
        while i < n:
            seg = segments[i]
            last_possible = (
                segments[i + 1].base_offset if i + 1 < n else first_uncleanable_offset
            ) - 1
            if (
                log_bytes + seg.log_bytes > max_log_bytes
                or offset_index_bytes + seg.offset_index_bytes > max_index_bytes
                or time_index_bytes + seg.time_index_bytes > max_index_bytes
                or (seg.log_bytes and last_possible - first.base_offset > INT_MAX)
            ):
                break
            group.append(seg)
            log_bytes += seg.log_bytes
            offset_index_bytes += seg.offset_index_bytes
            time_index_bytes += seg.time_index_bytes
            i += 1
        groups.append(group)
    return groups


@dataclass(frozen=True)
class CleanableRange:
    first_dirty: int
    first_uncleanable: int
    segments: list[LogSegment]  # every inactive segment below first_uncleanable


class LogCleaner:
    def __init__(
        self,
        dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
        load_factor: float = DEFAULT_LOAD_FACTOR,
        io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE,
    ) -> None:
        self.dedupe_buffer_size = dedupe_buffer_size
        self.load_factor = load_factor
        # log.cleaner.io.buffer.size may be 0 (Kafka's lower bound); reads and writes still need a batch header's worth.
        self.io_buffer_size = max(io_buffer_size, rb.HEADER_SIZE)
        #: Logs whose cleaning failed on a bad batch (Kafka's uncleanable partitions): log dir ->
        #: (the log, its truncation count then). Skipped while that log lives untruncated; a log
        #: deleted (and maybe created again under the same name) or truncated since is tried again,
        #: as Kafka's maintainUncleanablePartitions drops partitions whose log is gone.
        self.uncleanable: dict[Path, tuple[weakref.ref[Log], int]] = {}

    def is_uncleanable(self, log: Log) -> bool:
        """Whether ``log`` is marked uncleanable; drops the mark of a log deleted or truncated since."""
        entry = self.uncleanable.get(log.dir)
        if entry is None:
            return False
        marked, truncations = entry
        if marked() is log and not log.deleted and log._truncations == truncations:
            return True
        del self.uncleanable[log.dir]
        return False

    def cleanable_range(
        self, log: Log, now_ms: int, upper_bound: int | None = None
    ) -> CleanableRange | None:
        """The range to clean now, or None (dirty ratio and compaction lags as Kafka's LogCleanerManager).

        Only whole inactive segments below ``upper_bound`` (the high watermark: Kafka never
        cleans what a new leader could still truncate) and the first unstable offset (an open
        transaction, or one whose marker is not yet replicated, is not cleaned past: its
        outcome decides what stays), and older than min.compaction.lag.ms.
        """
        cfg = log.config
        if not cfg.compact or self.is_uncleanable(log):
            return None
        segments = log.segments[:-1]  # a copy: the owner may roll meanwhile
        unstable = log.producer_state.first_unstable_offset_any_thread(
            log.log_end_offset if upper_bound is None else upper_bound
        )
        if unstable is not None:  # Kafka's firstUncleanableDirtyOffset: never past a transaction
            upper_bound = unstable if upper_bound is None else min(upper_bound, unstable)
        candidates = []
        for seg in segments:
            if seg.max_timestamp > now_ms - cfg.min_compaction_lag_ms or (
                upper_bound is not None and seg.next_offset > upper_bound
            ):
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
        overdue = (
            cfg.max_compaction_lag_ms < 2**63 - 1
            and first_ts is not None
            and first_ts >= 0
            and now_ms - first_ts > cfg.max_compaction_lag_ms
        )
        if overdue or dirty_bytes / total > cfg.min_cleanable_dirty_ratio:
            return CleanableRange(first_dirty, first_uncleanable, candidates)
        return None

    def needs_cleaning(self, log: Log, now_ms: int) -> bool:
        return self.cleanable_range(log, now_ms) is not None

    def prepare(self, log: Log, now_ms: int, upper_bound: int | None = None) -> CleanPlan | None:
        """Write the cleaned version of every segment that changes; safe off the event loop.

        None when there is nothing to clean, or the log's data cannot be read as valid
        batches (the log is then left alone from now on, and the error logged).
        """
        cleanable = self.cleanable_range(log, now_ms, upper_bound)
        return None if cleanable is None else self.clean(log, cleanable, now_ms)

    def clean(self, log: Log, cleanable: CleanableRange, now_ms: int) -> CleanPlan | None:
        """prepare for a range chosen earlier by cleanable_range (Kafka's Cleaner.clean of a LogToClean)."""
        plan = CleanPlan([], cleanable.first_uncleanable, 0, 0, truncations=log._truncations)
        try:
            aborted = AbortedRanges(
                log.collect_aborted_transactions(
                    cleanable.segments[0].base_offset, cleanable.first_uncleanable
                )
            )
            offset_map = self._build_offset_map(cleanable, aborted)
            plan.cleaner_offset = offset_map.latest_offset + 1
            active_producers = {
                pid: entry.batches[-1].last_offset
                for pid, entry in dict(log.producer_state.producers).items()
                if entry.batches
            }
            retention = _Retention(
                offset_map, now_ms, log.config.delete_retention_ms, active_producers, aborted
            )
            segments = [seg for seg in cleanable.segments if seg.base_offset < plan.cleaner_offset]
            sizes = [SegmentSizes.of(seg, seg.size) for seg in segments]
            groups = group_segments_by_size(
                sizes,
                log.config.segment_bytes,
                log.config.segment_index_bytes,
                cleanable.first_uncleanable,
            )
            start = 0
            for group in groups:
                members = segments[start : start + len(group)]
                start += len(group)
                for s in group:
                    plan.sizes[s.base_offset] = s.log_bytes
                group_bytes = sum(s.log_bytes for s in group)
                plan.bytes_before += group_bytes
                path = self._clean_group(members, [s.log_bytes for s in group], retention)
                if path is None:
                    plan.bytes_after += group_bytes
                else:
                    plan.bytes_after += path.stat().st_size
                    plan.cleaned.append((tuple(s.base_offset for s in group), path))
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

    def install(self, log: Log, plan: CleanPlan, now_ms: int) -> bool:
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
    def _build_offset_map(self, cleanable: CleanableRange, aborted: AbortedRanges) -> OffsetMap:
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
                if not batch.is_control and not aborted.holds(batch):
                    for record in read_records(batch):
                        if (
                            record.key is not None
                            and record.offset >= start
                            and not offset_map.put(record.key, record.offset)
                        ):
                            return offset_map
                offset_map.update_latest_offset(batch.last_offset)
            next_base = (
                segments[i + 1].base_offset
                if i + 1 < len(segments)
                else cleanable.first_uncleanable
            )
            offset_map.update_latest_offset(next_base - 1)
        return offset_map

    # -- rewriting a group of segments ----------------------------------------------------
    def _clean_group(
        self, members: list[LogSegment], sizes: list[int], retention: _Retention
    ) -> Path | None:
        """Stream the group's segments (their first ``sizes`` bytes) through the retention rules
        into ``<first segment>.log.cleaned``; None when the group is one segment that does not change."""
        first = members[0]
        merging = len(members) > 1
        writer = _CleanedWriter(
            first.path.with_name(first.path.name + CLEANED_SUFFIX),
            self.io_buffer_size,
            lazy=not merging,
        )
        try:
            modified_ns = os.stat(members[-1].path).st_mtime_ns
            for path, batch, last in _read_group(members, sizes, self.io_buffer_size):
                if path != writer.source:
                    writer.read_from(path)
                kept = retention.filter(batch)
                if kept == b"" and last and merging:
                    # the .swap of a group must end where the group did (see the module docstring)
                    kept = empty_batch(batch) if batch.records_count else None
                if kept is None:
                    writer.keep(
                        batch.position_in_file,
                        batch.size_in_bytes,
                        batch.buffer[batch.position : batch.position + batch.size_in_bytes],
                    )
                else:
                    writer.replace(batch.position_in_file, batch.size_in_bytes, kept)
            cleaned = writer.finish()
        except BaseException:
            writer.abort()
            raise
        if cleaned is not None:
            # as Kafka: the segment keeps the group's last modification time, which time-based
            # retention falls back on for segments without timestamps
            os.utime(cleaned, ns=(modified_ns, modified_ns))
        return cleaned


def _changed_under(log: Log, cleanable: CleanableRange, truncations: int) -> bool:
    """Whether segments the cleaner was reading left the log (or the log was truncated or closed)."""
    if log.offline or log._truncations != truncations:
        return True
    current = {id(seg) for seg in log.segments}
    return any(id(seg) not in current for seg in cleanable.segments)


class AbortedRanges:
    """The aborted transactions of the range being cleaned, by producer: whether a batch
    belongs to one (a transactional data batch of the producer between the transaction's
    first offset and its ABORT marker)."""

    def __init__(self, aborted: Sequence[AbortedTxn]) -> None:
        self._by_producer: dict[int, list[tuple[int, int]]] = {}
        for txn in aborted:
            self._by_producer.setdefault(txn.producer_id, []).append(
                (txn.first_offset, txn.last_offset)
            )

    def holds(self, batch: rb.RecordBatch) -> bool:
        ranges = self._by_producer.get(batch.producer_id) if batch.is_transactional else None
        if not ranges:
            return False
        base = batch.base_offset
        return any(first <= base < last for first, last in ranges)


class _MarkerTracker:
    """Which transaction markers the cleaner may remove (Kafka's CleanedTransactionMetadata):
    one whose transaction left no batch in the cleaned range, seen in offset order. A
    transaction whose batches are still there, even if this cleaning removes them, keeps its
    marker until a later cleaning finds none."""

    def __init__(self) -> None:
        #: Producers whose current transaction (before its marker) has a batch in the range.
        self._seen: set[int] = set()

    def on_data_batch(self, batch: rb.RecordBatch) -> None:
        if batch.is_transactional:
            self._seen.add(batch.producer_id)

    def on_marker(self, batch: rb.RecordBatch) -> bool:
        """Whether the marker may go (once its delete horizon has passed)."""
        pid = batch.producer_id
        marker = (
            rb.end_txn_marker(memoryview(batch.buffer), batch.position, batch.size_in_bytes)
            if batch.records_count
            else None
        )
        if marker is None:
            return False  # another control type, or a producer's last (empty) batch: kept
        if pid in self._seen:
            self._seen.discard(pid)
            return False
        return True


class _Retention:
    """What stays of each batch (Kafka's RecordFilter inside Cleaner.cleanInto)."""

    def __init__(
        self,
        offset_map: OffsetMap,
        now_ms: int,
        delete_retention_ms: int,
        active_producers: dict[int, int],
        aborted: AbortedRanges,
    ) -> None:
        self.map = offset_map
        self.aborted = aborted
        self.markers = _MarkerTracker()
        self.now_ms = now_ms
        self.delete_retention_ms = delete_retention_ms
        #: producer id -> last offset of its last batch, for the producers the log still tracks.
        self.active_producers = active_producers

    def filter(self, batch: _FileBatch) -> bytes | None:
        """None to keep the batch as it is, else its replacement (b"" to drop it)."""
        horizon = delete_horizon_ms(batch)
        if batch.is_control:
            if not self.markers.on_marker(batch):
                return None
            if horizon is None:  # as a tombstone: removed by a cleaning after its horizon
                return build_batch(
                    batch,
                    read_records(batch),
                    delete_horizon_ms=self.now_ms + self.delete_retention_ms,
                )
            return b"" if self.now_ms >= horizon else None
        self.markers.on_data_batch(batch)
        records = read_records(batch)
        latest = self.map.latest_offset
        retained = [
            r
            for r in records
            if r.offset > latest
            or (
                r.key is not None
                and r.offset >= self.map.get(r.key)
                and (r.has_value or horizon is None or self.now_ms < horizon)
            )
        ]
        if retained and self.aborted.holds(batch):
            retained = []  # an aborted transaction's records go whatever their keys
        if retained:
            needs_horizon = horizon is None and any(not r.has_value for r in retained)
            if len(retained) == len(records) and not needs_horizon:
                return None
            return build_batch(
                batch,
                retained,
                delete_horizon_ms=self.now_ms + self.delete_retention_ms
                if needs_horizon
                else horizon,
            )
        pid = batch.producer_id
        if pid >= 0 and self.active_producers.get(pid) == batch.last_offset:
            return empty_batch(batch) if records else None
        return b""


class _FileBatch(rb.RecordBatch):
    """A batch read from a segment file, remembering where it lies in the file."""

    __slots__ = ("position_in_file",)

    def __init__(
        self,
        buffer: bytes | memoryview,
        position: int,
        fields: tuple[int, ...],
        position_in_file: int,
    ) -> None:
        super().__init__(buffer, position, fields)
        self.position_in_file = position_in_file


def _read_group(
    members: list[LogSegment], sizes: list[int], buffer_size: int
) -> Iterator[tuple[Path, _FileBatch, bool]]:
    """(segment file, batch, whether it is the group's last batch) of every batch of the group's
    segments in offset order (their first ``sizes`` bytes), one batch read ahead."""
    previous: tuple[Path, _FileBatch] | None = None
    for seg, size in zip(members, sizes):
        for batch in _read_batches(seg.path, size, buffer_size):
            if previous is not None:
                yield (*previous, False)
            previous = (seg.path, batch)
    if previous is not None:
        yield (*previous, True)


def next_offset_in_file(path: Path, base_offset: int) -> int:
    """The offset after the last whole batch of a segment file, ``base_offset`` when it holds
    none, read from the batch headers alone (Kafka's LogSegment.readNextOffset)."""
    next_offset = base_offset
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        position = 0
        while position + rb.HEADER_SIZE <= size:
            head = os.pread(fd, rb.HEADER_SIZE, position)
            if len(head) < rb.HEADER_SIZE:
                break
            fields = rb.HEADER.unpack(head)
            base, length, delta = fields[0], fields[1], fields[6]
            position += rb.LOG_OVERHEAD + length
            if length <= 0 or position > size:
                break
            next_offset = base + delta + 1
    finally:
        os.close(fd)
    return next_offset


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
                raise rb.InvalidBatch(
                    "corrupt", f"{path}: {size - position} bytes left at {position}, no batch"
                )
            view = memoryview(chunk)
            offset = 0
            while offset < len(chunk):
                try:
                    fields = rb.check_header(view, offset, len(chunk), strict_count=False)
                except rb.InvalidBatch:
                    if offset:
                        break  # the batch runs past this chunk: read again from it
                    length = int.from_bytes(
                        chunk[rb.BATCH_LENGTH : rb.BATCH_LENGTH + 4], "big", signed=True
                    )
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
    """Writes a group's cleaned segment from the batches of its segments, in order (``read_from``
    names the segment file they come from): each kept batch written from the bytes already read,
    each changed one replaced. A ``lazy`` writer (a group of one segment) writes nothing until
    the first changed batch, then copies the unchanged bytes before it from the file and
    streams the rest."""

    def __init__(self, target: Path, buffer_size: int, *, lazy: bool) -> None:
        self.target, self.buffer_size = target, buffer_size
        self.fd: int | None = None if lazy else self._create()
        self.source: Path | None = None
        self.src_fd: int | None = None
        self.copied = 0  # bytes of the source up to here are accounted for (copied or replaced)
        self.pending = bytearray()

    def _create(self) -> int:
        return os.open(self.target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def read_from(self, source: Path) -> None:
        """The next batches are those of ``source``, from its start."""
        self._close_source()
        self.source, self.copied = source, 0

    def keep(self, position: int, size: int, data: bytes | bytearray | memoryview) -> None:
        """A batch that stays as it is, ``data`` its bytes as already read: written from them,
        not read from the file again (a lazy writer that has written nothing yet skips it, and
        copies it from the file should a changed batch follow)."""
        if self.fd is not None:
            self._write(data)
            self.copied = position + size

    def replace(self, position: int, size: int, data: bytes) -> None:
        if self.fd is None:
            self.fd = self._create()
        self._copy_until(position)
        self._write(data)
        self.copied = position + size

    def _copy_until(self, end: int) -> None:
        if self.copied >= end:
            return
        src_fd = self.src_fd
        if src_fd is None:
            assert self.source is not None, "read_from names a source before its batches"
            src_fd = self.src_fd = os.open(self.source, os.O_RDONLY)
        while self.copied < end:
            chunk = os.pread(src_fd, min(self.buffer_size, end - self.copied), self.copied)
            if not chunk:
                raise OSError(f"{self.source} ended at {self.copied} while cleaning")
            self._write(chunk)
            self.copied += len(chunk)

    def _write(self, data: bytes | bytearray | memoryview) -> None:
        self.pending += data
        if len(self.pending) >= self.buffer_size:
            self._drain()

    def _drain(self) -> None:
        fd, written, pending = self.fd, 0, self.pending
        assert fd is not None, "only a writer that has created its file has pending bytes"
        while written < len(pending):
            written += os.write(fd, memoryview(pending)[written:])
        pending.clear()

    def finish(self) -> Path | None:
        """The cleaned file, written and synced; None when a lazy writer wrote nothing."""
        self._close_source()
        if self.fd is None:
            return None
        self._drain()
        os.fsync(self.fd)
        os.close(self.fd)
        self.fd = None
        return self.target

    def abort(self) -> None:
        self._close_source()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            self.target.unlink(missing_ok=True)

    def _close_source(self) -> None:
        if self.src_fd is not None:
            os.close(self.src_fd)
            self.src_fd = None
