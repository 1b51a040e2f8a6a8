"""Log: one partition's segmented log (Kafka's UnifiedLog/LocalLog in one object).

A sans-I/O-ish core: every method takes the clock as an argument and does its
file work synchronously; the LogManager decides which thread runs it. The hot
path appends a records blob with one write after checking each batch's header
and CRC, patching offsets and leader epoch in place.

Disk errors. As Kafka, a failed write (EIO, or ENOSPC anywhere but the one case
below) takes the whole log dir offline until the broker restarts: every partition in
it answers KAFKA_STORAGE_ERROR, which clients treat as retriable (they refresh
metadata and try again), and the other dirs keep serving. After a failed fsync or a
half-done roll or checkpoint nothing in the page cache can be trusted to reach the
disk, so only a restart, which recovers the dir, brings it back.

One case does better than Kafka: an append that finds the disk full. The segment
writes nothing unless everything fits (its index entries get disk blocks first, and a
short write is cut off again), and a roll whose producer snapshot does not fit keeps the
old segment active (see _roll), so the log is exactly as before, and only that request
answers KAFKA_STORAGE_ERROR; the partition and the dir stay online, reads go on, and
the producer's retries succeed as soon as space is freed (retention, deleted topics or
an operator). Nothing acknowledged is lost either way: an append is acknowledged only
after its write returned whole.
"""

from __future__ import annotations

import bisect
import errno
import functools
import itertools
import logging
import os
import random
import struct
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Concatenate, NamedTuple, ParamSpec, TypeVar

from odradek.durable import fsync_dir
from odradek.metrics.stats import LOG_FLUSH
from odradek.protocol import records as rb
from odradek.storage import errors
from odradek.storage.cleaner import CLEANED_SUFFIX, CleanPlan, next_offset_in_file
from odradek.storage.cleaner_checkpoint import load_cleaner_offset, save_cleaner_offset
from odradek.storage.compression import decompress
from odradek.storage.config import LONG_MAX, LogConfig
from odradek.storage.leader_epoch import LeaderEpochFileCache
from odradek.storage.producer_state import (
    BatchMetadata,
    CompletedTxn,
    ProducerStateEntry,
    ProducerStateManager,
    VerificationGuard,
)
from odradek.storage.recompress import recompress_batches
from odradek.storage.segment import FileRegion, LogSegment, NothingAppended, ProducerBatch
from odradek.storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn, TransactionIndex

if TYPE_CHECKING:
    from typing_extensions import Buffer

    #: What _check_batches hands append: (writev pieces, batch positions, next offset, max
    #: timestamp, record count, lone producer batch, per-producer pending entries, leader epoch
    #: starts, LogAppendTime, transactions the request's markers complete).
    _CheckedBatches = tuple[
        list[bytes | Buffer],
        list[tuple[int, int, int, int, int]],
        int,
        int,
        int,
        tuple[int, int, int, int, int, int, int] | None,
        dict[int, ProducerStateEntry] | None,
        list[tuple[int, int]] | None,
        int | None,
        list[CompletedTxn] | None,
    ]

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1
DELETED_SUFFIX = ".deleted"
#: A segment's files by suffix (the .txnindex exists only once a transaction aborted in it).
_SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", TXN_INDEX_SUFFIX)
SWAP_SUFFIX = ".swap"
_check_header = rb.check_header
#: baseOffset, batchLength, partitionLeaderEpoch: the batch's first bytes, which append rewrites.
_pack_prefix = struct.Struct(">qii").pack
_PREFIX = rb.MAGIC
_HEADER_SIZE = rb.HEADER_SIZE
_LOG_OVERHEAD = rb.LOG_OVERHEAD
_CONTROL_MASK = rb.CONTROL_MASK
_TRANSACTIONAL_MASK = rb.TRANSACTIONAL_MASK
#: The attributes' low byte of a batch at the start of a buffer (transactional, control bits).
_ATTRIBUTES_LOW = rb.ATTRIBUTES + 1
_COMPRESSION_MASK = rb.COMPRESSION_MASK
_TIMESTAMP_TYPE_MASK = rb.TIMESTAMP_TYPE_MASK
_delta_range = rb.timestamp_delta_range
_scan_for_append = rb.scan_for_append
_INVALID_BATCH_ERRORS: dict[str, type[errors.KafkaError]] = {
    "corrupt": errors.CorruptRecord,
    "magic": errors.UnsupportedForMessageFormat,
    "invalid": errors.InvalidRecord,
}


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    @property
    def dir_name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def from_dir_name(cls, name: str) -> TopicPartition:
        topic, _, partition = name.rpartition("-")
        if not topic or not partition.isdigit():
            raise ValueError(f"{name!r} is not a <topic>-<partition> directory")
        return cls(topic, int(partition))


class LogAppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time_ms: int
    record_count: int
    duplicate: bool = False


#: LogAppendInfo from a 6-tuple without NamedTuple's __new__ (a Python function: a tenth of a 16 KB append).
_new_append_info = functools.partial(tuple.__new__, LogAppendInfo)


