"""Primitive readers and writers for the hand-written hot-path codecs.

kio covers every schema, but its readers build Python objects for every field;
the Produce request and Fetch response codecs use these instead so that record
blobs stay slices of the receive buffer. Readers take a buffer and an offset and
return (value, new offset).
"""

from __future__ import annotations

import struct
import uuid

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class Truncated(ValueError):
    """The buffer ended in the middle of a field."""


def _need(buf: memoryview, pos: int, n: int) -> None:
    if pos + n > len(buf) or n < 0:
        raise Truncated(f"need {n} bytes at {pos}, buffer has {len(buf)}")


def read_int8(buf: memoryview, pos: int) -> tuple[int, int]:
    _need(buf, pos, 1)
    return _I8.unpack_from(buf, pos)[0], pos + 1


def read_int16(buf: memoryview, pos: int) -> tuple[int, int]:
    _need(buf, pos, 2)
    return _I16.unpack_from(buf, pos)[0], pos + 2


def read_int32(buf: memoryview, pos: int) -> tuple[int, int]:
    _need(buf, pos, 4)
    return _I32.unpack_from(buf, pos)[0], pos + 4


def read_int64(buf: memoryview, pos: int) -> tuple[int, int]:
    _need(buf, pos, 8)
    return _I64.unpack_from(buf, pos)[0], pos + 8


def read_uuid(buf: memoryview, pos: int) -> tuple[uuid.UUID, int]:
    _need(buf, pos, 16)
    return uuid.UUID(bytes=bytes(buf[pos : pos + 16])), pos + 16


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        _need(buf, pos, 1)
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 35:
            raise ValueError("unsigned varint is longer than 5 bytes")


def read_string(buf: memoryview, pos: int, flexible: bool) -> tuple[str | None, int]:
    """A (nullable) string, compact when ``flexible``."""
    if flexible:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        n, pos = read_int16(buf, pos)
    if n < 0:
        return None, pos
    _need(buf, pos, n)
    return bytes(buf[pos : pos + n]).decode("utf-8"), pos + n


def read_bytes(buf: memoryview, pos: int, flexible: bool) -> tuple[memoryview | None, int]:
    """(Nullable) bytes as a slice of ``buf``: no copy."""
    if flexible:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        n, pos = read_int32(buf, pos)
    if n < 0:
        return None, pos
    _need(buf, pos, n)
    return buf[pos : pos + n], pos + n


def read_array_length(buf: memoryview, pos: int, flexible: bool) -> tuple[int, int]:
    """An array's element count (-1 for null)."""
    if flexible:
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos
    return read_int32(buf, pos)


def skip_tagged_fields(buf: memoryview, pos: int) -> int:
    """Skip a tagged-field section; the spec says unknown tags must be ignored."""
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        _need(buf, pos, size)
        pos += size
    return pos


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def int16(value: int) -> bytes:
    return _I16.pack(value)


def int32(value: int) -> bytes:
    return _I32.pack(value)


def int64(value: int) -> bytes:
    return _I64.pack(value)


def string(value: str | None, flexible: bool) -> bytes:
    """A (nullable) string, compact when ``flexible``."""
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    raw = value.encode("utf-8")
    return (uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def array_length(n: int, flexible: bool) -> bytes:
    return uvarint(n + 1) if flexible else _I32.pack(n)


def bytes_length(n: int, flexible: bool) -> bytes:
    """The length prefix of a (nullable, when n == -1) bytes field."""
    if flexible:
        return uvarint(n + 1)
    return _I32.pack(n)
