"""Size-prefixed frames: every Kafka request and response is an int32 length then that many bytes.

The length is checked against ``socket.request.max.bytes`` before a single byte of
the body is buffered, so a garbage or hostile prefix cannot make the broker
allocate gigabytes.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from odradek.protocol.int_struct import IntStruct

if TYPE_CHECKING:
    from typing_extensions import Buffer

SIZE_PREFIX: IntStruct = struct.Struct(">i")
SIZE_PREFIX_LEN = SIZE_PREFIX.size


class InvalidFrame(ValueError):
    """The size prefix is negative or larger than the broker accepts."""


def frame_size(prefix: Buffer, max_bytes: int) -> int:
    """The body length announced by a 4-byte size prefix, checked against ``max_bytes``."""
    (size,) = SIZE_PREFIX.unpack(prefix)
    if size < 0:
        raise InvalidFrame(f"negative frame size {size}")
    if size > max_bytes:
        raise InvalidFrame(
            f"frame size {size} is larger than socket.request.max.bytes ({max_bytes})"
        )
    return size


def size_prefix(length: int) -> bytes:
    """The 4-byte prefix for a frame body of ``length`` bytes."""
    return SIZE_PREFIX.pack(length)
