"""Append and recovery paths that the common cases do not reach: several batches of one
idempotent producer in a request and its retry, blocks reserved ahead of the writes, and
recovery reading a segment in chunks smaller than its batches."""

from __future__ import annotations

import os

import pytest
from spec import build_batch, parse_batches

from odradek.storage import Log, LogConfig, errors, segment

NOW = 1_700_000_000_000


def producer_batch(seq: int, n: int, pid: int = 7) -> bytes:
    return build_batch(
        [(b"k", b"v%d" % i, NOW) for i in range(n)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
    )


def test_a_retried_multi_batch_request_gets_its_original_offsets(tmp_path) -> None:
    log = Log(tmp_path / "t-0", LogConfig())
    log.append(
        build_batch([(b"k", b"other", NOW)]), leader_epoch=0, now_ms=NOW
    )  # offset 0, no producer id
    request = producer_batch(0, 2) + producer_batch(2, 3)  # sequences 0-1 and 2-4 in one request
    first = log.append(request, leader_epoch=0, now_ms=NOW)
    assert (first.first_offset, first.last_offset, first.duplicate) == (1, 5, False)
    retry = log.append(request, leader_epoch=0, now_ms=NOW)
    assert (retry.first_offset, retry.last_offset, retry.duplicate) == (1, 5, True)
    assert log.log_end_offset == 6
    assert log.append(producer_batch(5, 1), leader_epoch=0, now_ms=NOW).first_offset == 6


def test_a_request_mixing_a_duplicate_and_a_new_batch_is_out_of_sequence(tmp_path) -> None:
    log = Log(tmp_path / "t-0", LogConfig())
    log.append(producer_batch(0, 2), leader_epoch=0, now_ms=NOW)
    with pytest.raises(errors.OutOfOrderSequence):
        log.append(producer_batch(0, 2) + producer_batch(2, 1), leader_epoch=0, now_ms=NOW)
    assert log.log_end_offset == 2
    assert log.append(producer_batch(2, 1), leader_epoch=0, now_ms=NOW).first_offset == 2


def _allocated(path) -> int:
    return os.stat(path).st_blocks * 512


def test_blocks_reserved_ahead_of_writes_are_invisible_and_given_back(tmp_path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=64 << 20))
    batch = build_batch([(b"k", b"x" * 1000, NOW)] * 16)
    while log.active.size < segment.PREALLOCATE_FROM + len(batch):
        log.append(batch, leader_epoch=0, now_ms=NOW)
    seg = log.active
    assert os.stat(seg.path).st_size == seg.size  # readers and recovery see only the data
    if _allocated(seg.path) < seg.size + segment.PREALLOCATE_FROM // 2:
        pytest.skip("the file system does not reserve blocks with fallocate")
    log.roll(NOW)
    assert os.stat(seg.path).st_size == seg.size
    assert _allocated(seg.path) < seg.size + 64 * 1024  # the reservation went back at the roll
    active = log.active
    while active.size < segment.PREALLOCATE_FROM + len(batch):
        log.append(batch, leader_epoch=0, now_ms=NOW)
    assert _allocated(active.path) >= active.size + segment.PREALLOCATE_FROM // 2
    log.close()
    assert _allocated(active.path) < active.size + 64 * 1024  # and at close


def test_a_crash_with_blocks_reserved_recovers_only_the_data(tmp_path) -> None:
    cfg = LogConfig(segment_bytes=64 << 20)
    log = Log(tmp_path / "t-0", cfg)
    batch = build_batch([(b"k", b"x" * 1000, NOW)] * 16)
    while log.active.size < segment.PREALLOCATE_FROM * 2:
        log.append(batch, leader_epoch=0, now_ms=NOW)
    leo = log.log_end_offset
    del log  # no close: the reservation stays
    reopened = Log(tmp_path / "t-0", cfg, clean_shutdown=False)
    assert reopened.log_end_offset == leo
    assert reopened.append(batch, leader_epoch=0, now_ms=NOW).first_offset == leo
    reopened.close()


def test_recovery_in_chunks_smaller_than_batches_rebuilds_the_same_indexes(
    tmp_path, monkeypatch
) -> None:
    cfg = LogConfig(index_interval_bytes=3000)
    log = Log(tmp_path / "t-0", cfg)
    sizes = [
        1,
        40,
        3,
        120,
        7,
        2,
        90,
        1,
        15,
        60,
    ] * 3  # values of 100 bytes: batches from ~170 B to ~12 KB
    for i, n in enumerate(sizes):
        log.append(
            build_batch([(b"k%d" % i, b"v" * 100, NOW + i)] * n), leader_epoch=0, now_ms=NOW + 100
        )
    seg = log.active
    written = (
        list(seg.offset_index.keys),
        list(seg.offset_index.values),
        list(seg.time_index.keys),
        list(seg.time_index.values),
    )
    data = b"".join(r.read_bytes() for r in log.read(0, 1 << 30).regions)
    size = seg.size
    del log  # crash
    with open(seg.path, "ab") as f:
        f.write(data[:500])  # and a torn batch at the end
    monkeypatch.setattr(
        segment, "RECOVERY_CHUNK", 4096
    )  # most batches span chunks, some exceed one
    reopened = Log(tmp_path / "t-0", cfg, clean_shutdown=False)
    rebuilt = reopened.active
    assert rebuilt.size == size
    assert (
        rebuilt.offset_index.keys,
        rebuilt.offset_index.values,
        rebuilt.time_index.keys,
        rebuilt.time_index.values,
    ) == written
    served = b"".join(r.read_bytes() for r in reopened.read(0, 1 << 30).regions)
    assert served == data
    assert [b.base_offset for b in parse_batches(served)][-1] == reopened.log_end_offset - sizes[-1]
    reopened.close()


def test_blocks_a_crash_left_reserved_are_given_back_at_the_next_roll(tmp_path) -> None:
    cfg = LogConfig(segment_bytes=64 << 20)
    log = Log(tmp_path / "t-0", cfg)
    batch = build_batch([(b"k", b"x" * 1000, NOW)] * 16)
    while log.active.size < segment.PREALLOCATE_FROM + len(batch):
        log.append(batch, leader_epoch=0, now_ms=NOW)
    path = log.active.path
    if _allocated(path) < os.stat(path).st_size + segment.PREALLOCATE_FROM // 2:
        pytest.skip("the file system does not reserve blocks with fallocate")
    del log  # crash with blocks reserved
    reopened = Log(tmp_path / "t-0", cfg, clean_shutdown=False)
    reopened.roll(NOW)
    assert _allocated(path) < os.stat(path).st_size + 64 * 1024
    reopened.close()
