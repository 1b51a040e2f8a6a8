"""TransactionIndex: a segment's ``.txnindex``, the aborted transactions whose marker it holds.

Kafka's format byte for byte: a file of 34-byte AbortedTxn entries (version int16 = 0,
producerId int64, firstOffset int64, lastOffset int64, lastStableOffset int64), appended
in marker order, created on the first entry (most segments never have one). A
read_committed fetch returns the aborted transactions overlapping what it read, and the
consumer drops their records; ``lastStableOffset`` lets the scan stop early: once an
entry's last stable offset reaches the fetch's upper bound, no later entry (in this
segment or the next) can start below it.

The entries also live in memory: they are few (one per aborted transaction that wrote
to the partition), a fetch scans them without a read, and the file is only appended
to, truncated and read at load. A torn last entry (a crash mid-append) is cut at load;
recovery of the log then appends again what its replay finds missing (see
``Log._rebuild_producer_state``).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
_VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, path: Path, *, exists: bool | None = None) -> None:
        """``exists`` False skips looking for the file (a new segment, or a load whose
        directory listing has no such name)."""
        self.path = path
        self.entries: list[AbortedTxn] = []
        if exists is None:
            exists = path.exists()
        if exists:
            self._load()

    def _load(self) -> None:
        with open(self.path, "rb") as f:
            data = f.read()
        whole = len(data) - len(data) % ENTRY_SIZE
        entries = []
        for position in range(0, whole, ENTRY_SIZE):
            version, pid, first, last, lso = _ENTRY.unpack_from(data, position)
            if version != _VERSION or last < first:
                whole = position  # garbage from here on: cut it, recovery re-appends
                break
            entries.append(AbortedTxn(pid, first, last, lso))
        self.entries = entries
        if whole != len(data):
            os.truncate(self.path, whole)

    @property
    def exists(self) -> bool:
        return bool(self.entries) or self.path.exists()

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry (markers come in offset order); the file is fsynced by flush()."""
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise ValueError(
                f"aborted transaction ending at {txn.last_offset} does not follow "
                f"{self.entries[-1].last_offset} in {self.path}"
            )
        with open(self.path, "ab") as f:
            f.write(_ENTRY.pack(_VERSION, *txn))
        self.entries.append(txn)

    def last_offset(self) -> int:
        """The marker offset of the last entry, or -1."""
        return self.entries[-1].last_offset if self.entries else -1

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset``."""
        keep = len(self.entries)
        while keep and self.entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep == len(self.entries):
            return
        del self.entries[keep:]
        os.truncate(self.path, keep * ENTRY_SIZE)

    def collect(self, fetch_offset: int, upper_bound: int, out: list[AbortedTxn]) -> bool:
        """Add to ``out`` the transactions overlapping [fetch_offset, upper_bound); True when
        no later index can hold one (Kafka's TransactionIndex.collectAbortedTxns)."""
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return True
        return False

    @staticmethod
    def write_file(path: Path, entries: list[AbortedTxn]) -> None:
        """Write ``entries`` as a whole index file at ``path``, synced (a cleaned group's)."""
        with open(path, "wb") as f:
            f.write(b"".join(_ENTRY.pack(_VERSION, *txn) for txn in entries))
            f.flush()
            os.fsync(f.fileno())

    def fsync(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
