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
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from fastcrc.crc32 import iscsi as crc32c  # CRC-32C (Castagnoli), as v2 batches use

from odradek.durable import fsync_dir
from odradek.storage.checkpoint import read_small_file
from odradek.storage.errors import InvalidProducerEpoch, OutOfOrderSequence

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(
    ">qhiqiqiq"
)  # pid, epoch, last seq, last offset, offset delta, timestamp, coord epoch, txn first offset
_NO_COORDINATOR_EPOCH = -1
_NO_TXN_FIRST_OFFSET = -1
_SEQUENCE_LIMIT = 2**31  # sequences wrap from 2**31 - 1 to 0


class BatchMetadata(NamedTuple):
    """One of a producer's last batches, as readers see it (entries keep plain tuples in this order)."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class ProducerStateEntry:
    """A producer's epoch, last timestamp and last five batches, updated in place.

    The batches are plain ``(first_seq, last_seq, first_offset, last_offset, timestamp)``
    tuples in ``recent``: every idempotent batch adds one on the produce path, where a
    tuple is the cheapest record there is; ``batches`` gives them named, for readers.
    """

    __slots__ = ("epoch", "last_timestamp", "producer_id", "recent")

    def __init__(
        self,
        producer_id: int,
        epoch: int,
        recent: Iterable[tuple[int, int, int, int, int]] = (),
        last_timestamp: int = -1,
    ) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.recent: deque[tuple[int, int, int, int, int]] = deque(
            recent, maxlen=NUM_BATCHES_TO_RETAIN
        )
        self.last_timestamp = last_timestamp

    @property
    def batches(self) -> list[BatchMetadata]:
        # The cleaner reads entries from its thread while the event loop appends to them in place:
        # the batches are walked in a copy, which the deque makes in one step under the GIL.
        return [BatchMetadata._make(b) for b in self.recent.copy()]

    @property
    def last_seq(self) -> int:
        return self.recent[-1][1] if self.recent else -1

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.epoch, self.recent, self.last_timestamp)


class ProducerStateManager:
    """The partition's producers. On the produce path a request of one batch (what clients send
    per partition) is checked against the committed entry and, once written, updated in place;
    a request of several checks each batch against copies that the earlier ones updated, and
    the copies replace the entries only when the whole request is written (all or nothing)."""

    def __init__(self, directory: Path, expiration_ms: int = 86400000) -> None:
        self.directory = directory
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}

    def check(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        pending: dict[int, ProducerStateEntry] | None = None,
    ) -> BatchMetadata | None:
        """Validate one batch; return the original batch when it is a duplicate.

        ``pending`` holds entries updated by earlier batches of the same request.
        """
        entry = pending.get(producer_id) if pending else None
        if entry is None:
            entry = self.producers.get(producer_id)
            if entry is None:
                return None
        if first_seq < 0:
            return None
        if epoch != entry.epoch:
            if epoch < entry.epoch:
                raise InvalidProducerEpoch(
                    f"producer {producer_id}: epoch {epoch} is older than {entry.epoch}"
                )
            if first_seq != 0:
                raise OutOfOrderSequence(
                    f"producer {producer_id}: new epoch {epoch} must start at sequence 0, "
                    f"got {first_seq}"
                )
            return None
        recent = entry.recent
        if recent:
            for batch in recent:
                if batch[0] == first_seq and batch[1] == last_seq:
                    return BatchMetadata._make(batch)
            expected = (recent[-1][1] + 1) % _SEQUENCE_LIMIT
            if first_seq != expected:
                raise OutOfOrderSequence(
                    f"producer {producer_id}: sequence {first_seq}, expected {expected}"
                )
        return None

    def update(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        timestamp: int,
        into: dict[int, ProducerStateEntry] | None = None,
    ) -> None:
        """Add a batch to its producer's entry: in place (a written request, a replay) or, ``into``
        a request's pending entries, in a copy of the committed one made at the producer's first batch."""
        if into is None:
            entry = self.producers.get(producer_id)
            if (
                entry is None or entry.epoch != epoch
            ):  # a new producer, or a new epoch: sequences start over
                entry = self.producers[producer_id] = ProducerStateEntry(producer_id, epoch)
        else:
            entry = into.get(producer_id)
            if entry is None:
                committed = self.producers.get(producer_id)
                if committed is not None and committed.epoch == epoch:
                    entry = into[producer_id] = committed.copy()
            if entry is None or entry.epoch != epoch:
                entry = into[producer_id] = ProducerStateEntry(producer_id, epoch)
        if first_seq >= 0:
            entry.recent.append((first_seq, last_seq, first_offset, last_offset, timestamp))
        if timestamp > entry.last_timestamp:
            entry.last_timestamp = timestamp

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
        expired = [
            pid
            for pid, e in self.producers.items()
            if now_ms - e.last_timestamp >= self.expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]

    # -- snapshots -------------------------------------------------------------
    def snapshot_files(self) -> list[Path]:
        """The ``<offset>.snapshot`` files, oldest first (a listing, cheaper than a glob per partition load)."""
        names = [
            name
            for name in os.listdir(self.directory)
            if name.endswith(SNAPSHOT_SUFFIX) and name[0] != "."
        ]
        return [self.directory / name for name in sorted(names, key=_offset_of_name)]

    def take_snapshot(self, offset: int, *, sync: bool = True) -> Path:
        """Write ``<offset>.snapshot`` in Kafka's ProducerSnapshot format, version 1: every
        producer with its last batch (last offset -1 when it has none).

        With ``sync`` False (a roll on the event loop) the caller fsyncs it later."""
        entries = []
        for e in self.producers.values():
            if e.recent:
                _, last_seq, first_offset, last_offset, _ = e.recent[-1]
                delta = last_offset - first_offset
            else:
                last_seq, last_offset, delta = -1, -1, 0
            entries.append(
                _ENTRY.pack(
                    e.producer_id,
                    e.epoch,
                    last_seq,
                    last_offset,
                    delta,
                    e.last_timestamp,
                    _NO_COORDINATOR_EPOCH,
                    _NO_TXN_FIRST_OFFSET,
                )
            )
        tail = struct.pack(">i", len(entries)) + b"".join(entries)
        data = struct.pack(">hI", _SNAPSHOT_VERSION, crc32c(tail)) + tail
        path = self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"
        tmp = path.with_name(path.name + ".tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                if sync:
                    os.fsync(f.fileno())
        except OSError:
            tmp.unlink(missing_ok=True)  # a full disk: the older snapshots stay as they were
            raise
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
            if (
                version != _SNAPSHOT_VERSION
                or crc32c(data[6:]) != crc
                or len(data) != _HEADER.size + count * _ENTRY.size
            ):
                continue
            self.producers.clear()
            for i in range(count):
                pid, epoch, last_seq, last_offset, delta, ts, _, _ = _ENTRY.unpack_from(
                    data, _HEADER.size + i * _ENTRY.size
                )
                recent = (
                    [
                        (
                            (last_seq - delta) % _SEQUENCE_LIMIT,
                            last_seq,
                            last_offset - delta,
                            last_offset,
                            ts,
                        )
                    ]
                    if last_offset >= 0
                    else []
                )
                self.producers[pid] = ProducerStateEntry(pid, epoch, recent, ts)
            return offset
        return None


def offset_of(path: Path) -> int:
    return _offset_of_name(path.name)


def _offset_of_name(name: str) -> int:
    return int(name.split(".")[0])
