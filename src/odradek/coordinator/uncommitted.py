"""UncommittedWrites: what reads answer while a coordinator's writes are above the high watermark.

Kafka's CoordinatorRuntime keeps a coordinator's state in timeline structures
(SnapshotRegistry, TimelineHashMap): every write takes a snapshot at the offset after
its records, and reads (scheduleReadOperation: OffsetFetch, DescribeGroups, ListGroups,
ConsumerGroupDescribe) answer the state at ``lastCommittedOffset``, the partition's
high watermark. A client therefore never reads a change that the coordinator's
failover can still lose.

Here the same answers come from an overlay kept per key (a group id). A write that is
appended but still above its partition's high watermark keeps the pre-image of each
key it changed: the copy the runtime takes before every call anyway, to revert a write
that cannot be appended, so keeping it costs no second copy. A read of a key answers
the pre-image of the key's oldest uncommitted write (the state after every committed
write, before the first one that is not), and the live state when the key has none.
When the high watermark passes a write, its pre-images are dropped; when the partition
is unloaded, all of them are (whoever loads it next replays its log). A load that finds
records above the high watermark counts them as one write, whose pre-images are the
partition's groups before them. A single node's high watermark passes each write as it is
appended, so nothing is ever kept there.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

V = TypeVar("V")


class UncommittedWrites(Generic[V]):
    """Per partition, the writes above its high watermark and the pre-images of their keys."""

    def __init__(self) -> None:
        #: Per partition, its uncommitted writes in log order: (offset after the write's last
        #: record, the keys it changed).
        self._writes: dict[int, deque[tuple[int, list[str]]]] = {}
        #: Per key, the pre-images of its uncommitted writes, oldest first.
        self._pre_images: dict[str, deque[V]] = {}

    def written(self, partition: int, end_offset: int, pre_images: Mapping[str, V]) -> None:
        """A write ending before ``end_offset`` was appended to ``partition`` and is not yet
        below its high watermark; ``pre_images`` are its keys as they were before it."""
        if not pre_images:
            return
        self._writes.setdefault(partition, deque()).append((end_offset, list(pre_images)))
        for key, pre_image in pre_images.items():
            self._pre_images.setdefault(key, deque()).append(pre_image)

    def committed(self, partition: int, high_watermark: int) -> None:
        """``partition``'s high watermark reached ``high_watermark``: the writes below it are
        committed, reads see them."""
        writes = self._writes.get(partition)
        if writes is None:
            return
        while writes and writes[0][0] <= high_watermark:
            _, keys = writes.popleft()
            for key in keys:
                pre_images = self._pre_images[key]
                pre_images.popleft()
                if not pre_images:
                    del self._pre_images[key]
        if not writes:
            del self._writes[partition]

    def forget(self, partition: int) -> None:
        """``partition`` is unloaded: its uncommitted writes are no longer this broker's to
        answer for (the next leader replays its own log)."""
        writes = self._writes.pop(partition, None)
        for _, keys in writes or ():
            for key in keys:
                self._pre_images.pop(key, None)

    def has_writes(self, partition: int) -> bool:
        return partition in self._writes

    def pre_image(self, key: str) -> V | None:
        """``key`` as of the high watermark, None when it has no uncommitted write (the live
        state is committed)."""
        pre_images = self._pre_images.get(key)
        return pre_images[0] if pre_images else None

    def __iter__(self) -> Iterator[str]:
        """The keys with uncommitted writes."""
        return iter(self._pre_images)

    def pre_images(self, key: str) -> Iterator[V]:
        """Every pre-image kept for ``key``: a change that takes effect once committed (a
        transaction marker replicated) is applied to them too, as they all follow it in the
        log."""
        return iter(self._pre_images.get(key, ()))
