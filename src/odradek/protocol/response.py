"""A response body already encoded by a hand-written codec, possibly with file regions.

The Fetch response is built as a list of chunks: bytes for the fields and
``FileRegion``-like objects (``file``, ``position``, ``length``) for record data,
which the network layer sends with sendfile instead of reading into Python.

``on_sent`` lets whoever made the response learn when it left: the network layer calls it
once, with two ``time.perf_counter()`` readings, when it started writing the response
(responses wait in their connection to be written together) and when it had written the
last byte (or dropped the response with its closed connection). The request metrics use
it for Kafka's ResponseQueueTimeMs and ResponseSendTimeMs; without metrics it is None.
"""

from __future__ import annotations

from collections.abc import Callable
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
    #: Called with (writing started, written) once the response is sent; see the module doc.
    on_sent: Callable[[float, float], None] | None = None

    def add(self, chunk: bytes | memoryview) -> None:
        self.chunks.append(chunk)
        self.size += len(chunk)

    def add_region(self, region: Region) -> None:
        self.chunks.append(region)
        self.size += region.length
