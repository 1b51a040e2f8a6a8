"""The record-batch compression codecs (attributes bits 0-2), both ways.

Only the cleaner (which must read keys inside compressed batches and write
retained records back with the batch's codec), ``compression.type``
recompression on append, and per-record validation use this; the produce and
fetch paths never decompress.

The wire formats are the ones Kafka's Java client and broker write, which every
client reads: gzip; snappy in xerial's block framing (SnappyOutputStream),
raw snappy also accepted on input (librdkafka writes it); the LZ4 frame format
with independent 64 KiB blocks (KafkaLZ4BlockOutputStream); a zstd frame.
Levels follow KIP-390 (compression.gzip.level, compression.lz4.level,
compression.zstd.level) with Kafka's defaults.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import lz4.frame
import zstandard

from odradek.storage import errors

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4

#: compression.type values (other than 'producer') -> codec id.
CODECS = {"uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
#: Kafka's default level per codec (KIP-390): gzip's Deflater default, lz4 9, zstd 3.
DEFAULT_LEVELS = {GZIP: 6, LZ4: 9, ZSTD: 3}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # SnappyOutputStream's default block size
_U32 = struct.Struct(">I")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """The records of a compressed batch; CorruptRecord when the bytes do not decode."""
    try:
        if codec == GZIP:
            return gzip.decompress(data)
        if codec == SNAPPY:
            return _snappy_decompress(bytes(data))
        if codec == LZ4:
            decompressed: bytes = lz4.frame.decompress(data)
            return decompressed
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except (
        OSError,
        EOFError,
        ValueError,
        RuntimeError,
        zlib.error,
        cramjam.DecompressionError,
    ) as exc:
        raise errors.CorruptRecord(f"cannot decompress a batch (codec {codec}): {exc}") from None
    raise errors.CorruptRecord(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """``data`` (concatenated records) compressed with ``codec`` (NONE returns it as is)."""
    if codec == NONE:
        return bytes(data)
    if level is None:
        level = DEFAULT_LEVELS.get(codec, 0)  # snappy has no level
    if codec == GZIP:
        return gzip.compress(data, compresslevel=level, mtime=0)
    if codec == SNAPPY:
        out = bytearray(_XERIAL_HEADER)
        view = memoryview(data)
        for start in range(0, len(view), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
            out += _U32.pack(len(block)) + block
        return bytes(out)
    if codec == LZ4:
        compressed: bytes = lz4.frame.compress(
            data,
            compression_level=level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
        return compressed
    if codec == ZSTD:
        return zstandard.ZstdCompressor(level=level).compress(data)
    raise ValueError(f"unknown compression codec {codec}")


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out, position = bytearray(), len(_XERIAL_HEADER)
    while position < len(data):
        (size,) = _U32.unpack_from(data, position)
        out += cramjam.snappy.decompress_raw(data[position + 4 : position + 4 + size])
        position += 4 + size
    return bytes(out)
