"""Kafka's text checkpoint files: a version line, a count line, then one entry per line.

Written to a .tmp file, fsynced and renamed, so a crash leaves the old or the new file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from odradek.durable import write_atomically

VERSION = 0


class CorruptCheckpoint(ValueError):
    pass


def read_checkpoint_lines(path: Path) -> list[str]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    if len(lines) < 2 or lines[0].strip() != str(VERSION):
        raise CorruptCheckpoint(f"{path}: bad header")
    count = int(lines[1])
    entries = [line for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise CorruptCheckpoint(f"{path}: expected {count} entries, found {len(entries)}")
    return entries


def write_checkpoint_lines(path: Path, entries: list[str]) -> None:
    write_atomically(path, "".join(f"{line}\n" for line in [str(VERSION), str(len(entries)), *entries]))


def read_offsets(path: Path) -> dict[tuple[str, int], int]:
    """topic partition offset lines -> {(topic, partition): offset}."""
    result = {}
    for line in read_checkpoint_lines(path):
        topic, partition, offset = line.split()
        result[(topic, int(partition))] = int(offset)
    return result


def write_offsets(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    write_checkpoint_lines(path, [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())])
