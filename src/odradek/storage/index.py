"""Sparse OffsetIndex (.index) and TimeIndex (.timeindex) files, as Kafka lays them out.

.index entries are 8 bytes: 4-byte offset relative to the segment's base
offset, 4-byte position in the .log file. .timeindex entries are 12 bytes:
8-byte timestamp, 4-byte relative offset. Files are preallocated to
segment.index.bytes while the segment is active and trimmed to their entries
on roll and close. Entries are mirrored in two Python lists so lookups are a
bisect, and appends are one store into a memory map of the file.

As in Kafka, an index holds no file descriptor: the file is opened only to be
resized (preallocate, trim, truncate) and mapped, or fsynced, then closed at once. A
broker with tens of thousands of partitions would otherwise keep two extra
descriptors per partition and hit the process's open-file limit.

Preallocation only sets the file's size: the file stays sparse. A store into a page
of the map that has no disk block yet makes the kernel allocate one, and on a full
file system that fails with SIGBUS, which would kill the broker. So make_room gives
the entries about to be stored real blocks first (fallocate, ALLOCATE_STEP bytes at a
time), where a full disk is an ordinary OSError (ENOSPC) raised before the segment
writes anything.
"""

from __future__ import annotations

import bisect
import ctypes
import itertools
import mmap
import operator
import os
import struct
from pathlib import Path

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_MAP_FAILED = ctypes.c_void_p(-1).value
#: Bytes of an index file given disk blocks at a time, ahead of the entries stored there.
ALLOCATE_STEP = 64 * 1024


class _Mapping:
    """A shared read-write map of a whole file that, unlike mmap.mmap before Python 3.13
    (which dup()s the descriptor), keeps no file descriptor open."""

    def __init__(self, fd: int, size: int) -> None:
        addr = _libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
        if addr == _MAP_FAILED:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        # Index files are sparse and preallocated: without this, the first touch of an
        # entry faults in (and zero-fills) a whole read-ahead window, which dominated
        # producing across 1,000 partitions.
        _libc.madvise(addr, size, mmap.MADV_RANDOM)
        self.addr, self.size = addr, size
        self.buf = (ctypes.c_char * size).from_address(addr)

    def close(self) -> None:
        del self.buf
        _libc.munmap(self.addr, self.size)


class CorruptIndex(Exception):
    """An index file that cannot be trusted; the segment rebuilds it."""


