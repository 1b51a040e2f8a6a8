"""LeaderEpochFileCache: epoch -> start offset, kept in leader-epoch-checkpoint as Kafka writes it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from odradek.storage.checkpoint import read_checkpoint_lines, write_checkpoint_lines

UNDEFINED = -1


class LeaderEpochFileCache:
    def __init__(self, path: Path, log_end_offset: Callable[[], int]) -> None:
        self.path = path
        self._log_end_offset = log_end_offset
        self.entries: list[tuple[int, int]] = [
            (int(e), int(o)) for e, o in (line.split() for line in read_checkpoint_lines(path))
        ]

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (ignored unless it is a newer epoch)."""
        if epoch <= self.latest_epoch:
            return
        self.entries = [(e, o) for e, o in self.entries if o < start_offset]
        self.entries.append((epoch, start_offset))
        self._write()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch``, the start offset of the next epoch or the LEO), as OffsetForLeaderEpoch."""
        if not self.entries or epoch < self.entries[0][0]:
            return UNDEFINED, UNDEFINED
        if epoch >= self.latest_epoch:
            return self.latest_epoch, self._log_end_offset()
        for i, (e, _) in enumerate(self.entries):
            if e > epoch:
                return self.entries[i - 1][0], self.entries[i][1]
        return self.latest_epoch, self._log_end_offset()  # pragma: no cover - loop always returns

    def truncate_from_end(self, end_offset: int) -> None:
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._write()

    def clear_and_start_at(self, start_offset: int) -> None:
        if self.entries:
            self.entries = [(self.latest_epoch, start_offset)]
            self._write()

    def _write(self) -> None:
        write_checkpoint_lines(self.path, [f"{e} {o}" for e, o in self.entries])
