"""LeaderEpochFileCache: epoch -> start offset, kept in leader-epoch-checkpoint as Kafka writes it.

Kafka writes and fsyncs the file on every new epoch, in a request handler
thread. Odradek's changes happen on the event loop, where an fsync per new
partition would stall every client for milliseconds (10,000 partitions: tens of
seconds). So changes stay in memory and the file is written by flush(), which
Log.flush runs off the event loop before it advances the recovery point. That is
as durable as Kafka where it matters: an epoch whose batches are below the
recovery point is in the file, and the epochs of batches above it come back
from their partitionLeaderEpoch when recovery re-reads them (as Kafka's
LogSegment.recover does); an epoch with no batch yet is assigned again from the
metadata when the broker starts.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from odradek.storage.checkpoint import read_checkpoint_lines, write_checkpoint_lines

log = logging.getLogger(__name__)

UNDEFINED = -1


class LeaderEpochFileCache:
    def __init__(self, path: Path, log_end_offset: Callable[[], int]) -> None:
        self.path = path
        self._log_end_offset = log_end_offset
        self.entries: list[tuple[int, int]] = []
        #: The newest epoch: an attribute, not a property, since every append asks for it.
        self.latest_epoch = UNDEFINED
        #: Bumped by every change; flush() writes when it differs from the version on disk.
        self._version = 0
        #: Whether the file could not be read; the log then recovers every segment, whose
        #: batches carry their epochs, rather than stopping the broker for a rebuildable file.
        self.corrupt = False
        try:
            self._set(
                [
                    (int(e), int(o))
                    for e, o in (line.split() for line in read_checkpoint_lines(path))
                ]
            )
        except ValueError as exc:  # CorruptCheckpoint too; a line that is not two integers
            log.warning("ignoring corrupt %s: %s; the epochs are read from the batches", path, exc)
            self.corrupt = True
        self._flushed_version = self._version
        self._write_lock = threading.Lock()  # flushes from a LogManager thread and from close()

    @property
    def dirty(self) -> bool:
        return self._version != self._flushed_version

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (ignored unless it is a newer epoch)."""
        if epoch <= self.latest_epoch:
            return
        self._set([(e, o) for e, o in self.entries if o < start_offset] + [(epoch, start_offset)])

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch``, the start offset of the next epoch or the LEO), as
        Kafka's LeaderEpochFileCache.endOffsetFor answers OffsetForLeaderEpoch.

        An epoch older than every known one answers itself with the first known epoch's
        start offset (the log below was deleted; a follower truncates there at most); an
        undefined epoch, or one newer than the latest, is unknown: (UNDEFINED, UNDEFINED).
        """
        entries = self.entries
        if epoch == UNDEFINED or not entries or epoch > self.latest_epoch:
            return UNDEFINED, UNDEFINED
        if epoch == self.latest_epoch:
            return epoch, self._log_end_offset()
        # epoch < latest: the first entry after it exists.
        i = bisect.bisect_right(entries, epoch, key=lambda entry: entry[0])
        return (entries[i - 1][0] if i else epoch), entries[i][1]

    def truncate_from_end(self, end_offset: int) -> None:
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if kept != self.entries:
            self._set(kept)

    def clear_and_start_at(self, start_offset: int) -> None:
        if self.entries:
            self._set([(self.latest_epoch, start_offset)])

    def _set(self, entries: list[tuple[int, int]]) -> None:
        self.entries = (
            entries  # replaced, never mutated: flush() in another thread reads a consistent list
        )
        self.latest_epoch = entries[-1][0] if entries else UNDEFINED
        self._version += 1

    def flush(self) -> None:
        """Write the checkpoint (crash-safe, fsynced) if it changed since the last flush; any thread."""
        with self._write_lock:
            version, entries = self._version, self.entries
            if version == self._flushed_version:
                return
            write_checkpoint_lines(self.path, [f"{e} {o}" for e, o in entries])
            self._flushed_version = version
