"""The topic's ``compression.type`` on append (the recompression step of Kafka's LogValidator).

Log.append calls this only when the topic's compression.type is not
'producer' (the default keeps every byte as the producer sent it, zero-copy).
Each batch whose codec differs from the topic's is decompressed and its
records recompressed with the topic's codec and level (compression.gzip.level,
compression.lz4.level, compression.zstd.level); the header keeps everything
else (offsets are assigned afterwards by the append path as for any batch),
and the CRC is recomputed. Control batches and batches already in the topic's
codec are left alone.

Batches that do not pass the header and CRC checks are passed on unchanged, so
that the append path rejects them with the right error code instead of this
step giving corrupt data a fresh CRC.
"""

from __future__ import annotations

from odradek.protocol import records as rb
from odradek.storage import compression
from odradek.storage.config import LogConfig
from odradek.storage.records_builder import rewrap


def target_codec(config: LogConfig) -> tuple[int, int | None]:
    """(codec id, level) that ``config`` stores batches in; compression.type must not be 'producer'."""
    codec = compression.CODECS[config.compression_type]
    level = {
        compression.GZIP: config.compression_gzip_level,
        compression.LZ4: config.compression_lz4_level,
        compression.ZSTD: config.compression_zstd_level,
    }.get(codec)
    if codec == compression.GZIP and level == -1:
        level = None  # gzip's -1 is "the codec's default"
    return codec, level


def recompress_batches(
    records: bytes | bytearray | memoryview, config: LogConfig
) -> bytes | memoryview:
    """``records`` with every batch in the topic's codec; the input itself when none needed it."""
    codec, level = target_codec(config)
    buf = memoryview(records)
    end = len(buf)
    pieces: list[bytes | memoryview] = []
    changed = False
    position = 0
    while position < end:
        try:
            batch = rb.check_batch(buf, position, end)
        except rb.InvalidBatch:
            pieces.append(buf[position:])  # the append path reports it
            break
        size = batch.size_in_bytes
        if batch.is_control or batch.compression_type == codec:
            pieces.append(buf[position : position + size])
        else:
            payload: bytes | memoryview = batch.records_payload()
            if batch.compression_type:
                payload = compression.decompress(batch.compression_type, payload)
            pieces.append(
                rewrap(
                    batch,
                    compression.compress(codec, payload, level),
                    attributes=(batch.attributes & ~rb.COMPRESSION_MASK) | codec,
                )
            )
            changed = True
        position += size
    return b"".join(pieces) if changed else buf
