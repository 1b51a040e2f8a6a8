"""An in-memory log with the storage Log's replication surface, for the simulation.

Records are plain values; a batch is (base offset, last offset, leader epoch,
values). Leader epochs live in storage's real ``LeaderEpochFileCache`` (never
flushed: its checkpoint path is never written), so the epoch arithmetic that
truncation relies on is the production code. A crash keeps the whole log: the
model is a replica that flushed everything and loses only its memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from odradek.storage import LogConfig, TopicPartition
from odradek.storage.errors import OffsetOutOfRange
from odradek.storage.leader_epoch import LeaderEpochFileCache


class Batch(NamedTuple):
    base_offset: int
    last_offset: int
    leader_epoch: int
    values: tuple[int, ...]


class MemoryLog:
    def __init__(self, config: LogConfig) -> None:
        self.topic_partition = TopicPartition("sim", 0)
        self.config = config
        self.log_start_offset = 0
        self.offline = False  # the model has no I/O to fail
        self.batches: list[Batch] = []
        self.leader_epoch_cache = LeaderEpochFileCache(
            Path("/nonexistent/sim/leader-epoch-checkpoint"), lambda: self.log_end_offset
        )

    @property
    def log_end_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else self.log_start_offset

    def append(
        self,
        records: tuple,
        *,
        leader_epoch: int,
        now_ms: int,
        assign_offsets: bool = True,
        from_client: bool = True,
        verification_guard: object = None,
        transaction_version: int = 0,
    ) -> Batch | None:
        """A leader appends values; a follower appends the leader's batches as they are.
        (``from_client``, ``verification_guard``, ``transaction_version``: this model has no
        client-only checks and no transactions.)"""
        cache = self.leader_epoch_cache
        if assign_offsets:
            leo = self.log_end_offset
            batch = Batch(leo, leo + len(records) - 1, leader_epoch, tuple(records))
            if leader_epoch > cache.latest_epoch:
                cache.assign(leader_epoch, leo)
            self.batches.append(batch)
            return batch
        for batch in records:
            if batch.base_offset != self.log_end_offset:
                raise AssertionError(f"follower append at {batch.base_offset} != LEO")
            self.batches.append(batch)
            cache.assign(batch.leader_epoch, batch.base_offset)
        return None

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_message: bool = True,
        aborted_transactions: bool = False,
    ) -> tuple[Batch, ...]:
        """Whole batches from ``start_offset`` below ``max_offset``; ``max_bytes`` counts batches."""
        leo = self.log_end_offset
        if start_offset < self.log_start_offset or start_offset > leo:
            raise OffsetOutOfRange(f"offset {start_offset} outside [0, {leo}]")
        upper = leo if max_offset is None else min(max_offset, leo)
        out = [b for b in self.batches if b.last_offset >= start_offset and b.base_offset < upper]
        return tuple(out[: max(max_bytes, 1)])

    def last_stable_offset(self, high_watermark: int) -> int:
        """No transactions in the simulation: the high watermark."""
        return high_watermark

    def truncate_to(self, offset: int) -> None:
        """Drop every batch holding an offset at or after ``offset`` (as storage's Log)."""
        self.batches = [b for b in self.batches if b.last_offset < offset]
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)

    def value_at(self, offset: int) -> int | None:
        for b in self.batches:
            if b.base_offset <= offset <= b.last_offset:
                return b.values[offset - b.base_offset]
        return None

    def values(self) -> dict[int, int]:
        return {b.base_offset + i: v for b in self.batches for i, v in enumerate(b.values)}
