"""OffsetMap: key -> latest offset for one cleaning, bounded as Kafka's SkimpyOffsetMap.

Kafka sizes the map from ``log.cleaner.dedupe.buffer.size`` (split between the
cleaner threads): each slot holds a 16-byte MD5 of the key and an 8-byte
offset, and the map is considered full at ``log.cleaner.io.buffer.load.factor``
of its slots. This map stores the same 16-byte digests, so its size does not
grow with key length, and refuses new keys at the same count; when the dirty
section of a log has more distinct keys than that, the cleaner cleans up to
where the map filled and leaves the rest for the next round.
"""

from __future__ import annotations

import hashlib

#: Bytes per slot in Kafka's SkimpyOffsetMap: an MD5 digest and an offset.
BYTES_PER_ENTRY = 16 + 8
DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
DEFAULT_LOAD_FACTOR = 0.9


class OffsetMap:
    def __init__(
        self, memory: int = DEFAULT_DEDUPE_BUFFER_SIZE, load_factor: float = DEFAULT_LOAD_FACTOR
    ) -> None:
        self.slots = memory // BYTES_PER_ENTRY
        #: Distinct keys accepted before the map counts as full.
        self.capacity = int(self.slots * load_factor)
        if self.capacity < 1:
            raise ValueError(f"a dedupe buffer of {memory} bytes holds no key")
        self._offsets: dict[bytes, int] = {}
        #: The last offset the map covers (records after it were not mapped); -1 when empty.
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._offsets)

    def put(self, key: bytes, offset: int) -> bool:
        """Map ``key`` to ``offset``; False (and nothing stored) when it is a new key and the map is full."""
        digest = hashlib.md5(key, usedforsecurity=False).digest()
        offsets = self._offsets
        if digest not in offsets and len(offsets) >= self.capacity:
            return False
        offsets[digest] = offset
        self.latest_offset = offset
        return True

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, or -1 when the dirty section does not hold it."""
        return self._offsets.get(hashlib.md5(key, usedforsecurity=False).digest(), -1)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset
