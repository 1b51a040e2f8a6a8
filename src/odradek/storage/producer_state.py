"""Idempotent producer state of one partition: per producer id, its epoch and last 5 batches.

Checks each incoming batch's (producerId, producerEpoch, baseSequence): a stale
epoch is INVALID_PRODUCER_EPOCH, a gap OUT_OF_ORDER_SEQUENCE_NUMBER, and a repeat
of one of the last five batches a duplicate answered with its original offsets.
The state is saved in Kafka's ``<offset>.snapshot`` format and rebuilt from the
log on recovery.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from odradek.durable import fsync_dir
from odradek.storage.checkpoint import read_small_file
from odradek.storage.errors import InvalidProducerEpoch, OutOfOrderSequence

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")  # pid, epoch, last seq, last offset, offset delta, timestamp, coord epoch, txn first offset
_NO_COORDINATOR_EPOCH = -1
_NO_TXN_FIRST_OFFSET = -1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


class ProducerStateManager:
    def __init__(self, directory: Path, expiration_ms: int = 86400000) -> None:
        self.directory = directory
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
              pending: dict[int, ProducerStateEntry] | None = None) -> BatchMetadata | None:
        """Validate one batch; return the original batch when it is a duplicate.

        ``pending`` holds entries updated by earlier batches of the same request.
        """
        entry = (pending or {}).get(producer_id) or self.producers.get(producer_id)
        if entry is None or first_seq < 0:
            return None
        if epoch < entry.epoch:
            raise InvalidProducerEpoch(f"producer {producer_id}: epoch {epoch} is older than {entry.epoch}")
        if epoch > entry.epoch:
            if first_seq != 0:
                raise OutOfOrderSequence(f"producer {producer_id}: new epoch {epoch} must start at sequence 0, got {first_seq}")
            return None
        duplicate = entry.find_duplicate(first_seq, last_seq)
        if duplicate is not None:
            return duplicate
        expected = (entry.last_seq + 1) % 2**31 if entry.batches else first_seq
        if first_seq != expected:
            raise OutOfOrderSequence(f"producer {producer_id}: sequence {first_seq}, expected {expected}")
        return None

    def update(self, producer_id: int, epoch: int, batch: BatchMetadata,
               into: dict[int, ProducerStateEntry] | None = None) -> None:
        """Add a batch to its producer's entry, in place (a replay) or, ``into`` a request's
        pending entries, in a copy of the committed one made at the producer's first batch."""
        target = self.producers if into is None else into
        entry = target.get(producer_id)
        if entry is None and into is not None:
            committed = self.producers.get(producer_id)
            if committed is not None and committed.epoch == epoch:
                entry = ProducerStateEntry(producer_id, epoch, deque(committed.batches, maxlen=NUM_BATCHES_TO_RETAIN),
                                           committed.last_timestamp)
                target[producer_id] = entry
        if entry is None or entry.epoch != epoch:  # a new producer, or a new epoch: sequences start over
            entry = target[producer_id] = ProducerStateEntry(producer_id, epoch)
        if batch.first_seq >= 0:
            entry.batches.append(batch)
        if batch.timestamp > entry.last_timestamp:
            entry.last_timestamp = batch.timestamp

    def commit(self, pending: dict[int, ProducerStateEntry]) -> None:
        self.producers.update(pending)

    def truncate_and_reload(self, log_end_offset: int) -> int | None:
        """Forget everything, delete the snapshots past ``log_end_offset`` and load the newest valid
        one at or below it; its offset (callers replay the log from there), or None."""
        self.producers.clear()
        kept = []
        for path in self.snapshot_files():
            if offset_of(path) > log_end_offset:
                path.unlink(missing_ok=True)
            else:
                kept.append(path)
        return self._load_newest(kept)

    def remove_expired(self, now_ms: int) -> None:
        expired = [pid for pid, e in self.producers.items() if now_ms - e.last_timestamp >= self.expiration_ms]
        for pid in expired:
            del self.producers[pid]

    # -- snapshots -------------------------------------------------------------
    def snapshot_files(self) -> list[Path]:
        """The ``<offset>.snapshot`` files, oldest first (a listing, cheaper than a glob per partition load)."""
        names = [name for name in os.listdir(self.directory) if name.endswith(SNAPSHOT_SUFFIX) and name[0] != "."]
        return [self.directory / name for name in sorted(names, key=_offset_of_name)]

    def take_snapshot(self, offset: int, *, sync: bool = True) -> Path:
        """Write ``<offset>.snapshot`` in Kafka's ProducerSnapshot format, version 1: every
        producer with its last batch (last offset -1 when it has none).

        With ``sync`` False (a roll on the event loop) the caller fsyncs it later."""
        entries = []
        for e in self.producers.values():
            if e.batches:
                b = e.batches[-1]
                last_seq, last_offset, delta = b.last_seq, b.last_offset, b.last_offset - b.first_offset
            else:
                last_seq, last_offset, delta = -1, -1, 0
            entries.append(_ENTRY.pack(e.producer_id, e.epoch, last_seq, last_offset, delta, e.last_timestamp,
                                       _NO_COORDINATOR_EPOCH, _NO_TXN_FIRST_OFFSET))
        tail = struct.pack(">i", len(entries)) + b"".join(entries)
        data = struct.pack(">hI", _SNAPSHOT_VERSION, crc32c(tail)) + tail
        path = self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
        if sync:
            fsync_dir(self.directory)
        for old in self.snapshot_files()[:-2]:  # keep the two latest
            old.unlink(missing_ok=True)
        return path

    def _load_newest(self, paths: list[Path]) -> int | None:
        """Load the newest valid snapshot of ``paths`` (oldest first); its offset, or None."""
        for path in reversed(paths):
            offset = offset_of(path)
            data = read_small_file(path)
            if len(data) < _HEADER.size:
                continue
            version, crc, count = _HEADER.unpack_from(data)
            if version != _SNAPSHOT_VERSION or crc32c(data[6:]) != crc or len(data) != _HEADER.size + count * _ENTRY.size:
                continue
            self.producers.clear()
            for i in range(count):
                pid, epoch, last_seq, last_offset, delta, ts, _, _ = _ENTRY.unpack_from(data, _HEADER.size + i * _ENTRY.size)
                entry = ProducerStateEntry(pid, epoch, last_timestamp=ts)
                if last_offset >= 0:
                    first_seq = (last_seq - delta) % 2**31
                    entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset - delta, last_offset, ts))
                self.producers[pid] = entry
            return offset
        return None


def offset_of(path: Path) -> int:
    return _offset_of_name(path.name)


def _offset_of_name(name: str) -> int:
    return int(name.split(".")[0])
