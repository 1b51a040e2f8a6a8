"""Per-record validation on append: null keys on compacted topics, CreateTime outside the window."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import cramjam
import pytest
from crc32c import crc32c
from spec import build_batch

from odradek.protocol.errors import ErrorCode
from odradek.storage import Log, LogConfig, errors

NOW = 10_000_000_000


def compressed(batch: bytes, codec: int) -> bytes:
    """The same batch with its records compressed by ``codec`` (attributes and CRC redone)."""
    body = batch[61:]
    packed = {
        1: gzip.compress,
        3: lambda b: bytes(cramjam.lz4.compress(b)),
        4: lambda b: bytes(cramjam.zstd.compress(b)),
        2: lambda b: bytes(cramjam.snappy.compress_raw(b)),
    }[codec](body)
    after_crc = struct.pack(">h", codec) + batch[23:61] + packed
    return (
        batch[:8]
        + struct.pack(">i", 4 + 1 + 4 + len(after_crc))
        + batch[12:17]
        + struct.pack(">I", crc32c(after_crc))
        + after_crc
    )


@pytest.fixture
def compacted(tmp_path: Path) -> Log:
    return Log(tmp_path / "t-0", LogConfig(cleanup_policy=("compact",)))


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_compacted_topic_rejects_null_keys_with_their_indices(compacted, codec):
    first = build_batch([(b"k", b"v", NOW), (None, b"v", NOW)])
    second = build_batch([(None, b"v", NOW), (b"k", b"v", NOW)])
    blob = first + (compressed(second, codec) if codec else second)
    with pytest.raises(errors.RecordValidationError) as raised:
        compacted.append(blob, leader_epoch=0, now_ms=NOW)
    assert raised.value.error_code == ErrorCode.invalid_record
    assert [i for i, _ in raised.value.record_errors] == [1, 2]
    assert "Compacted topic cannot accept message without key in topic partition t-0" in str(
        raised.value
    )
    assert compacted.log_end_offset == 0 and compacted.size_in_bytes == 0
    keyed = build_batch([(b"a", b"1", NOW), (b"b", None, NOW)])
    info = compacted.append(
        compressed(keyed, codec) if codec else keyed, leader_epoch=0, now_ms=NOW
    )
    assert (info.first_offset, compacted.log_end_offset) == (0, 2)


@pytest.mark.parametrize("codec", [0, 4])
def test_timestamps_outside_the_window_are_rejected(tmp_path, codec):
    log = Log(tmp_path / "t-0", LogConfig(message_timestamp_before_max_ms=1000))
    # The max timestamp is out of range, so the per-record pass runs and finds both bad records.
    batch = build_batch([(b"k", b"v", NOW), (b"k", b"v", NOW - 5000), (b"k", b"v", NOW + 3600001)])
    with pytest.raises(errors.RecordValidationError) as raised:
        log.append(compressed(batch, codec) if codec else batch, leader_epoch=0, now_ms=NOW)
    assert raised.value.error_code == ErrorCode.invalid_timestamp
    assert [i for i, _ in raised.value.record_errors] == [1, 2]
    assert "out of range" in raised.value.record_errors[0][1]
    assert log.log_end_offset == 0


def test_timestamps_inside_the_window_and_null_keys_on_a_delete_topic_pass(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(message_timestamp_before_max_ms=1000))
    info = log.append(
        build_batch([(None, b"v", NOW - 1000), (b"k", b"v", NOW + 3600000)]),
        leader_epoch=0,
        now_ms=NOW,
    )
    assert info.record_count == 2