class _SparseIndex:
    entry = struct.Struct(">ii")

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry.size)
        self._last_entry = self.max_entries - 1
        self.keys: list[int] = []
        self.values: list[int] = []
        #: While True (a rebuild), entries stay in memory until write_deferred().
        self.deferred = False
        #: The file mapped for writing; None while the file is empty.
        self._map: _Mapping | None = None
        #: Entries the mapped file has room for (appends check this, not the map).
        self._capacity = 0
        #: Entries below which the file has disk blocks (see make_room); 0 after a reopen.
        self.allocated = 0
        self._pack_into = self.entry.pack_into
        self._entry_size = self.entry.size
        self._resize(None)

    # -- file ----------------------------------------------------------------
    def _resize(self, size: int | None) -> None:
        """Set the file to ``size`` bytes (None: keep it) and remap it; no descriptor outlives this."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if self._map is not None:
                self._map.close()
                self._map = None
                self._capacity = 0
            if size is not None:
                os.ftruncate(fd, size)
                self.allocated = min(self.allocated, size // self.entry.size)
            else:
                size = os.fstat(fd).st_size
            if size:
                self._map = _Mapping(fd, size)
                self._capacity = size // self.entry.size
        finally:
            os.close(fd)

    def load(self) -> None:
        """Read the entries of an existing file; raise CorruptIndex when they are inconsistent."""
        data = self._map.buf.raw if self._map is not None else b""
        size = self.entry.size
        # Zeros after the first entry are preallocated room (a first entry may be all zeros).
        count = min(len(data) // size, max(1, -(-len(data.rstrip(b"\0")) // size))) if data else 0
        if count:
            self.keys, self.values = (
                list(column) for column in zip(*self.entry.iter_unpack(data[: count * size]))
            )
        else:
            self.keys, self.values = [], []
        self.sanity_check()

    def sanity_check(self) -> None:
        raise NotImplementedError

    def preallocate(self) -> None:
        self._resize(max(self.max_entries, len(self.keys)) * self.entry.size)

    def trim(self) -> None:
        self._resize(len(self.keys) * self.entry.size)

    def reset(self) -> None:
        self.keys, self.values = [], []
        self._resize(0)
        self.preallocate()

    def close(self) -> None:
        self.trim()
        if self._map is not None:
            self._map.close()
            self._map = None

    def __len__(self) -> int:
        return len(self.keys)

    def _ensure_room(self, entries: int) -> ctypes.Array[ctypes.c_char]:
        """The map, grown first if ``entries`` would not fit (an index written past its preallocation)."""
        if self._capacity < entries:
            self._resize(max(self.max_entries, entries) * self.entry.size)
        assert self._map is not None
        return self._map.buf

    def make_room(self, entries: int) -> None:
        """Give the file disk blocks for ``entries`` more entries (and the map room for them),
        so storing them cannot fault on a full disk; raises OSError (ENOSPC) instead.
        Segment appends call this before writing their batches; it costs a comparison but
        once every ALLOCATE_STEP bytes of entries."""
        if len(self.keys) + entries > self.allocated:
            self._allocate(len(self.keys) + entries)

    def _allocate(self, entries: int) -> None:
        """Disk blocks for the first ``entries`` entries, and ALLOCATE_STEP bytes more."""
        self._ensure_room(entries)
        size = self._entry_size
        start = self.allocated * size
        end = min(max(entries * size, start + ALLOCATE_STEP), self._capacity * size)
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.posix_fallocate(fd, start, end - start)
        finally:
            os.close(fd)
        self.allocated = end // size

    def append(self, key: int, value: int) -> bool:
        """Add an entry after the last one (the caller knows it is larger) with one store into
        the map, key and value as stored (offsets relative to the segment's base offset);
        whether the index is now full. Appends add one entry per index.interval.bytes."""
        keys = self.keys
        n = len(keys)
        keys.append(key)
        self.values.append(value)
        if not self.deferred:
            # An index with capacity is mapped; appends skip the None check (_ensure_room asserts).
            buf = self._map.buf if n < self._capacity else self._ensure_room(n + 1)  # type: ignore[union-attr]
            self._pack_into(buf, n * self._entry_size, key, value)
        return n >= self._last_entry

    def write_deferred(self) -> None:
        """Write every entry held back while ``deferred`` in one go."""
        if self.keys:
            data = b"".join(map(self.entry.pack, self.keys, self.values))
            if len(self.keys) > self.allocated:
                self._allocate(len(self.keys))
            # ctypes takes bytes for a c_char slice; typeshed wants Iterable[c_char]
            self._ensure_room(len(self.keys))[: len(data)] = data  # type: ignore[call-overload]
        self.deferred = False

    def _truncate_entries(self, count: int) -> None:
        del self.keys[count:], self.values[count:]
        self._resize(count * self.entry.size)
        self.preallocate()


class OffsetIndex(_SparseIndex):
    """Relative offset -> position of a batch start, every index.interval.bytes; keys strictly increase."""

    entry = struct.Struct(">ii")

    def sanity_check(self) -> None:
        keys = self.keys
        if not (_increasing(keys, strictly=True) and _increasing(self.values)):
            raise CorruptIndex(f"{self.path}: entries not increasing")
        if keys and keys[0] < 0:
            raise CorruptIndex(f"{self.path}: negative relative offset")

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below ``offset``, or (base, 0)."""
        i = bisect.bisect_right(self.keys, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.keys[i], self.values[i]

    def position_of(self, offset: int) -> int | None:
        """The position of the entry for exactly ``offset`` (where its batch starts), or None."""
        key = offset - self.base_offset
        keys = self.keys
        i = bisect.bisect_left(keys, key)
        return self.values[i] if i < len(keys) and keys[i] == key else None

    def lookup_position(self, position: int, below_offset: int) -> tuple[int, int]:
        """The last entry whose position is at most ``position`` and offset below ``below_offset``."""
        i = (
            min(
                bisect.bisect_right(self.values, position),
                bisect.bisect_left(self.keys, below_offset - self.base_offset),
            )
            - 1
        )
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.keys[i], self.values[i]

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets at or above ``offset``."""
        self._truncate_entries(bisect.bisect_left(self.keys, offset - self.base_offset))


class TimeIndex(_SparseIndex):
    """Largest timestamp so far -> relative offset of the batch holding it; an entry is added
    with an offset index entry when the largest timestamp grew, so keys strictly increase."""

    entry = struct.Struct(">qi")

    def sanity_check(self) -> None:
        if not (_increasing(self.keys) and _increasing(self.values)):
            raise CorruptIndex(f"{self.path}: entries not increasing")

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


def _increasing(values: list[int], *, strictly: bool = False) -> bool:
    """Whether ``values`` never decrease (never repeat either, ``strictly``); a C-speed pass."""
    return all(
        map(operator.lt if strictly else operator.le, values, itertools.islice(values, 1, None))
    )
