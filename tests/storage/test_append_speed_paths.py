"""What the lean append path derives or keeps on the side, checked against what it stands for.

Log.append computes from the config once (not per call) whether to recompress, to stamp
LogAppendTime and to check keys; LogSegment learns that an index is full from the index's
own append instead of re-measuring both after every batch. These tests make sure the
shortcuts still follow a config change and the index's real fill level.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from spec import build_batch, parse_batches

from odradek.protocol import records as rb
from odradek.storage import Log, LogConfig, errors


def read_all(log: Log):
    info = log.read(0, 1 << 30)
    return parse_batches(b"".join(r.read_bytes() for r in info.regions))


@pytest.fixture
def log(tmp_path: Path) -> Log:
    return Log(tmp_path / "topic-0", LogConfig())


def test_update_config_changes_timestamp_type_on_the_next_append(log):
    log.append(build_batch([(b"k", b"v", 5)]), leader_epoch=0, now_ms=1000)
    log.update_config(LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append(build_batch([(b"k", b"v", 5)]), leader_epoch=0, now_ms=1000)
    assert info.log_append_time_ms == 1000
    log.update_config(LogConfig())
    info = log.append(build_batch([(b"k", b"v", 5)]), leader_epoch=0, now_ms=1000)
    assert info.log_append_time_ms == -1
    assert [(b.max_timestamp, bool(b.attributes & 0x08)) for b in read_all(log)] == [
        (5, False),
        (1000, True),
        (5, False),
    ]


def test_update_config_changes_compression_on_the_next_append(log):
    for codec in ("producer", "gzip", "producer"):
        log.update_config(LogConfig(compression_type=codec))
        log.append(build_batch([(b"k", b"v" * 100, 5)]), leader_epoch=0, now_ms=0)
    data = b"".join(r.read_bytes() for r in log.read(0, 1 << 30).regions)
    assert [b.compression_type for b in rb.iter_batches(data)] == [0, 1, 0]


def test_update_config_changes_cleanup_policy_on_the_next_append(log):
    keyless = build_batch([(None, b"v", 5)])
    log.append(keyless, leader_epoch=0, now_ms=0)
    log.update_config(LogConfig(cleanup_policy=("compact",)))
    with pytest.raises(errors.RecordValidationError):
        log.append(keyless, leader_epoch=0, now_ms=0)
    assert log.log_end_offset == 1


@pytest.mark.parametrize("entries", [3, 4, 7])
def test_segment_is_full_exactly_when_its_offset_index_is(tmp_path: Path, entries: int):
    # One timestamp throughout: the time index (room for 8 * entries // 12 >= 2) keeps one entry.
    log = Log(
        tmp_path / "topic-0", LogConfig(segment_index_bytes=8 * entries, index_interval_bytes=0)
    )
    for i in range(entries):
        assert not log.active.index_full
        log.append(build_batch([(b"k", b"v", 5)]), leader_epoch=0, now_ms=0)
        assert len(log.active.offset_index) == i + 1
    assert log.active.index_full
    log.append(build_batch([(b"k", b"v", 5)]), leader_epoch=0, now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, entries]
    assert not log.active.index_full


def test_segment_is_full_when_its_time_index_is(tmp_path: Path):
    # 12-byte time entries, 8-byte offset entries: a 24-byte index holds 2 times and 3 offsets.
    log = Log(tmp_path / "topic-0", LogConfig(segment_index_bytes=24, index_interval_bytes=0))
    log.append(build_batch([(b"k", b"v", 1)]), leader_epoch=0, now_ms=0)
    assert not log.active.index_full
    log.append(build_batch([(b"k", b"v", 2)]), leader_epoch=0, now_ms=0)
    assert (
        log.active.index_full
        and len(log.active.time_index) == 2
        and len(log.active.offset_index) == 2
    )


def test_truncation_clears_index_full(tmp_path: Path):
    log = Log(
        tmp_path / "topic-0", LogConfig(segment_index_bytes=24, index_interval_bytes=0)
    )  # 3 offsets
    for _ in range(3):
        log.append(build_batch([(b"k", b"v", 5)]), leader_epoch=0, now_ms=0)
    assert log.active.index_full
    log.truncate_to(1)
    assert not log.active.index_full
    for full in (False, True):
        log.append(build_batch([(b"k", b"v", 5)]), leader_epoch=0, now_ms=0)
        assert log.active.index_full is full
    assert len(log.segments) == 1


@pytest.mark.parametrize("interval", [0, 100, 1 << 20])
def test_locate_agrees_with_a_header_scan_for_every_offset(tmp_path: Path, interval: int):
    # Batches of 1-4 records, some indexed (interval 100), all (0) or none but the first (1 MiB):
    # an index entry for an offset names its batch's start; other offsets need the scan.
    log = Log(tmp_path / "topic-0", LogConfig(index_interval_bytes=interval))
    for i in range(30):
        log.append(build_batch([(b"k", b"v" * 40, 5)] * (1 + i % 4)), leader_epoch=0, now_ms=0)
    seg = log.active
    for offset in range(log.log_end_offset):
        found = seg.find_batch(offset)
        assert seg.locate(offset) == (found.position, found.base_offset)
    assert seg.locate(log.log_end_offset) is None


def test_read_from_an_indexed_offset_returns_a_first_batch_larger_than_max_bytes_whole(
    tmp_path: Path,
):
    log = Log(tmp_path / "topic-0", LogConfig(index_interval_bytes=0))
    for n in (1, 3, 2):
        log.append(build_batch([(b"k", b"v" * 100, 5)] * n), leader_epoch=0, now_ms=0)
    assert log.active.offset_index.position_of(1) is not None
    info = log.read(1, 1)
    batches = parse_batches(b"".join(r.read_bytes() for r in info.regions))
    assert [(b.base_offset, len(b.records)) for b in batches] == [(1, 3)]
    assert log.read(1, 1, min_one_message=False).regions == []
