"""Kafka's text checkpoint files: a version line, a count line, then one entry per line.

Written to a .tmp file, fsynced and renamed, so a crash leaves the old or the new file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from odradek.durable import write_atomically

VERSION = 0


class CorruptCheckpoint(ValueError):
    pass


def read_small_file(path: Path) -> bytes:
    """A small file's bytes in four system calls (open, fstat, read, close).

    Path.read_text and read_bytes make nine (buffer and codec set-up: fstat twice, isatty,
    seeks, a second read for the end), and start-up reads two such files per partition.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        chunks = [os.read(fd, size + 1)]
        while len(chunks[-1]) > size:  # the file grew since the fstat: read on to its end
            size = 1 << 16
            chunks.append(os.read(fd, size + 1))
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_checkpoint_lines(path: Path) -> list[str]:
    try:
        lines = read_small_file(path).decode().splitlines()
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
    write_atomically(
        path, "".join(f"{line}\n" for line in [str(VERSION), str(len(entries)), *entries])
    )


def read_offsets(path: Path) -> dict[tuple[str, int], int]:
    """topic partition offset lines -> {(topic, partition): offset}."""
    result = {}
    for line in read_checkpoint_lines(path):
        topic, partition, offset = line.split()
        result[(topic, int(partition))] = int(offset)
    return result


def write_offsets(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    write_checkpoint_lines(path, [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())])
