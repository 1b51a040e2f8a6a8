"""LogCleaner: log compaction that keeps the latest record per key.

Cleaning is split in two so that the slow part runs outside the event loop:
``prepare`` (any thread) reads the inactive segments, builds the key -> latest
offset map and writes each changed segment to ``<base>.log.cleaned``;
``Log.install_cleaned`` (the log's owner) records the new cleaner offset, then
swaps every segment through ``.swap``. A crash at any point leaves either the
old or the new segment: .cleaned files are deleted on load, .swap files are
completed.

Batches keep their base offset, lastOffsetDelta, producer id, epoch and base
sequence; only the records that lost to a later record with the same key, and
tombstones older than delete.retention.ms, are dropped. Records are copied
byte for byte, so their offset deltas stay valid. Compressed and control
batches are kept whole (not cleaned).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c

from odradek.protocol import records as rb
from odradek.storage.segment import LogSegment

_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    is_tombstone: bool
    start: int  # position of the record (its length varint) in the batch payload
    end: int


@dataclass
class CleanPlan:
    cleaned: list[tuple[int, Path]]  # (segment base offset, .cleaned file)
    cleaner_offset: int
    bytes_before: int
    bytes_after: int


def parse_records(batch: rb.RecordBatch) -> list[Record]:
    """The records of an uncompressed batch, with their byte ranges in the payload."""
    payload = batch.records_payload()
    out, position = [], 0
    base_offset, base_ts = batch.base_offset, batch.base_timestamp
    for _ in range(batch.records_count):
        start = position
        length, position = rb.read_varint(payload, position)
        end = position + length
        position += 1  # attributes
        ts_delta, position = rb.read_varint(payload, position)
        offset_delta, position = rb.read_varint(payload, position)
        key_len, position = rb.read_varint(payload, position)
        key = None if key_len < 0 else bytes(payload[position:position + key_len])
        position += max(key_len, 0)
        value_len, position = rb.read_varint(payload, position)
        out.append(Record(base_offset + offset_delta, base_ts + ts_delta, key, value_len < 0, start, end))
        position = end
    return out


def _cleanable(batch: rb.RecordBatch) -> bool:
    return batch.compression_type == 0 and not batch.is_control


def _segment_batches(seg: LogSegment):
    data = os.pread(seg.fd, seg.size, 0)
    return data, list(rb.iter_batches(data, verify_crc=False, strict_count=False))


class LogCleaner:
    def needs_cleaning(self, log, now_ms: int) -> list[LogSegment]:
        """The inactive segments to clean now, or [] (dirty ratio and compaction lags as Kafka)."""
        cfg = log.config
        if not cfg.compact:
            return []
        candidates = []
        for seg in log.segments[:-1]:
            if seg.max_timestamp > now_ms - cfg.min_compaction_lag_ms:
                break
            candidates.append(seg)
        dirty = [s for s in candidates if s.base_offset >= log.cleaner_offset]
        if not dirty:
            return []
        total = sum(s.size for s in candidates)
        dirty_bytes = sum(s.size for s in dirty)
        first_ts = dirty[0].first_batch_timestamp
        overdue = first_ts is not None and first_ts >= 0 and now_ms - first_ts > cfg.max_compaction_lag_ms
        if total and (dirty_bytes / total >= cfg.min_cleanable_dirty_ratio or overdue):
            return candidates
        return []

    def prepare(self, log, now_ms: int) -> CleanPlan | None:
        """Write the cleaned version of every cleanable segment that changes; safe off the event loop."""
        segments = self.needs_cleaning(log, now_ms)
        if not segments:
            return None
        cleaner_offset = segments[-1].next_offset
        latest: dict[bytes, int] = {}
        contents = []
        for seg in segments:
            data, batches = _segment_batches(seg)
            parsed = []
            for batch in batches:
                records = parse_records(batch) if _cleanable(batch) else None
                for r in records or ():
                    if r.key is not None:
                        latest[r.key] = r.offset
                parsed.append((batch, records))
            contents.append((seg, data, parsed))
        horizon = now_ms - log.config.delete_retention_ms
        plan = CleanPlan([], cleaner_offset, 0, 0)
        for seg, data, parsed in contents:
            out = bytearray()
            for batch, records in parsed:
                if records is None:
                    out += data[batch.position:batch.position + batch.size_in_bytes]
                    continue
                kept = [r for r in records if r.key is None or (
                    latest[r.key] == r.offset and not (r.is_tombstone and r.timestamp < horizon))]
                if len(kept) == len(records):
                    out += data[batch.position:batch.position + batch.size_in_bytes]
                elif kept:
                    out += rebuild_batch(batch, kept)
            plan.bytes_before += seg.size
            plan.bytes_after += len(out)
            if len(out) == seg.size and out == data:
                continue
            path = seg.path.with_name(seg.path.name + ".cleaned")
            with open(path, "wb") as f:
                f.write(out)
                f.flush()
                os.fsync(f.fileno())
            plan.cleaned.append((seg.base_offset, path))
        return plan


def rebuild_batch(batch: rb.RecordBatch, kept: list[Record]) -> bytes:
    """The batch with only ``kept`` records: same header fields, new count, length and CRC."""
    payload = batch.records_payload()
    body = b"".join(payload[r.start:r.end] for r in kept)
    header = bytearray(batch.buffer[batch.position:batch.position + rb.HEADER_SIZE])
    _I32.pack_into(header, rb.BATCH_LENGTH, rb.HEADER_SIZE - rb.LOG_OVERHEAD + len(body))
    _I32.pack_into(header, rb.RECORDS_COUNT, len(kept))
    # lastOffsetDelta stays: the batch still ends at its original last offset (and sequence).
    crc = crc32c(bytes(header[rb.ATTRIBUTES:]) + body)
    struct.pack_into(">I", header, rb.CRC, crc)
    return bytes(header) + body
