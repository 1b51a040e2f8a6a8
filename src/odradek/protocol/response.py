"""A response body already encoded by a hand-written codec, possibly with file regions.

The Fetch response is built as a list of chunks: bytes for the fields and
``FileRegion``-like objects (``file``, ``position``, ``length``) for record data,
which the network layer sends with sendfile instead of reading into Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import BinaryIO, Protocol


class Region(Protocol):
    """A byte range of an open file (storage's FileRegion satisfies this)."""

    @property
    def file(self) -> BinaryIO: ...

    @property
    def position(self) -> int: ...

    @property
    def length(self) -> int: ...


Chunk = bytes | memoryview | Region


@dataclass(slots=True)
class EncodedResponse:
    """A response body as chunks, with its total length precomputed for the size prefix."""

    chunks: list[Chunk] = field(default_factory=list)
    size: int = 0
    #: error code -> how many times the response carries it (Kafka's errorCounts), for the
    #: request metrics; set by the encoder or handler that knows the fields, None if unknown.
    error_counts: dict[int, int] | None = None

    def add(self, chunk: bytes | memoryview) -> None:
        self.chunks.append(chunk)
        self.size += len(chunk)

    def add_region(self, region: Region) -> None:
        self.chunks.append(region)
        self.size += region.length
