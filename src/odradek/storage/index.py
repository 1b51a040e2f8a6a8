"""Sparse OffsetIndex (.index) and TimeIndex (.timeindex) files, as Kafka lays them out.

.index entries are 8 bytes: 4-byte offset relative to the segment's base
offset, 4-byte position in the .log file. .timeindex entries are 12 bytes:
8-byte timestamp, 4-byte relative offset. Files are preallocated to
segment.index.bytes while the segment is active and trimmed to their entries
on roll and close. Entries are mirrored in two Python lists so lookups are a
bisect, and appends are one pwrite.
"""

from __future__ import annotations

import bisect
import os
import struct
from pathlib import Path


class CorruptIndex(Exception):
    """An index file that cannot be trusted; the segment rebuilds it."""


class _SparseIndex:
    entry = struct.Struct(">ii")

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry.size)
        self.keys: list[int] = []
        self.values: list[int] = []
        #: While True (a rebuild), entries stay in memory until write_deferred().
        self.deferred = False
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)

    # -- file ----------------------------------------------------------------
    def load(self) -> None:
        """Read the entries of an existing file; raise CorruptIndex when they are inconsistent."""
        data = os.pread(self.fd, os.fstat(self.fd).st_size, 0)
        size = self.entry.size
        keys, values = [], []
        for i in range(0, len(data) - len(data) % size, size):
            k, v = self.entry.unpack_from(data, i)
            if k == 0 and v == 0 and i > 0:
                break  # preallocated zeros: the end of the entries
            keys.append(k)
            values.append(v)
        self.keys, self.values = keys, values
        self.sanity_check()

    def sanity_check(self) -> None:
        raise NotImplementedError

    def preallocate(self) -> None:
        os.ftruncate(self.fd, self.max_entries * self.entry.size)

    def trim(self) -> None:
        os.ftruncate(self.fd, len(self.keys) * self.entry.size)

    def reset(self) -> None:
        self.keys, self.values = [], []
        os.ftruncate(self.fd, 0)
        self.preallocate()

    def flush(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        self.trim()
        os.close(self.fd)

    @property
    def is_full(self) -> bool:
        return len(self.keys) >= self.max_entries

    def __len__(self) -> int:
        return len(self.keys)

    def _write(self, key: int, value: int) -> None:
        if not self.deferred:
            os.pwrite(self.fd, self.entry.pack(key, value), len(self.keys) * self.entry.size)
        self.keys.append(key)
        self.values.append(value)

    def write_deferred(self) -> None:
        """Write every entry held back while ``deferred`` with one pwrite."""
        pack = self.entry.pack
        os.pwrite(self.fd, b"".join(pack(k, v) for k, v in zip(self.keys, self.values)), 0)
        self.deferred = False

    def _truncate_entries(self, count: int) -> None:
        del self.keys[count:], self.values[count:]
        os.ftruncate(self.fd, count * self.entry.size)
        self.preallocate()


class OffsetIndex(_SparseIndex):
    """Relative offset -> position of a batch start, every index.interval.bytes."""

    entry = struct.Struct(">ii")

    def sanity_check(self) -> None:
        keys = self.keys
        if any(b <= a for a, b in zip(keys, keys[1:])) or any(b < a for a, b in zip(self.values, self.values[1:])):
            raise CorruptIndex(f"{self.path}: entries not increasing")
        if keys and keys[0] < 0:
            raise CorruptIndex(f"{self.path}: negative relative offset")

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self.keys and rel <= self.keys[-1]:
            return
        self._write(rel, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below ``offset``, or (base, 0)."""
        i = bisect.bisect_right(self.keys, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.keys[i], self.values[i]

    def lookup_position(self, position: int, below_offset: int) -> tuple[int, int]:
        """The last entry whose position is at most ``position`` and offset below ``below_offset``."""
        i = min(bisect.bisect_right(self.values, position), bisect.bisect_left(self.keys, below_offset - self.base_offset)) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.keys[i], self.values[i]

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets at or above ``offset``."""
        self._truncate_entries(bisect.bisect_left(self.keys, offset - self.base_offset))


class TimeIndex(_SparseIndex):
    """Largest timestamp so far -> relative offset of the batch holding it."""

    entry = struct.Struct(">qi")

    def sanity_check(self) -> None:
        if any(b < a for a, b in zip(self.keys, self.keys[1:])) or any(b < a for a, b in zip(self.values, self.values[1:])):
            raise CorruptIndex(f"{self.path}: entries not increasing")

    def append(self, timestamp: int, offset: int) -> None:
        if self.keys and timestamp <= self.keys[-1]:
            return
        self._write(timestamp, offset - self.base_offset)

    def lookup_before(self, timestamp: int) -> int:
        """An offset such that every record before it has a timestamp below ``timestamp``."""
        i = bisect.bisect_left(self.keys, timestamp) - 1
        return self.base_offset if i < 0 else self.base_offset + self.values[i]

    @property
    def last_entry(self) -> tuple[int, int] | None:
        if not self.keys:
            return None
        return self.keys[-1], self.base_offset + self.values[-1]

    def truncate_to(self, offset: int) -> None:
        self._truncate_entries(bisect.bisect_left(self.values, offset - self.base_offset))
