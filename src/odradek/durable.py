"""Crash-safe small-file writes shared by storage and metadata.

A checkpoint or metadata file must be either the old version or the new one
after a crash, never a torn mix: write a temporary file, fsync it, rename it over
the target, then fsync the directory so the rename itself survives power loss.
It lives at the package root because storage and metadata are sibling layers
that may not import each other.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` by ``text``; when this fails before the rename (a full disk), the
    old file is left whole and the temporary file removed."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
