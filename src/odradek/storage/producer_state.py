"""Producer state of one partition: per producer id, its epoch, last 5 batches and open transaction.

Checks each incoming batch's (producerId, producerEpoch, baseSequence): a stale
epoch is INVALID_PRODUCER_EPOCH, a gap OUT_OF_ORDER_SEQUENCE_NUMBER, and a repeat
of one of the last five batches a duplicate answered with its original offsets.
The state is saved in Kafka's ``<offset>.snapshot`` format and rebuilt from the
log on recovery.

Transactions, as Kafka's ProducerStateManager. A producer's first transactional
batch opens its transaction in this partition at that batch's offset; its
transaction marker (a control batch written by the coordinator) closes it. While
open, a non-transactional batch from the producer is INVALID_TXN_STATE. A marker is
checked before it is written: an epoch older than the producer's is
INVALID_PRODUCER_EPOCH, a coordinator epoch older than the last marker's
TRANSACTION_COORDINATOR_FENCED (a coordinator that lost its partition of
``__transaction_state`` must not complete anything). ``ongoing`` maps the first
offset of every open transaction to its producer; appends come in offset order, so
the dict's order is offset order and the earliest open transaction is its first key,
found in constant time for every read_committed fetch. A completed transaction stays
*unstable* until its marker is below the high watermark (``unreplicated``, Kafka's
unreplicatedTxns): a read_committed consumer must not see a committed transaction's
records before the marker that says so is replicated. The last stable offset is
therefore the smallest of: the first offset of an open transaction, the first offset
of a completed one whose marker is not replicated yet, and the high watermark.

An ABORT marker yields an ``AbortedTxn`` for the segment's transaction index, with the
last stable offset as of the marker: the first offset of another producer's
transaction open at the marker, or the marker's offset + 1. Readers use it to stop
scanning the index early (Kafka's TransactionIndex.collectAbortedTxns). Snapshots
(format version 1) keep each producer's coordinator epoch and open transaction's first
offset, so a restart knows which transactions are still open without replaying
the segments before the snapshot.

Verification (KIP-890, Kafka's VerificationStateEntry and VerificationGuard). Before a
partition leader appends the first transactional batch of a producer with no transaction
open here, it asks the transaction coordinator whether the partition is in the
producer's transaction. ``start_verification`` makes (or keeps) the producer's
``VerificationStateEntry`` and hands out its guard, a fresh object; the append then
passes that guard back, and ``check`` refuses a transactional batch opening a
transaction without it (INVALID_TXN_STATE). Any transactional batch or marker of the
producer drops the entry, so a marker written while the coordinator was being asked
(the transaction aborted meanwhile) turns the answer stale: the guard no longer matches
and the batch is refused rather than opening a transaction the coordinator does not
know of. The entry also remembers the lowest sequence seen while verifying, so that a
later batch cannot be written ahead of an earlier one that failed verification.
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
from odradek.storage.errors import (
    InvalidProducerEpoch,
    InvalidTxnState,
    OutOfOrderSequence,
    TransactionCoordinatorFenced,
)
from odradek.storage.txn_index import AbortedTxn

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(
    ">qhiqiqiq"
)  # pid, epoch, last seq, last offset, offset delta, timestamp, coord epoch, txn first offset
NO_COORDINATOR_EPOCH = -1
NO_TXN_FIRST_OFFSET = -1
_SEQUENCE_LIMIT = 2**31  # sequences wrap from 2**31 - 1 to 0


class VerificationGuard:
    """An identity only: the token a verified append hands back (Kafka's VerificationGuard).
    ``NO_GUARD`` is Kafka's SENTINEL: an append that did not need to be verified."""

    __slots__ = ()


NO_GUARD = VerificationGuard()


class VerificationStateEntry:
    """A producer being verified in this partition: its guard, when verification started (an
    entry older than producer.id.expiration.ms is dropped), and the lowest sequence and
    newest epoch seen while verifying (Kafka's maybeUpdateLowestSequenceAndEpoch)."""

    __slots__ = ("epoch", "guard", "lowest_sequence", "timestamp")

    def __init__(self, timestamp: int, sequence: int, epoch: int) -> None:
        self.timestamp = timestamp
        self.guard = VerificationGuard()
        self.lowest_sequence = sequence
        self.epoch = epoch

    def update(self, sequence: int, epoch: int) -> None:
        """A lower sequence of the same epoch, or any sequence of a newer epoch, is the new
        lowest: an epoch bump starts sequences over."""
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        elif epoch > self.epoch:
            self.epoch, self.lowest_sequence = epoch, sequence


class BatchMetadata(NamedTuple):
    """One of a producer's last batches, as readers see it (entries keep plain tuples in this order)."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class CompletedTxn(NamedTuple):
    """A transaction a marker closed in this partition: from its first batch to the marker."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


class ProducerStateEntry:
    """A producer's epoch, last timestamp, last five batches, coordinator epoch and the
    first offset of its open transaction (-1: none), updated in place.

    The batches are plain ``(first_seq, last_seq, first_offset, last_offset, timestamp)``
    tuples in ``recent``: every idempotent batch adds one on the produce path, where a
    tuple is the cheapest record there is; ``batches`` gives them named, for readers.
    """

    __slots__ = (
        "coordinator_epoch",
        "current_txn_first_offset",
        "epoch",
        "last_timestamp",
        "producer_id",
        "recent",
    )

    def __init__(
        self,
        producer_id: int,
        epoch: int,
        recent: Iterable[tuple[int, int, int, int, int]] = (),
        last_timestamp: int = -1,
        coordinator_epoch: int = NO_COORDINATOR_EPOCH,
        current_txn_first_offset: int = NO_TXN_FIRST_OFFSET,
    ) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.recent: deque[tuple[int, int, int, int, int]] = deque(
            recent, maxlen=NUM_BATCHES_TO_RETAIN
        )
        self.last_timestamp = last_timestamp
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = current_txn_first_offset

    @property
    def batches(self) -> list[BatchMetadata]:
        # The cleaner reads entries from its thread while the event loop appends to them in place:
        # the batches are walked in a copy, which the deque makes in one step under the GIL.
        return [BatchMetadata._make(b) for b in self.recent.copy()]

    @property
    def last_seq(self) -> int:
        return self.recent[-1][1] if self.recent else -1

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.epoch,
            self.recent,
            self.last_timestamp,
            self.coordinator_epoch,
            self.current_txn_first_offset,
        )

    def maybe_update_epoch(self, epoch: int) -> None:
        """A new epoch starts sequences and the last timestamp over (Kafka's
        maybeUpdateProducerEpoch); the coordinator epoch and an open transaction stay."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.recent.clear()
            self.last_timestamp = -1


class ProducerStateManager:
    """The partition's producers. On the produce path a request of one batch (what clients send
    per partition) is checked against the committed entry and, once written, updated in place;
    a request of several checks each batch against copies that the earlier ones updated, and
    the copies replace the entries only when the whole request is written (all or nothing).
    Transaction markers always take the second way (``end_txn`` into a pending dict, then
    ``complete``), so a marker refused or not written changes nothing."""

    def __init__(self, directory: Path, expiration_ms: int = 86400000) -> None:
        self.directory = directory
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        #: First offset -> producer id of each open transaction, in offset order.
        self.ongoing: dict[int, int] = {}
        #: Completed transactions whose marker is not yet below the high watermark.
        self.unreplicated: list[CompletedTxn] = []
        #: Producers whose first transactional batch here is being verified (KIP-890).
        self.verifying: dict[int, VerificationStateEntry] = {}

    def check(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        pending: dict[int, ProducerStateEntry] | None = None,
        transactional: bool = False,
        guard: VerificationGuard | None = None,
    ) -> BatchMetadata | None:
        """Validate one batch; return the original batch when it is a duplicate.

        ``pending`` holds entries updated by earlier batches of the same request. ``guard``
        is the verification guard of a leader's append that verification applies to
        (``NO_GUARD`` when none was started), None when it does not apply (disabled, or
        not a client's append).
        """
        entry = pending.get(producer_id) if pending else None
        if entry is None:
            entry = self.producers.get(producer_id)
        if transactional and guard is not None:
            self._check_verified(producer_id, first_seq, entry, guard)
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
        else:
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
        if not transactional and entry.current_txn_first_offset >= 0:
            raise InvalidTxnState(
                f"Expected transactional write from producer {producer_id} at offset "
                f"{entry.current_txn_first_offset}"
            )
        return None

    def _check_verified(
        self,
        producer_id: int,
        first_seq: int,
        entry: ProducerStateEntry | None,
        guard: VerificationGuard,
    ) -> None:
        """Kafka's batchMissingRequiredVerification and the verification part of checkSequence:
        a transactional batch opening a transaction needs the guard of the producer's
        verification, and no batch may pass the lowest sequence seen while verifying."""
        verifying = self.verifying.get(producer_id)
        if verifying is not None and first_seq > verifying.lowest_sequence:
            raise OutOfOrderSequence(
                f"producer {producer_id}: sequence {first_seq} is above the earliest seen while "
                f"verifying, {verifying.lowest_sequence}"
            )
        ongoing = entry is not None and entry.current_txn_first_offset >= 0
        if not ongoing and (verifying is None or verifying.guard is not guard):
            raise InvalidTxnState("Record was not part of an ongoing transaction")

    def start_verification(
        self, producer_id: int, sequence: int, epoch: int, now_ms: int
    ) -> VerificationGuard:
        """Kafka's maybeStartTransactionVerification: ``NO_GUARD`` when the producer's
        transaction is open here already, else the guard of its verification (made now, or
        kept from an earlier attempt, with the lowest sequence updated)."""
        entry = self.producers.get(producer_id)
        if entry is not None and entry.current_txn_first_offset >= 0:
            return NO_GUARD
        verifying = self.verifying.get(producer_id)
        if verifying is None:
            verifying = self.verifying[producer_id] = VerificationStateEntry(
                now_ms, sequence, epoch
            )
        else:
            verifying.update(sequence, epoch)
        return verifying.guard

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
        transactional: bool = False,
    ) -> None:
        """Add a batch to its producer's entry: in place (a written request, a replay) or, ``into``
        a request's pending entries, in a copy of the committed one made at the producer's first
        batch. A transactional batch opens the producer's transaction here if none is open."""
        entry = self._entry(producer_id, epoch, into)
        entry.maybe_update_epoch(epoch)  # a new epoch: sequences start over
        if first_seq >= 0:
            entry.recent.append((first_seq, last_seq, first_offset, last_offset, timestamp))
        if timestamp > entry.last_timestamp:
            entry.last_timestamp = timestamp
        if transactional:
            # Open now (or already): the verification has served its purpose.
            self.verifying.pop(producer_id, None)
            if entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = first_offset
                if into is None:
                    self.ongoing[first_offset] = producer_id

    def _entry(
        self, producer_id: int, epoch: int, into: dict[int, ProducerStateEntry] | None
    ) -> ProducerStateEntry:
        """The entry to change: the committed one, or ``into``'s copy of it (made once)."""
        if into is None:
            entry = self.producers.get(producer_id)
            if entry is None:
                entry = self.producers[producer_id] = ProducerStateEntry(producer_id, epoch)
            return entry
        entry = into.get(producer_id)
        if entry is None:
            committed = self.producers.get(producer_id)
            entry = into[producer_id] = (
                committed.copy()
                if committed is not None
                else ProducerStateEntry(producer_id, epoch)
            )
        return entry

    def end_txn(
        self,
        producer_id: int,
        epoch: int,
        coordinator_epoch: int,
        aborted: bool,
        offset: int,
        timestamp: int,
        into: dict[int, ProducerStateEntry] | None = None,
        *,
        check: bool = True,
        transaction_version: int = 0,
    ) -> CompletedTxn | None:
        """Apply a transaction marker at ``offset`` (Kafka's appendEndTxnMarker): the producer's
        open transaction, if any, is completed (None when it had none: a marker for a
        partition where the transaction wrote nothing, or a repeated one). ``check`` (a
        leader's append, not a follower's copy or a replay) refuses a stale producer epoch
        or coordinator epoch first. Call ``complete`` with the result once it is written.

        ``transaction_version`` 2 (KIP-890) is a marker whose coordinator bumped the epoch to
        end the transaction: the transaction's records carry an older epoch than the marker,
        so an open transaction of the marker's epoch or a newer one is the producer's next
        transaction, which a late copy of the marker (a retry, a resend after failover) must
        not end: refused with INVALID_PRODUCER_EPOCH. A copy arriving while no transaction
        is open completes nothing and is accepted, so that the coordinator's retry succeeds."""
        entry = self._entry(producer_id, epoch, into)
        if check:
            if epoch < entry.epoch or (
                transaction_version >= 2
                and epoch <= entry.epoch
                and entry.current_txn_first_offset >= 0
            ):
                raise InvalidProducerEpoch(
                    f"producer {producer_id}: marker epoch {epoch} is not newer than the "
                    f"transaction open in epoch {entry.epoch}"
                    if epoch == entry.epoch
                    else f"producer {producer_id}: marker epoch {epoch} is older than {entry.epoch}"
                )
            if coordinator_epoch < entry.coordinator_epoch:
                raise TransactionCoordinatorFenced(
                    f"producer {producer_id}: coordinator epoch {coordinator_epoch} is older "
                    f"than {entry.coordinator_epoch}"
                )
        first = entry.current_txn_first_offset
        self.verifying.pop(producer_id, None)  # a verification under way is stale now
        entry.maybe_update_epoch(epoch)
        entry.current_txn_first_offset = NO_TXN_FIRST_OFFSET
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        return None if first < 0 else CompletedTxn(producer_id, first, offset, aborted)

    def commit(
        self,
        pending: dict[int, ProducerStateEntry] | None,
        completed: list[CompletedTxn] | None = None,
    ) -> list[AbortedTxn]:
        """Install a written request's pending entries and completed transactions; the aborted
        ones as transaction index entries.

        The last stable offset of an aborted transaction is the first offset of another
        producer's transaction open at its marker: one open before the request and not
        completed by it, one the request opened and completed around the marker, or one
        the request opened before the marker and left open."""
        ongoing = self.ongoing
        opened = [
            (e.current_txn_first_offset, pid)
            for pid, e in (pending or {}).items()
            if e.current_txn_first_offset >= 0 and e.current_txn_first_offset not in ongoing
        ]
        aborted: list[AbortedTxn] = []
        if completed:
            done = {c.first_offset for c in completed}
            for c in completed:
                if not c.aborted:
                    continue
                marker = c.last_offset
                lso = marker + 1
                for first, pid in ongoing.items():
                    if first >= marker:
                        break
                    if pid != c.producer_id and first not in done:
                        lso = first
                        break
                for other in completed:
                    if other.producer_id != c.producer_id and other.first_offset < marker < (
                        other.last_offset
                    ):
                        lso = min(lso, other.first_offset)
                for first, pid in opened:
                    if pid != c.producer_id and first < marker:
                        lso = min(lso, first)
                aborted.append(AbortedTxn(c.producer_id, c.first_offset, marker, lso))
            for first in done:
                ongoing.pop(first, None)
            self.unreplicated += completed
        if pending:
            self.producers.update(pending)
            for first, pid in sorted(opened):
                ongoing[first] = pid
        return aborted

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset a read_committed reader must not pass (Kafka's firstUnstableOffset),
        or None when every transaction is complete and its marker replicated. Completed
        transactions whose marker is below ``high_watermark`` are forgotten here."""
        unreplicated = self.unreplicated
        first = next(iter(self.ongoing), None)
        if unreplicated:
            unreplicated = self.unreplicated = [
                c for c in unreplicated if c.last_offset >= high_watermark
            ]
            for c in unreplicated:
                if first is None or c.first_offset < first:
                    first = c.first_offset
        return first

    def first_unstable_offset_any_thread(self, high_watermark: int) -> int | None:
        """``first_unstable_offset`` without forgetting anything, for the cleaner's thread (each
        container is copied in one step under the GIL while the event loop changes it)."""
        firsts = [
            c.first_offset for c in self.unreplicated.copy() if c.last_offset >= high_watermark
        ]
        ongoing = self.ongoing.copy()
        if ongoing:
            firsts.append(next(iter(ongoing)))
        return min(firsts, default=None)

    def truncate_and_reload(self, log_end_offset: int) -> int | None:
        """Forget everything, delete the snapshots past ``log_end_offset`` and load the newest valid
        one at or below it; its offset (callers replay the log from there), or None."""
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated = []
        self.verifying.clear()
        kept = []
        for path in self.snapshot_files():
            if offset_of(path) > log_end_offset:
                path.unlink(missing_ok=True)
            else:
                kept.append(path)
        return self._load_newest(kept)

    def remove_expired(self, now_ms: int) -> None:
        """Forget producers idle for producer.id.expiration.ms, but never one with an open
        transaction (Kafka's isProducerExpired), and verifications started as long ago."""
        expired = [
            pid
            for pid, e in self.producers.items()
            if now_ms - e.last_timestamp >= self.expiration_ms and e.current_txn_first_offset < 0
        ]
        for pid in expired:
            del self.producers[pid]
        stale = [
            pid for pid, v in self.verifying.items() if now_ms - v.timestamp >= self.expiration_ms
        ]
        for pid in stale:
            del self.verifying[pid]

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
                    e.coordinator_epoch,
                    e.current_txn_first_offset,
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
            opened = []
            for i in range(count):
                pid, epoch, last_seq, last_offset, delta, ts, coord, txn_first = _ENTRY.unpack_from(
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
                self.producers[pid] = ProducerStateEntry(pid, epoch, recent, ts, coord, txn_first)
                if txn_first >= 0:
                    opened.append((txn_first, pid))
            self.ongoing = dict(sorted(opened))
            return offset
        return None


def offset_of(path: Path) -> int:
    return _offset_of_name(path.name)


def _offset_of_name(name: str) -> int:
    return int(name.split(".")[0])
