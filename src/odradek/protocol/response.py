"""A response body already encoded by a hand-written codec, possibly with file regions.

The Fetch response is built as a list of chunks: bytes for the fields and
``FileRegion``-like objects (``file``, ``position``, ``length``) for record data,
which the network layer sends with sendfile instead of reading into Python.

``on_sent`` lets whoever made the response learn when it left: the network layer calls it
once, with two ``time.perf_counter()`` readings, when it started writing the response
(responses wait in their connection to be written together) and when it had written the
last byte (or dropped the response with its closed connection). The request metrics use
it for Kafka's ResponseQueueTimeMs and ResponseSendTimeMs; without metrics it is None.

``mute_ms`` is Kafka's channel muting for a client over its quota: once the response is
sent, its connection reads nothing more for that long (the response's throttle_time_ms
tells a KIP-219 client to hold back as well). A client of a version from before KIP-219
does not hold back by itself, so its response is sent only once the mute is over
(``mute_first``), as Kafka sends it. ``silent`` is a response that is not sent
at all, only mutes (Produce with acks=0). ``throttle_at`` says where the encoder put the
throttle_time_ms field, for a throttle decided after encoding (``set_throttle_time``).
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
    #: Milliseconds the connection reads nothing once this response is sent (quotas).
    mute_ms: int = 0
    #: Mute before sending, not after: the client does not throttle itself (before KIP-219).
    mute_first: bool = False
    #: Nothing to send: the response only carries ``mute_ms`` (Produce with acks=0).
    silent: bool = False
    #: (chunk index, byte offset) of the throttle_time_ms int32, if the encoder wrote one.
    throttle_at: tuple[int, int] | None = None

    def set_throttle_time(self, throttle_ms: int) -> None:
        """Write ``throttle_ms`` into the throttle_time_ms field at ``throttle_at``."""
        if self.throttle_at is None:
            return
        index, offset = self.throttle_at
        chunk = self.chunks[index]
        assert isinstance(chunk, (bytes, memoryview))
        patched = bytearray(chunk)
        patched[offset : offset + 4] = throttle_ms.to_bytes(4, "big", signed=True)
        self.chunks[index] = bytes(patched)

    def add(self, chunk: bytes | memoryview) -> None:
        self.chunks.append(chunk)
        self.size += len(chunk)

    def add_region(self, region: Region) -> None:
        self.chunks.append(region)
        self.size += region.length
