"""Retention as Kafka's deleteOldSegments: the active segment counts too (the log rolls
first when every segment is deletable), nothing at or above the high watermark goes, and
the log start offset moves to the log end offset when everything expired."""

from __future__ import annotations

import os

from spec import build_batch, parse_batches

from odradek.storage import LogConfig, LogManager, TopicPartition

TP = TopicPartition("idle", 0)
DAY = 86_400_000
NOW = 1_700_000_000_000


def started(path, cfg: LogConfig) -> LogManager:
    lm = LogManager([str(path)], cfg)
    lm.startup()
    return lm


def write_old_records(lm: LogManager, count: int = 5) -> None:
    """``count`` records two days old, all in the one (active) segment."""
    log = lm.get_or_create_log(TP)
    for i in range(count):
        log.append(build_batch([(b"k", b"v%d" % i, NOW - 2 * DAY)]), leader_epoch=0, now_ms=NOW)
    assert len(log.segments) == 1


def test_time_retention_empties_a_single_segment_of_old_records(tmp_path) -> None:
    cfg = LogConfig(retention_ms=DAY, file_delete_delay_ms=1000)
    lm = started(tmp_path, cfg)
    write_old_records(lm)
    log = lm.get_or_create_log(TP)
    old = log.active

    assert lm.cleanup_logs(now_ms=NOW - DAY) == 0  # one day old then: within retention.ms
    assert log.log_start_offset == 0
    assert lm.cleanup_logs(now_ms=NOW) == 1
    assert (log.log_start_offset, log.log_end_offset) == (5, 5)
    assert [s.base_offset for s in log.segments] == [5] and log.active.size == 0
    assert log.read(5, 1 << 20).size == 0
    assert sorted(p.name for p in log.dir.glob("*.deleted")) == sorted(
        p.name + ".deleted" for p in old.files()
    )
    log.remove_deleted_files(NOW + 1000)
    assert not list(log.dir.glob("*.deleted"))
    assert lm.cleanup_logs(now_ms=NOW + DAY) == 0  # the empty active segment stays

    info = log.append(build_batch([(b"k", b"new", NOW)]), leader_epoch=0, now_ms=NOW)
    assert info.first_offset == 5
    lm.shutdown()
    lm = started(tmp_path, cfg)
    log = lm.get_or_create_log(TP)
    assert (log.log_start_offset, log.log_end_offset) == (5, 6)
    (batch,) = parse_batches(log.read(5, 1 << 20).regions[0].read_bytes())
    assert [(r.offset, r.value) for r in batch.records] == [(5, b"new")]
    lm.shutdown()


def test_nothing_at_or_above_the_high_watermark_is_deleted(tmp_path) -> None:
    lm = started(tmp_path, LogConfig(retention_ms=DAY, segment_bytes=200))
    write_old_records(lm, count=1)
    log = lm.get_or_create_log(TP)
    for _ in range(3):  # each in a segment of its own
        log.append(build_batch([(b"k", b"w" * 150, NOW - 2 * DAY)]), leader_epoch=0, now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [0, 1, 2, 3]
    lm.high_watermark = lambda tp: 2
    assert lm.cleanup_logs(now_ms=NOW) == 2  # [0, 1) and [1, 2) end at or below it
    assert log.log_start_offset == 2
    lm.high_watermark = lambda tp: 3
    assert lm.cleanup_logs(now_ms=NOW) == 1
    assert (log.log_start_offset, [s.base_offset for s in log.segments]) == (3, [3])
    lm.high_watermark = lambda tp: 4
    assert lm.cleanup_logs(now_ms=NOW) == 1
    assert (log.log_start_offset, [s.base_offset for s in log.segments]) == (4, [4])
    lm.shutdown()


def test_size_retention_counts_the_active_segment(tmp_path) -> None:
    lm = started(tmp_path, LogConfig(retention_bytes=0))
    write_old_records(lm, count=3)
    log = lm.get_or_create_log(TP)
    assert lm.cleanup_logs(now_ms=NOW) == 1
    assert (log.log_start_offset, log.log_end_offset, log.size_in_bytes) == (3, 3, 0)
    lm.shutdown()


def test_a_segment_without_timestamps_expires_by_its_file_time(tmp_path) -> None:
    lm = started(tmp_path, LogConfig(retention_ms=DAY))
    log = lm.get_or_create_log(TP)
    log.append(build_batch([(b"k", b"v", -1)]), leader_epoch=0, now_ms=NOW)
    assert log.active.max_timestamp == -1  # NO_TIMESTAMP: the file's mtime decides, as Kafka
    seconds = (NOW - DAY // 2) / 1000
    os.utime(log.active.path, (seconds, seconds))
    assert lm.cleanup_logs(now_ms=NOW) == 0
    seconds = (NOW - 2 * DAY) / 1000
    os.utime(log.active.path, (seconds, seconds))
    assert lm.cleanup_logs(now_ms=NOW) == 1
    assert log.log_start_offset == log.log_end_offset == 1
    lm.shutdown()


def test_compacted_topics_keep_their_active_segment(tmp_path) -> None:
    lm = started(tmp_path, LogConfig(retention_ms=DAY, cleanup_policy=("compact",)))
    write_old_records(lm)
    assert lm.cleanup_logs(now_ms=NOW) == 0
    assert lm.get_or_create_log(TP).log_start_offset == 0
    lm.shutdown()
