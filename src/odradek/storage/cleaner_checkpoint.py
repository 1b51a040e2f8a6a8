"""cleaner-offset-checkpoint: one per log dir, as Kafka's LogCleanerManager keeps it.

The text checkpoint format of the other log-dir checkpoints (version 0, a
count, then ``topic partition offset`` lines), mapping each compacted partition
to its first dirty offset: below it the log has been cleaned, so offsets may
have gaps there (recovery checks contiguity only above it) and the dirty ratio
counts only what lies above it.

Earlier versions of Odradek wrote a per-partition file of the same name inside
the partition directory holding one offset; it is read once, carried into the
log dir's file and removed.

Several logs of one dir load in parallel threads and the cleaner updates entries
from the event loop, so every read-modify-write holds a lock; reads are cached
per file version so loading N partitions parses the file once, not N times.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from odradek.storage.checkpoint import CorruptCheckpoint, read_offsets, write_offsets

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_cache: dict[Path, tuple[tuple[int, int], dict[tuple[str, int], int]]] = {}


def _topic_partition(partition_dir: Path) -> tuple[str, int]:
    topic, _, partition = partition_dir.name.rpartition("-")
    return topic, int(partition)


def _read(path: Path) -> dict[tuple[str, int], int]:
    """The file's entries (cached by mtime and size); callers hold the lock and must not mutate."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        _cache.pop(path, None)
        return {}
    version = (st.st_mtime_ns, st.st_size)
    cached = _cache.get(path)
    if cached is not None and cached[0] == version:
        return cached[1]
    try:
        offsets = read_offsets(path)
    except (CorruptCheckpoint, ValueError):
        offsets = {}  # as Kafka: a corrupt cleaner checkpoint means "clean from the log start"
    _cache[path] = (version, offsets)
    return offsets


def _write(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    write_offsets(path, offsets)
    _cache.pop(path, None)


def load_cleaner_offset(partition_dir: Path) -> int:
    """The first dirty offset of the partition in ``partition_dir`` (0 when never cleaned)."""
    partition_dir = Path(partition_dir)
    path = partition_dir.parent / CLEANER_OFFSET_CHECKPOINT
    tp = _topic_partition(partition_dir)
    legacy = partition_dir / CLEANER_OFFSET_CHECKPOINT
    with _lock:
        offsets = _read(path)
        if tp in offsets or not legacy.exists():
            legacy.unlink(missing_ok=True)
            return offsets.get(tp, 0)
        try:
            lines = [line for line in legacy.read_text().splitlines() if line.strip()]
            offset = int(lines[2]) if len(lines) == 3 and lines[:2] == ["0", "1"] else 0
        except (OSError, ValueError):
            offset = 0
        if offset > 0:
            _write(path, {**offsets, tp: offset})
        legacy.unlink(missing_ok=True)
        return offset


def save_cleaner_offset(partition_dir: Path, offset: int) -> None:
    """Record the partition's first dirty offset in its log dir's checkpoint (durably)."""
    partition_dir = Path(partition_dir)
    path = partition_dir.parent / CLEANER_OFFSET_CHECKPOINT
    with _lock:
        _write(path, {**_read(path), _topic_partition(partition_dir): offset})


def forget_cleaner_offset(partition_dir: Path) -> None:
    """Drop the partition's entry (its log was deleted), as Kafka does."""
    partition_dir = Path(partition_dir)
    path = partition_dir.parent / CLEANER_OFFSET_CHECKPOINT
    tp = _topic_partition(partition_dir)
    with _lock:
        offsets = _read(path)
        if tp in offsets:
            try:
                _write(path, {k: v for k, v in offsets.items() if k != tp})
            except OSError as exc:  # a stale entry only makes the cleaner skip data it has not seen
                logger.warning("cannot drop %s-%d from %s: %s", *tp, path, exc)