class FetchDataInfo(NamedTuple):
    regions: list[FileRegion]
    size: int
    #: For a read_committed read, the aborted transactions overlapping what was read.
    aborted_transactions: list[AbortedTxn] | None = None


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _storage_io(method: Callable[Concatenate[Log, _P], _R]) -> Callable[Concatenate[Log, _P], _R]:
    """Turn an OSError into KafkaStorageError and take the log offline (its dir goes offline too)."""

    @functools.wraps(method)
    def wrapper(self: Log, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if self.offline:
            raise errors.KafkaStorageError(f"log {self.dir} is offline")
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            raise self._io_failed(exc) from exc

    return wrapper


class Log:
    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        clean_shutdown: bool = False,
        now_ms: int | None = None,
        producer_id_expiration_ms: int = 86400000,
        on_io_error: Callable[[Path], None] | None = None,
    ) -> None:
        self.dir = Path(directory)
        self.topic_partition = TopicPartition.from_dir_name(self.dir.name)
        self.config = config
        self.offline = False
        #: Whether the last append found the disk full (logged once, see _out_of_space).
        self._disk_full = False
        #: Set by LogManager.delete_log; the object then answers KAFKA_STORAGE_ERROR.
        self.deleted = False
        self.on_io_error = on_io_error
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        #: (when, .deleted paths, the still open .log file) of retired segments.
        self._pending_deletes: list[tuple[int, list[Path], BinaryIO]] = []
        self._unflushed_messages = 0
        self._unsynced_snapshots: list[Path] = []
        #: Counts truncations, so a flush in another thread does not move the recovery point past one;
        #: the lock makes "no truncation since the flush began, so advance" one step.
        self._truncations = 0
        self._recovery_point_lock = threading.Lock()
        self.last_flush_ms = now_ms if now_ms is not None else _now_ms()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.leader_epoch_cache = LeaderEpochFileCache(
            self.dir / "leader-epoch-checkpoint", lambda: self.log_end_offset
        )
        self.producer_state = ProducerStateManager(self.dir, producer_id_expiration_ms)
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        if self.leader_epoch_cache.corrupt:  # every batch's epoch is read again by recovery
            clean_shutdown, self.recovery_point = False, 0
        self._load(clean_shutdown, self.last_flush_ms)

    def _out_of_space(self, exc: OSError) -> errors.KafkaStorageError:
        """An append refused for a full disk, the log left as it was: the error for that
        request alone (see the module docstring); logged once until an append succeeds."""
        if not self._disk_full:
            self._disk_full = True
            log.error(
                "%s: %s; appends answer KAFKA_STORAGE_ERROR until there is space",
                self.topic_partition,
                exc,
            )
        return errors.KafkaStorageError(f"no space left for {self.topic_partition}: {exc}")

    def _io_failed(self, exc: OSError) -> errors.KafkaStorageError:
        """Take the log (and its dir) offline after an I/O error; the error to raise."""
        if self.deleted:  # files closed under a thread's feet by delete_log: not a disk failure
            return errors.KafkaStorageError(f"log {self.dir} was deleted")
        self.offline = True
        log.error("I/O error on %s: %s", self.dir, exc)
        if self.on_io_error is not None:
            self.on_io_error(self.dir.parent)
        return errors.KafkaStorageError(f"I/O error on {self.dir}: {exc}")

    # -- loading -----------------------------------------------------------------
    def _load(self, clean_shutdown: bool, now_ms: int) -> None:
        # One listing of the directory serves the whole load (globbing it per file kind cost
        # more than the rest of loading a clean partition).
        names = self._complete_leftovers(os.listdir(self.dir))
        #: Below it the cleaner has been (offsets may have gaps); from the log dir's cleaner-offset-checkpoint.
        self.cleaner_offset = load_cleaner_offset(self.dir)
        bases = sorted(
            int(name[:20]) for name in names if name.endswith(".log") and name[:20].isdigit()
        )
        txn_indexes = {name for name in names if name.endswith(TXN_INDEX_SUFFIX)}
        cfg = self.config
        for i, base in enumerate(bases):
            seg = LogSegment(
                self.dir,
                base,
                cfg.segment_index_bytes,
                cfg.index_interval_bytes,
                now_ms,
                txn_index_exists=f"{base:020d}{TXN_INDEX_SUFFIX}" in txn_indexes,
            )
            end_bound = bases[i + 1] if i + 1 < len(bases) else 2**63
            indexes_missing = not (
                os.stat(seg.offset_index.path).st_size and os.stat(seg.time_index.path).st_size
            )
            recover = (not clean_shutdown and end_bound > self.recovery_point) or (
                indexes_missing and seg.size > 0
            )
            if clean_shutdown and recover:
                log.warning(
                    "%s: indexes missing; rebuilding them from %d bytes", seg.path, seg.size
                )
            # As Kafka's recovery: offsets only increase; gaps are allowed anywhere, since a follower
            # copies compacted batches from its leader above its own cleaner offset.
            cut = seg.load(recover=recover, contiguous=False)
            if not recover and seg.recovered_producer_batches is not None:
                # The clean load found damage (load logged it): the rest of this partition is
                # recovered as after a crash, since what follows damage is in doubt too.
                clean_shutdown = False
                self.recovery_point = min(self.recovery_point, base)
            self._add_segment(seg)
            if cut and bases[i + 1 : i + 2] == [seg.next_offset]:
                # Only bytes after its last batch were cut: the next segment starts right after
                # it, so nothing is missing between them and the later segments stay.
                continue
            if cut:
                for later in bases[i + 1 :]:
                    path = self.dir / f"{later:020d}.log"
                    log.warning(
                        "recovery of %s: deleting %s (%d bytes), which follows the corruption",
                        self.dir,
                        path.name,
                        path.stat().st_size,
                    )
                    for suffix in _SEGMENT_SUFFIXES:
                        (self.dir / f"{later:020d}{suffix}").unlink(missing_ok=True)
                break
        if not self.segments:
            self._add_segment(self._new_segment(self.log_start_offset, now_ms))
        for seg in self.segments[:-1]:
            seg.on_become_inactive()
        self.active.on_become_active()
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        if self.log_start_offset > self.log_end_offset:
            self.log_start_offset = self.log_end_offset
        self.recovery_point = self.log_end_offset
        epochs = self.leader_epoch_cache
        epochs.truncate_from_end(self.log_end_offset)
        for seg in self.segments:  # batches recovery re-read carry epochs the checkpoint may lack
            for epoch, start in seg.recovered_epochs:
                epochs.assign(epoch, start)
        if any(seg.recovered_producer_batches is not None for seg in self.segments):
            epochs.flush()  # the recovery point moves to the LEO: what recovery found must be on disk
        # Without recovery the file matched the log at the clean shutdown, and truncation can only
        # have dropped entries at or past the LEO (an epoch with no batch yet, such as (0, 0) of an
        # empty partition), which the next load drops again; so, as Kafka's
        # truncateFromEndAsyncFlush, the next Log.flush writes it. Writing it here cost a synced
        # file write per empty partition at every start.
        self._rebuild_producer_state()
        #: Whether a segment ever had an aborted transaction: read_committed reads of a log
        #: without any (most logs) skip collecting them.
        self.has_aborted_txns = any(seg.txn_index.entries for seg in self.segments)
        for seg in self.segments:
            seg.recovered_producer_batches = (
                None  # used up: later rebuilds (truncation) read headers
            )

    def _complete_leftovers(self, names: list[str]) -> list[str]:
        """Finish what a crash interrupted: .cleaned, .deleted and .tmp files go, and so do indexes
        without their .log. ``names`` lists the directory; returns it as it is after.

        A .swap file is a cleaned group of segments that was being installed (Kafka's
        LogLoader): it holds the offsets from its base offset to its last batch's, and every
        segment whose base offset lies in that range is one of the group it replaces, so
        those still there are deleted before the .swap takes its name."""
        present = set(names)
        if not any(
            name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, ".tmp", SWAP_SUFFIX))
            or (
                name.endswith((".index", ".timeindex", TXN_INDEX_SUFFIX))
                and f"{name.rpartition('.')[0]}.log" not in present
            )
            for name in names
        ):
            return names
        for path in self.dir.iterdir():
            name = path.name
            if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, ".tmp")):
                path.unlink(missing_ok=True)
        for path in sorted(self.dir.glob(f"*{SWAP_SUFFIX}")):
            target = path.with_name(path.name[: -len(SWAP_SUFFIX)])
            if (
                target.suffix == TXN_INDEX_SUFFIX
                and f"{target.stem}.log{SWAP_SUFFIX}" not in present
            ):
                path.unlink()  # its group's cleaning was never installed (see _swap_in)
                continue
            if target.suffix == ".log" and target.stem.isdigit():
                base = int(target.stem)
                end = next_offset_in_file(path, base)
                for name in os.listdir(self.dir):
                    if (
                        name.endswith(".log")
                        and name[:20].isdigit()
                        and base < int(name[:20]) < end
                    ):
                        log.info(
                            "%s: deleting segment %s, replaced by %s", self.dir, name, path.name
                        )
                        for suffix in _SEGMENT_SUFFIXES:
                            (self.dir / f"{name[:20]}{suffix}").unlink(missing_ok=True)
                for index in (target.with_suffix(".index"), target.with_suffix(".timeindex")):
                    index.unlink(missing_ok=True)  # they describe the old file; rebuilt on load
            os.replace(path, target)  # a .txnindex.swap replaces the first segment's .txnindex
        for path in self.dir.glob("*.index"):
            if not path.with_suffix(".log").exists():
                path.unlink()
        for path in self.dir.glob("*.timeindex"):
            if not path.with_suffix(".log").exists():
                path.unlink()
        for path in self.dir.glob(f"*{TXN_INDEX_SUFFIX}"):
            if not path.with_suffix(".log").exists():
                path.unlink()
        return os.listdir(self.dir)

    def _rebuild_producer_state(self) -> None:
        """Load the newest snapshot at or below the LEO, then replay the producer batches after
        it: those recovery just re-read come from its notes, the others from their headers.

        Markers replayed complete their transactions as an append does, and an aborted one
        missing from its segment's .txnindex (recovery cut it with a torn tail, or a crash
        came between the marker's write and the index's) is appended there again: the
        index of a segment is whole from the snapshot on, as Kafka's recovery rebuilds it."""
        ps = self.producer_state
        start = ps.truncate_and_reload(self.log_end_offset)
        start = self.log_start_offset if start is None else max(start, self.log_start_offset)
        if start >= self.log_end_offset:
            return  # a snapshot at the LEO (as a clean shutdown writes): no batch to replay
        update = ps.update
        for seg in self._segments_from(start):
            batches: Iterable[ProducerBatch] | None = seg.recovered_producer_batches
            if batches is None:
                batches = seg.producer_batches(seg.offset_index.lookup(start)[1])
            for base, last, max_ts, pid, p_epoch, first_seq, attrs, marker in batches:
                if last < start:
                    continue
                if marker is not None:
                    completed = ps.end_txn(
                        pid,
                        p_epoch,
                        marker.coordinator_epoch,
                        not marker.commit,
                        base,
                        max_ts,
                        check=False,
                    )
                    for aborted in ps.commit(None, [completed] if completed else None):
                        if aborted.last_offset > seg.txn_index.last_offset():
                            seg.txn_index.append(aborted)
                            self.has_aborted_txns = True
                elif not attrs & _CONTROL_MASK:
                    last_seq = (
                        (first_seq + last - base) % 2**31 if first_seq >= 0 else rb.NO_SEQUENCE
                    )
                    update(
                        pid,
                        p_epoch,
                        first_seq,
                        last_seq,
                        base,
                        last,
                        max_ts,
                        transactional=bool(attrs & _TRANSACTIONAL_MASK),
                    )

    # -- properties ----------------------------------------------------------------
    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.active.next_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        # What append asks of the config on every call, computed once (LogConfig's own are properties).
        self._config = config
        self._recompress = config.compression_type != "producer"
        self._log_append_time = config.log_append_time
        self._compact = config.compact
        # What the C scan decides (see append); without the extension everything is checked in Python.
        self._client_scan = (
            _scan_for_append
            if not (self._recompress or self._log_append_time or self._compact)
            else None
        )
        # With neither limit set no timestamp can fall outside the window: records are not read.
        self._timestamp_window = (
            config.message_timestamp_before_max_ms != LONG_MAX
            or config.message_timestamp_after_max_ms != LONG_MAX
        )

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for seg in self.segments:
            seg.index_interval = config.index_interval_bytes

    def _new_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        cfg = self.config
        seg = LogSegment(
            self.dir, base_offset, cfg.segment_index_bytes, cfg.index_interval_bytes, now_ms
        )
        seg.roll_jitter_ms = (
            random.randrange(cfg.segment_jitter_ms) if cfg.segment_jitter_ms > 0 else 0
        )
        return seg

    def _add_segment(self, seg: LogSegment) -> None:
        self.segments.append(seg)
        self._bases.append(seg.base_offset)

    def _segments_from(self, offset: int) -> list[LogSegment]:
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        return self.segments[i:]

    # -- append ----------------------------------------------------------------------
    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        leader_epoch: int,
        now_ms: int,
        assign_offsets: bool = True,
        from_client: bool = True,
        verification_guard: VerificationGuard | None = None,
        transaction_version: int = 0,
    ) -> LogAppendInfo:
        """Validate, stamp and write a blob of v2 batches, all or nothing.

        ``assign_offsets`` False is a follower's copy (Kafka's AppendOrigin.REPLICATION);
        ``from_client`` False a coordinator's own write such as a transaction marker
        (AppendOrigin.COORDINATOR), which skips the checks Kafka applies to clients only.
        ``verification_guard`` is a client append's guard when transaction verification
        applies (see producer_state.py), None when it does not. ``transaction_version`` is
        a coordinator's marker's (WriteTxnMarkers v2; see ``ProducerStateManager.end_txn``).

        The payload is never copied: each batch goes out as its first 16 bytes with
        baseOffset and partitionLeaderEpoch set (or, for LogAppendTime, a re-stamped
        61-byte header) plus a view of the rest, all in one writev. This is the produce
        hot path (a 16 KB batch costs little more than its write): a client's batches on
        a topic without compaction, recompression or LogAppendTime are checked in C
        (``protocol/_fastpath.c``), which decides every regular request and hands anything
        else to ``_check_batches``, the same checks in Python, which names the error.
        Records are read only where Kafka's LogValidator needs them: keys of compacted
        topics, and each CreateTime record's timestamp while a
        message.timestamp.{before,after}.max.ms window is set (Kafka 4 bounds
        after.max.ms by default), which reads two fields per record.
        """
        if self.offline:
            raise errors.KafkaStorageError(f"log {self.dir} is offline")
        if assign_offsets and self._recompress:
            records = recompress_batches(records, self._config)  # LogValidator: the topic's codec
        seg = self.segments[-1]
        first_offset = seg.next_offset
        scanned = None
        if self._client_scan is not None and assign_offsets and from_client:
            cfg = self._config
            scanned = self._client_scan(
                records,
                first_offset,
                leader_epoch,
                cfg.max_message_bytes,
                now_ms,
                cfg.message_timestamp_before_max_ms,
                cfg.message_timestamp_after_max_ms,
            )
        if scanned is not None:
            pieces, batches, next_offset, max_ts, record_count, producer_batch = scanned
            pending = epoch_starts = append_time = completed = None
            if producer_batch is not None:
                duplicate = self.producer_state.check(
                    *producer_batch[:4],
                    None,
                    bool(records[_ATTRIBUTES_LOW] & _TRANSACTIONAL_MASK),
                    verification_guard,
                )
                if duplicate is not None:
                    return self._duplicate_info([duplicate], False, record_count, None)
        else:
            buf = records if type(records) is memoryview else memoryview(records)
            checked = self._check_batches(
                buf,
                first_offset,
                leader_epoch,
                now_ms,
                assign_offsets,
                from_client,
                verification_guard,
                transaction_version,
            )
            if isinstance(checked, LogAppendInfo):
                return checked
            (
                pieces,
                batches,
                next_offset,
                max_ts,
                record_count,
                producer_batch,
                pending,
                epoch_starts,
                append_time,
                completed,
            ) = checked
        last_offset = next_offset - 1
        size = len(records)
        cfg = self._config
        try:
            # Roll as Kafka's LogSegment.shouldRoll: segment.bytes, segment.ms (+ jitter) or a full index
            # once the segment holds data, and always when an offset would not fit relative to its base
            # (a follower's batches may start far beyond the log end offset). The new segment starts
            # at the first batch, as Kafka's maybeRoll.
            if seg.size:
                rolling_ts = seg.first_batch_timestamp
                roll = (
                    seg.size > cfg.segment_bytes - size
                    or seg.index_full
                    or now_ms
                    - (seg.created_ms if rolling_ts is None or rolling_ts == -1 else rolling_ts)
                    > cfg.segment_ms - seg.roll_jitter_ms
                    or last_offset - seg.base_offset > INT_MAX
                )
            else:
                roll = last_offset - seg.base_offset > INT_MAX
            try:
                if roll:
                    seg = self._roll(batches[0][2], now_ms)
                seg.append(pieces, size, batches)
            except NothingAppended as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                raise self._out_of_space(exc) from exc
            if self._disk_full:
                self._disk_full = False
                log.warning("%s: appends go on, the disk has space again", self.topic_partition)
            if producer_batch is not None:
                self.producer_state.update(
                    *producer_batch,
                    transactional=bool(records[_ATTRIBUTES_LOW] & _TRANSACTIONAL_MASK),
                )
            elif pending:
                for aborted in self.producer_state.commit(pending, completed):
                    seg.txn_index.append(aborted)
                    self.has_aborted_txns = True
            epochs = self.leader_epoch_cache
            if epoch_starts is not None:
                for epoch, start in epoch_starts:  # a follower keeps the leader's epochs
                    epochs.assign(epoch, start)
            elif assign_offsets and leader_epoch > epochs.latest_epoch:
                epochs.assign(
                    leader_epoch, first_offset
                )  # in memory: flush() writes the checkpoint
        except OSError as exc:
            raise self._io_failed(exc) from exc
        self._unflushed_messages += record_count
        if self._unflushed_messages >= cfg.flush_messages:
            self.flush()
        return _new_append_info(
            (
                first_offset,
                last_offset,
                max_ts,
                -1 if append_time is None else append_time,
                record_count,
                False,
            )
        )

    def _check_batches(
        self,
        buf: memoryview,
        first_offset: int,
        leader_epoch: int,
        now_ms: int,
        assign_offsets: bool,
        from_client: bool,
        verification_guard: VerificationGuard | None,
        transaction_version: int,
    ) -> _CheckedBatches | LogAppendInfo:
        """Every check of ``append`` in Python, for what the C scan hands back: a follower's
        or coordinator's write, compaction, LogAppendTime, compressed records to read, a
        maxTimestamp to correct, several idempotent batches, and every error. The pieces
        and bookkeeping of the append, or the original offsets of a retried request."""
        end = len(buf)
        if end == 0:
            raise errors.InvalidRecord("empty records")
        cfg = self._config
        append_time = now_ms if self._log_append_time else None
        compact = assign_offsets and self._compact
        next_offset = first_offset
        batches: list[tuple[int, int, int, int, int]] = []
        pieces: list[bytes | Buffer] = []
        key_errors: list[tuple[int, str | None]] = []
        ts_errors: list[tuple[int, str | None]] = []
        # Made on first need: most batches have no producer id, and most appends are a leader's.
        producer_batch: tuple[int, int, int, int, int, int, int] | None = (
            None  # a one-batch request's
        )
        pending: dict[int, ProducerStateEntry] | None = None  # a request of several batches
        duplicates: list[BatchMetadata] | None = None
        completed: list[CompletedTxn] | None = None
        epoch_starts: list[tuple[int, int]] | None = None
        max_ts, record_count, position = rb.NO_TIMESTAMP, 0, 0
        check_timestamps = append_time is None and self._timestamp_window
        if check_timestamps:
            low = now_ms - cfg.message_timestamp_before_max_ms
            high = now_ms + cfg.message_timestamp_after_max_ms
        while position < end:
            try:
                # A follower's batches may come compacted: fewer records than lastOffsetDelta + 1.
                fields = _check_header(buf, position, end, strict_count=assign_offsets)
            except rb.InvalidBatch as exc:
                raise _INVALID_BATCH_ERRORS[exc.reason](str(exc)) from None
            (
                base,
                length,
                batch_epoch,
                _,
                _,
                attrs,
                delta,
                base_ts,
                batch_ts,
                pid,
                p_epoch,
                first_seq,
                count,
            ) = fields
            size = _LOG_OVERHEAD + length
            restamp = None  # a corrected maxTimestamp for this batch's header
            if size > cfg.max_message_bytes:
                raise errors.RecordTooLarge(
                    f"batch of {size} bytes exceeds max.message.bytes {cfg.max_message_bytes}"
                )
            if assign_offsets:
                if from_client:  # Kafka's LogValidator.validateBatch for AppendOrigin.CLIENT
                    if attrs & _CONTROL_MASK:
                        raise errors.InvalidRecord(
                            "Clients are not allowed to write control records"
                        )
                    if pid >= 0 and first_seq < 0:
                        raise errors.InvalidRecord(
                            f"Invalid sequence number {first_seq} in record batch "
                            f"with producerId {pid}"
                        )
                if not attrs & _CONTROL_MASK:  # a coordinator's marker has no data to check
                    if compact:
                        key_errors += _null_key_indices(
                            rb.RecordBatch(buf, position, fields), record_count
                        )
                    if (
                        attrs & _TIMESTAMP_TYPE_MASK
                    ):  # the producer set LogAppendTime: its records carry batch_ts
                        # Kafka's LogValidator.validateTimestamp: an error on a LogAppendTime topic, or
                        # without a timestamp; else batch_ts is each record's CreateTime, checked against
                        # the window, and the batch is stored as CreateTime (setMaxTimestamp(CREATE_TIME)).
                        if append_time is not None or batch_ts == rb.NO_TIMESTAMP:
                            ts_errors += [
                                (
                                    record_count + i,
                                    f"Invalid timestamp type in message {record_count + i}. "
                                    "Producer should not set timestamp type to LogAppendTime.",
                                )
                                for i in range(count)
                            ]
                        elif check_timestamps and not low <= batch_ts <= high:
                            ts_errors += _out_of_range_timestamps(
                                rb.RecordBatch(buf, position, fields), record_count, low, high
                            )
                        else:
                            restamp = batch_ts
                    elif check_timestamps:
                        # Every record's timestamp, as Kafka's LogValidator checks them: the header's
                        # maxTimestamp is the producer's word, and a record's baseTimestamp + delta
                        # may lie above it (or, with a negative delta, below baseTimestamp).
                        payload = buf[position + _HEADER_SIZE : position + size]
                        try:
                            lo, hi = _delta_range(
                                decompress(attrs & _COMPRESSION_MASK, payload)
                                if attrs & _COMPRESSION_MASK
                                else payload,
                                count,
                            )
                        except rb.InvalidBatch as exc:
                            raise _INVALID_BATCH_ERRORS[exc.reason](str(exc)) from None
                        first_ts, last_ts = base_ts + lo, base_ts + hi
                        if first_ts < low or last_ts > high:
                            ts_errors += _out_of_range_timestamps(
                                rb.RecordBatch(buf, position, fields), record_count, low, high
                            )
                        elif last_ts != batch_ts:
                            restamp = last_ts  # Kafka sets maxTimestamp to the records' largest
                if pid >= 0:
                    duplicate = self.producer_state.check(
                        pid,
                        p_epoch,
                        first_seq,
                        _last_sequence(first_seq, delta),
                        pending,
                        bool(attrs & _TRANSACTIONAL_MASK),
                        verification_guard,
                    )
                    if duplicate is not None:
                        if duplicates is None:
                            duplicates = []
                        duplicates.append(duplicate)
                        record_count += count
                        position += size
                        continue
                if (
                    append_time is None and restamp is None
                ):  # baseOffset and leader epoch are outside the CRC
                    pieces += (
                        _pack_prefix(next_offset, length, leader_epoch),
                        buf[position + _PREFIX : position + size],
                    )
                else:
                    pieces += (
                        rb.stamped_header(
                            buf,
                            position,
                            size,
                            base_offset=next_offset,
                            leader_epoch=leader_epoch,
                            log_append_time=append_time,
                            max_timestamp=restamp,
                        ),
                        buf[position + _HEADER_SIZE : position + size],
                    )
                    if restamp is not None:
                        batch_ts = restamp
                    elif append_time is not None:
                        batch_ts = append_time
                base = next_offset
            else:
                if base < next_offset:
                    raise errors.InvalidRecord(
                        f"batch offset {base} is below the log end offset {next_offset}"
                    )
                pieces.append(buf[position : position + size])
                if epoch_starts is None:
                    epoch_starts = []
                epoch_starts.append((batch_epoch, base))
            last = base + delta
            batches.append((position, size, base, last, batch_ts))
            if pid >= 0 and attrs & _CONTROL_MASK:
                # A transaction marker: checked now (a leader's append), applied once written.
                try:
                    marker = rb.end_txn_marker(buf, position, size)
                except rb.InvalidBatch as exc:
                    raise _INVALID_BATCH_ERRORS[exc.reason](str(exc)) from None
                if marker is not None:
                    if pending is None:
                        pending = {}
                    done = self.producer_state.end_txn(
                        pid,
                        p_epoch,
                        marker.coordinator_epoch,
                        not marker.commit,
                        base,
                        batch_ts,
                        pending,
                        check=assign_offsets,
                        transaction_version=transaction_version,
                    )
                    if done is not None:
                        completed = [done] if completed is None else [*completed, done]
            elif pid >= 0:
                if (
                    size == end
                ):  # the request's only batch (clients send one per partition): applied once written
                    producer_batch = (
                        pid,
                        p_epoch,
                        first_seq,
                        _last_sequence(first_seq, delta),
                        base,
                        last,
                        batch_ts,
                    )
                else:  # each batch checked against the entries the earlier ones updated; committed together
                    if pending is None:
                        pending = {}
                    self.producer_state.update(
                        pid,
                        p_epoch,
                        first_seq,
                        _last_sequence(first_seq, delta),
                        base,
                        last,
                        batch_ts,
                        pending,
                        bool(attrs & _TRANSACTIONAL_MASK),
                    )
            if batch_ts > max_ts:
                max_ts = batch_ts
            record_count += count
            next_offset = last + 1
            position += size
        if key_errors:
            raise errors.RecordValidationError(
                f"Compacted topic cannot accept message without key in topic partition "
                f"{self.topic_partition.topic}-{self.topic_partition.partition}.",
                errors.ErrorCode.invalid_record,
                key_errors,
            )
        if ts_errors:
            raise errors.RecordValidationError(
                ts_errors[0][1] or "", errors.ErrorCode.invalid_timestamp, ts_errors
            )
        if duplicates:
            return self._duplicate_info(duplicates, bool(batches), record_count, append_time)
        return (
            pieces,
            batches,
            next_offset,
            max_ts,
            record_count,
            producer_batch,
            pending,
            epoch_starts,
            append_time,
            completed,
        )

    @staticmethod
    def _duplicate_info(
        duplicates: list[BatchMetadata],
        new_batches: bool,
        record_count: int,
        append_time: int | None,
    ) -> LogAppendInfo:
        """The answer to a retried request: the offsets its batches got the first time.

        A retry repeats a whole request, and a request was appended all or nothing, so
        either every batch is a duplicate or none is; a mix is a client out of sequence.
        """
        if new_batches or any(
            b.first_offset != a.last_offset + 1 for a, b in itertools.pairwise(duplicates)
        ):
            raise errors.OutOfOrderSequence("a request mixing duplicate and new batches")
        return LogAppendInfo(
            duplicates[0].first_offset,
            duplicates[-1].last_offset,
            max(d.timestamp for d in duplicates),
            -1 if append_time is None else append_time,
            record_count,
            True,
        )

    def roll(self, now_ms: int) -> LogSegment:
        """Start a new active segment at the log end offset (no-op when the active one is empty)."""
        if self.active.size == 0:
            return self.active
        return self._roll(self.log_end_offset, now_ms)

    def _roll(self, base_offset: int, now_ms: int) -> LogSegment:
        """Start a new active segment at ``base_offset``.

        When the producer snapshot, a roll's one write of data, finds the disk full, the
        old segment simply stays active (giving back its spare index and reserved blocks,
        as first done here, is harmless to a segment that goes on: they are taken again
        when needed), and NothingAppended (ENOSPC) is raised, which an append answers as a
        full disk and retention retries at its next run, instead of taking the log dir
        offline. The fsync of the old segment, the snapshot and the directory is left to
        flush(), which the LogManager runs in a thread soon after a roll: no fsync on the
        event loop."""
        self.active.on_become_inactive()  # frees blocks first, which the snapshot may need
        try:
            snapshot = self.producer_state.take_snapshot(base_offset, sync=False)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            raise NothingAppended(exc.errno, f"roll of {self.dir}: {exc.strerror}") from exc
        self._unsynced_snapshots.append(snapshot)
        seg = self._new_segment(base_offset, now_ms)
        seg.on_become_active()
        self._add_segment(seg)
        return seg

    # -- read ------------------------------------------------------------------------
    @_storage_io
    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_message: bool = True,
        aborted_transactions: bool = False,
    ) -> FetchDataInfo:
        """File regions of whole batches from ``start_offset`` (KIP-74: the first batch always whole).

        ``aborted_transactions`` (a read_committed fetch, which passes the last stable offset
        as ``max_offset``) also collects the aborted transactions overlapping the offsets
        read, from the .txnindex of the segments from ``start_offset`` on, as Kafka's
        LocalLog.read with FetchIsolation.TXN_COMMITTED: the upper bound is the offset of
        the first batch not sent (one header read), so a lagging consumer is not sent every
        aborted transaction up to the last stable offset. Record bytes are never read."""
        leo = self.log_end_offset
        if start_offset < self.log_start_offset or start_offset > leo:
            raise errors.OffsetOutOfRange(
                f"offset {start_offset} is outside [{self.log_start_offset}, {leo}] of {self.topic_partition}"
            )
        upper = leo if max_offset is None else min(max_offset, leo)
        regions: list[FileRegion] = []
        total = 0
        if start_offset >= upper:
            return FetchDataInfo(regions, 0, [] if aborted_transactions else None)
        read_to = upper  # the offset after the last batch read
        collect = aborted_transactions and self.has_aborted_txns
        for seg in self._segments_from(start_offset):
            if seg.base_offset >= upper:
                break
            first = seg.locate(start_offset)
            if first is None:
                continue
            position, base_offset = first
            if base_offset >= upper:
                break
            budget = max_bytes - total
            end = seg.read_end(position, position + budget, upper)
            if end == position:
                if regions or not min_one_message:
                    read_to = min(upper, base_offset)
                    break
                # locate found a batch at position, so its header is there (no check on reads)
                end = position + seg.header_at(position, seg.size).size  # type: ignore[union-attr]
            regions.append(FileRegion(seg.file, position, end - position))
            total += end - position
            if end < seg.size or total >= max_bytes:
                if collect:
                    following = seg.header_at(end, seg.size)
                    if following is not None:
                        read_to = min(upper, following.base_offset)
                    else:
                        i = bisect.bisect_right(self._bases, seg.base_offset)
                        read_to = min(upper, self._bases[i] if i < len(self._bases) else leo)
                break
        if not collect:
            return FetchDataInfo(regions, total, [] if aborted_transactions else None)
        return FetchDataInfo(
            regions, total, self.collect_aborted_transactions(start_offset, read_to)
        )

    def collect_aborted_transactions(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, upper_bound), from the segment
        holding ``start_offset`` on, until an entry's last stable offset shows no later one
        can (Kafka's UnifiedLog.collectAbortedTransactions)."""
        found: list[AbortedTxn] = []
        if start_offset >= upper_bound:
            return found
        for seg in self._segments_from(start_offset):
            if seg.txn_index.collect(start_offset, upper_bound, found):
                break
        return found

    def last_stable_offset(self, high_watermark: int) -> int:
        """The first offset of the earliest transaction still unstable (open, or its marker
        not yet below ``high_watermark``), or ``high_watermark``; never below the log start
        offset (DeleteRecords or retention may pass an open transaction's first batch, as
        Kafka's maybeIncrementFirstUnstableOffset keeps it)."""
        first = self.producer_state.first_unstable_offset(high_watermark)
        if first is None or first >= high_watermark:
            return high_watermark
        return max(first, min(self.log_start_offset, high_watermark))

    @_storage_io
    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        if timestamp == -2:
            return self.log_start_offset, -1
        if timestamp == -1:
            return self.log_end_offset, -1
        if timestamp == -3:
            best = max(self.segments, key=lambda s: s.max_timestamp)
            if best.max_timestamp < 0 and best.size == 0:
                return None
            return best.find_offset_by_timestamp(best.max_timestamp)  # the first record carrying it
        for seg in self._segments_from(self.log_start_offset):
            if seg.max_timestamp >= timestamp:
                found = seg.find_offset_by_timestamp(timestamp)
                if found is not None:
                    return max(found[0], self.log_start_offset), found[1]
        return None

    # -- truncation and log start ----------------------------------------------------
    @_storage_io
    def truncate_to(self, offset: int) -> None:
        """Drop everything at or after ``offset`` (a follower diverging from its leader).

        As Kafka's UnifiedLog.truncateTo, the log end offset becomes ``offset`` itself, not
        the end of the last batch kept: a leader's epoch boundary can fall in a gap that
        compaction left (or inside a batch the cut removes whole), and the follower's next
        fetch must ask from the offset the leader named. Segments whose base lies above
        ``offset`` go; one starting at it stays, emptied. The epoch cache is cut back to the
        log end offset even when nothing is dropped (an epoch entry this broker wrote as a
        leader before it appended anything).
        """
        if offset >= self.log_end_offset:
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return
        if self.segments[0].base_offset > offset:
            self.truncate_fully_and_start_at(offset)
            return
        while len(self.segments) > 1 and self.active.base_offset > offset:
            self._delete_segment_now(self.segments.pop())
            self._bases.pop()
        self.active.truncate_to(offset)
        self.active.on_become_active()
        self.log_start_offset = min(self.log_start_offset, offset)
        self._truncated(self.log_end_offset)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self._rebuild_producer_state()

    def _truncated(self, log_end_offset: int, *, emptied: bool = False) -> None:
        """After a truncation: pull the recovery point back (to the new start of an
        ``emptied`` log) and tell flushes in flight."""
        with self._recovery_point_lock:
            self.recovery_point = (
                log_end_offset if emptied else min(self.recovery_point, log_end_offset)
            )
            self._truncations += 1

    @_storage_io
    def truncate_fully_and_start_at(self, offset: int) -> None:
        now = _now_ms()
        for seg in self.segments:
            self._delete_segment_now(seg)
        self.segments, self._bases = [], []
        seg = self._new_segment(offset, now)
        seg.on_become_active()
        self._add_segment(seg)
        self.log_start_offset = offset
        self._truncated(offset, emptied=True)
        self.leader_epoch_cache.clear_and_start_at(offset)
        self.producer_state.truncate_and_reload(-1)

    @_storage_io
    def maybe_increment_log_start_offset(self, offset: int, now_ms: int | None = None) -> bool:
        """Advance the log start offset (DeleteRecords); whole segments below it are deleted."""
        if offset > self.log_end_offset:
            raise errors.OffsetOutOfRange(
                f"offset {offset} is above the log end offset {self.log_end_offset}"
            )
        if offset <= self.log_start_offset:
            return False
        self.log_start_offset = offset
        self._delete_segments(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= offset,
            _now_ms() if now_ms is None else now_ms,
        )
        return True

    # -- retention ---------------------------------------------------------------------
    @_storage_io
    def delete_old_segments(self, now_ms: int, high_watermark: int | None = None) -> int:
        """Apply retention.ms, then retention.bytes, as Kafka's UnifiedLog.deleteOldSegments;
        returns the number of segments deleted.

        The active segment counts too: a topic that stops receiving data is emptied once
        its last record is older than retention.ms (see _delete_segments). Nothing at or
        above ``high_watermark`` goes (None: the log end offset, as on a single node where
        an append moves the high watermark at once).
        """
        cfg = self.config
        if not cfg.delete:
            return 0
        hw = self.log_end_offset if high_watermark is None else high_watermark
        deleted = 0
        if cfg.retention_ms >= 0:
            deleted += self._delete_segments(
                lambda seg, nxt: now_ms - _segment_timestamp(seg) > cfg.retention_ms, now_ms, hw
            )
        excess = self.size_in_bytes - cfg.retention_bytes
        if cfg.retention_bytes >= 0 and excess > 0:

            def over_size(seg: LogSegment, nxt: LogSegment | None) -> bool:
                nonlocal excess
                if excess < seg.size:
                    return False
                excess -= seg.size
                return True

            deleted += self._delete_segments(over_size, now_ms, hw)
        return deleted

    def _delete_segments(
        self,
        predicate: Callable[[LogSegment, LogSegment | None], bool],
        now_ms: int,
        high_watermark: int | None = None,
    ) -> int:
        """Delete the oldest segments while ``predicate(segment, next segment or None)`` holds,
        as Kafka's deletableSegments and deleteSegments: a segment only when every offset
        in it lies below ``high_watermark`` (default: the log end offset), so the log
        start offset never passes it; the active segment too when it holds data. When
        every segment goes the log first rolls, so it keeps an empty active segment at the
        log end offset, which becomes the log start offset."""
        hw = self.log_end_offset if high_watermark is None else high_watermark
        segments = self.segments
        count = 0
        for i, seg in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            end = self.log_end_offset if nxt is None else nxt.base_offset
            if hw < end or not predicate(seg, nxt) or (nxt is None and seg.size == 0):
                break
            count += 1
        if not count:
            return 0
        if count == len(segments):
            try:
                self.roll(now_ms)
            except NothingAppended as exc:  # a full disk: the rest goes, the active segment later
                log.warning(
                    "%s: %s; the active segment is deleted later", self.topic_partition, exc
                )
                count -= 1
                if not count:
                    return 0
        for _ in range(count):
            seg = self.segments.pop(0)
            self._bases.pop(0)
            self._retire_segment(seg, now_ms)
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self.recovery_point = max(self.recovery_point, self.log_start_offset)
        log.info(
            "%s: deleted %d segments; log start offset %d",
            self.topic_partition,
            count,
            self.log_start_offset,
        )
        return count

    def _retire_segment(self, seg: LogSegment, now_ms: int) -> None:
        """Close ``seg`` and rename its files .deleted, to be removed after file.delete.delay.ms
        (Kafka's asyncDeleteSegment); a crash before then leaves .deleted files, which load removes."""
        file = seg.retire()  # still open: fetches in flight may be sending from it
        paths = []
        for path in seg.files():
            target = path.with_name(path.name + DELETED_SUFFIX)
            os.replace(path, target)
            paths.append(target)
        self._pending_deletes.append((now_ms + self.config.file_delete_delay_ms, paths, file))

    def remove_deleted_files(self, now_ms: int) -> None:
        """Close and remove the .deleted files whose file.delete.delay.ms has passed."""
        due = [(paths, file) for at, paths, file in self._pending_deletes if at <= now_ms]
        self._pending_deletes = [entry for entry in self._pending_deletes if entry[0] > now_ms]
        for paths, file in due:
            file.close()
            for path in paths:
                path.unlink(missing_ok=True)

    def _delete_segment_now(self, seg: LogSegment) -> None:
        seg.close()
        for path in seg.files():
            path.unlink(missing_ok=True)

    # -- compaction ---------------------------------------------------------------------
    @_storage_io
    def install_cleaned(self, plan: CleanPlan, now_ms: int) -> None:
        """Swap in the segments a LogCleaner wrote (on the thread that owns the log), each
        replacing its group of segments as Kafka's replaceSegments: the .cleaned file is
        renamed .swap (from then on a crash completes the swap on load), the group's
        segments are retired as retention retires them, then the .swap takes the name of
        the group's first segment and its indexes are built. Then, as Kafka, the new first
        dirty offset goes to the cleaner-offset-checkpoint: after a crash before that, the
        next cleaning cleans again the groups the crash left as they were."""
        swaps = []
        for bases, cleaned in plan.cleaned:
            i = bisect.bisect_left(self._bases, bases[0])
            if i + len(bases) >= len(self._bases) or self._bases[i : i + len(bases)] != list(bases):
                cleaned.unlink(
                    missing_ok=True
                )  # a segment deleted by retention meanwhile: not used
                continue
            swap = cleaned.with_name(cleaned.name[: -len(CLEANED_SUFFIX)] + SWAP_SUFFIX)
            # The group's aborted transactions go with it, as a .txnindex.swap next to the
            # .log.swap (load completes both): read_committed readers still need them.
            aborted = [
                t for seg in self.segments[i : i + len(bases)] for t in seg.txn_index.entries
            ]
            if aborted:
                TransactionIndex.write_file(_txn_index_swap(self.dir, bases[0]), aborted)
            os.replace(cleaned, swap)
            swaps.append((bases, swap))
        if swaps:
            fsync_dir(self.dir)  # every .swap is on disk before a segment it replaces goes
            self._swap_in(swaps, now_ms)
        save_cleaner_offset(self.dir, plan.cleaner_offset)
        self.cleaner_offset = plan.cleaner_offset

    def _swap_in(self, swaps: list[tuple[tuple[int, ...], Path]], now_ms: int) -> None:
        """Replace each group of segments (their base offsets) by its .swap file."""
        cfg = self.config
        for bases, swap in swaps:
            i = bisect.bisect_left(self._bases, bases[0])
            old = self.segments[i : i + len(bases)]
            for seg in old:
                self._retire_segment(seg, now_ms)
            # The .txnindex.swap first: one left without its .log.swap is then one whose
            # cleaning never got installed, which load deletes.
            txn_swap = _txn_index_swap(self.dir, bases[0])
            if txn_swap.exists():
                os.replace(txn_swap, txn_swap.with_name(txn_swap.name[: -len(SWAP_SUFFIX)]))
            os.replace(swap, swap.with_name(swap.name[: -len(SWAP_SUFFIX)]))
            seg = LogSegment(
                self.dir,
                bases[0],
                cfg.segment_index_bytes,
                cfg.index_interval_bytes,
                old[0].created_ms,
            )
            seg.recover(contiguous=False)
            seg.recovered_producer_batches = None
            seg.on_become_inactive()
            # _bases first: a flush thread meanwhile then starts from a segment at or before its
            # recovery point in the old list, so it still reaches the active segment
            self._bases[i : i + len(bases)] = [bases[0]]
            self.segments[i : i + len(bases)] = [seg]
        fsync_dir(self.dir)

    # -- durability --------------------------------------------------------------------
    @_storage_io
    def flush(self, now_ms: int | None = None) -> None:
        """fsync every segment from the recovery point, then advance it to the log end offset.

        Runs in a LogManager thread while the owner appends, rolls, truncates and deletes:
        a segment closed meanwhile flushes as a no-op, and a truncation meanwhile keeps the
        recovery point where the truncation put it.
        """
        started = time.perf_counter()
        truncations = self._truncations
        leo = self.log_end_offset
        for seg in self._segments_from(self.recovery_point):
            seg.flush()
        snapshots, self._unsynced_snapshots = self._unsynced_snapshots, []
        for path in snapshots:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:  # superseded by a newer snapshot
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self.leader_epoch_cache.flush()
        fsync_dir(self.dir)
        with self._recovery_point_lock:
            if truncations == self._truncations:
                self.recovery_point = max(self.recovery_point, leo)
        self._unflushed_messages = 0
        self.last_flush_ms = _now_ms() if now_ms is None else now_ms
        LOG_FLUSH.observe(time.perf_counter() - started)

    def close(self) -> None:
        """Flush, snapshot producer state at the log end offset, trim indexes and close files."""
        if not self.offline:
            self.producer_state.take_snapshot(self.log_end_offset)
            self.flush()
        for seg in self.segments:
            try:
                seg.close()
            except OSError:
                pass
        for _, _, file in self._pending_deletes:  # the .deleted files stay: load removes them
            file.close()


# -- per-record validation (only compacted topics and out-of-window timestamps pay for it) -------


def _null_key_indices(batch: rb.RecordBatch, first_index: int) -> list[tuple[int, str | None]]:
    """(batch index, None) of each record without a key, as Kafka's LogValidator reports them."""
    return [
        (first_index + i, None) for i, (_, key_null) in enumerate(_record_fields(batch)) if key_null
    ]


def _out_of_range_timestamps(
    batch: rb.RecordBatch, first_index: int, low: int, high: int
) -> list[tuple[int, str | None]]:
    """(batch index, message) of each CreateTime timestamp outside [low, high] (NO_TIMESTAMP passes).
    The records of a batch the producer marked LogAppendTime all carry its maxTimestamp."""
    stamped = batch.timestamp_type == rb.LOG_APPEND_TIME
    return [
        (
            first_index + i,
            (
                f"Timestamp {ts} of message with batch index {first_index + i} is out of range. "
                f"The timestamp should be within [{low}, {high}]"
            ),
        )
        for i, ts in enumerate(
            batch.max_timestamp if stamped else ts for ts, _ in _record_fields(batch)
        )
        if ts != rb.NO_TIMESTAMP and not low <= ts <= high
    ]


def _record_fields(batch: rb.RecordBatch) -> list[tuple[int, bool]]:
    """(timestamp, key is null) of each record, decompressing the payload when needed."""
    payload: bytes | memoryview = batch.records_payload()
    codec = batch.compression_type
    if codec:
        payload = decompress(codec, payload)
    base_ts = batch.base_timestamp
    out = []
    position = 0
    try:
        for _ in range(batch.records_count):
            length, position = rb.read_varint(payload, position)
            end = position + length
            position += 1  # attributes
            ts_delta, position = rb.read_varint(payload, position)
            _, position = rb.read_varint(payload, position)  # offset delta
            key_length, position = rb.read_varint(payload, position)
            out.append((base_ts + ts_delta, key_length < 0))
            position = end
    except IndexError:
        raise errors.CorruptRecord("record runs past the end of its batch") from None
    return out


def _last_sequence(first_seq: int, delta: int) -> int:
    """The sequence of a batch's last record, wrapping at 2**31 as Kafka does."""
    return (first_seq + delta) % 2**31 if first_seq >= 0 else rb.NO_SEQUENCE


def _txn_index_swap(directory: Path, base_offset: int) -> Path:
    """Where a cleaned group's .txnindex waits to be installed."""
    return directory / f"{base_offset:020d}{TXN_INDEX_SUFFIX}{SWAP_SUFFIX}"


def _segment_timestamp(seg: LogSegment) -> int:
    """The largest timestamp of a segment, or its file's mtime when it has none (as Kafka)."""
    if seg.max_timestamp >= 0:
        return seg.max_timestamp
    return int(os.stat(seg.path).st_mtime * 1000)


def _now_ms() -> int:
    return int(time.time() * 1000)
