"""Crash tests: torn and overwritten tails, lost indexes, a writer killed with SIGKILL."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spec import build_batch, parse_batches

from odradek.storage import Log, LogConfig, LogManager, TopicPartition

CFG = LogConfig(segment_bytes=2000, index_interval_bytes=100)


def fill(path: Path, batches: int, cfg: LogConfig = CFG) -> tuple[Log, list[tuple[int, int]]]:
    """A log of ``batches`` batches; returns it (not closed: as if the process died) and (offset, size) of each."""
    log = Log(path, cfg)
    out = []
    for i in range(batches):
        blob = build_batch([(b"k%d" % i, b"v" * (i % 50 + 1), 1000 + i), (None, b"x", 1000 + i)])
        info = log.append(blob, leader_epoch=0, now_ms=0)
        out.append((info.first_offset, len(blob)))
    return log, out


def check_log(log: Log, dense: bool = True) -> list:
    """Offsets dense from the log start (or, with ``dense=False``, strictly increasing and
    below the log end offset), every served batch passes its CRC (parse_batches asserts it)."""
    info = log.read(log.log_start_offset, 1 << 30)
    batches = parse_batches(b"".join(r.read_bytes() for r in info.regions))
    offsets = [r.offset for b in batches for r in b.records]
    if dense:
        assert offsets == list(range(log.log_start_offset, log.log_end_offset))
    else:
        assert offsets == sorted(set(offsets)) and all(o >= log.log_start_offset for o in offsets)
        assert (
            offsets[-1:] == [log.log_end_offset - 1] or log.log_end_offset == log.log_start_offset
        )
    return batches


def damages_only_a_base_offset(
    written: list[tuple[int, int]], segment_base: int, start: int, end: int
) -> bool:
    """Whether bytes [start, end) of the segment starting at ``segment_base`` lie inside one
    batch's baseOffset field: the one field recovery cannot check, since the CRC does not
    cover it and compacted or follower logs may legally skip offsets (Kafka's recovery
    accepts such a batch too). A jump forward there moves the offsets of the batch."""
    position = 0
    for offset, size in written:
        if offset < segment_base:
            continue
        if position <= start and end <= position + 8:
            return True
        position += size
    return False


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 40),
    st.floats(0, 1),
    st.sampled_from(["truncate", "overwrite", "zeros"]),
    st.binary(min_size=1, max_size=64),
)
def test_damaged_tail_is_cut_and_nothing_before_is_lost(batches, where, how, garbage):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t-0"
        log, written = fill(path, batches)
        last = log.active
        damage_at = int(where * last.size)
        del log  # crash: no close, no flush
        with open(last.path, "r+b") as f:
            if how == "truncate":
                f.truncate(damage_at)
            elif how == "overwrite":
                f.seek(damage_at)
                f.write(garbage)
            else:
                f.seek(damage_at)
                f.write(b"\0" * len(garbage))
        reopened = Log(path, CFG, clean_shutdown=False)
        dense = how != "overwrite" or not damages_only_a_base_offset(
            written, last.base_offset, damage_at, damage_at + len(garbage)
        )
        check_log(reopened, dense)
        # every batch that ended before the damage survives
        intact_end = last.base_offset
        position = 0
        for offset, size in written:
            if offset < last.base_offset:
                continue
            if position + size <= damage_at:
                intact_end = offset + 2
            position += size
        assert reopened.log_end_offset >= intact_end
        if dense:
            assert reopened.log_end_offset <= written[-1][0] + 2
        # the log accepts appends after recovery
        info = reopened.append(build_batch([(b"a", b"b", 1)]), leader_epoch=0, now_ms=0)
        assert info.first_offset == reopened.log_end_offset - 1
        check_log(reopened, dense)
        reopened.close()


def test_corrupt_middle_segment_drops_later_segments(tmp_path):
    path = tmp_path / "t-0"
    log, _ = fill(path, 60)
    assert len(log.segments) >= 3
    middle = log.segments[1]
    with open(middle.path, "r+b") as f:
        f.seek(middle.size // 2)
        f.write(b"\xff" * 8)
    reopened = Log(path, CFG, clean_shutdown=False)
    check_log(reopened)
    assert middle.base_offset < reopened.log_end_offset < log.segments[2].base_offset + 1
    assert len(reopened.segments) == 2


@pytest.mark.parametrize("damage", ["delete", "garbage"])
def test_missing_or_corrupt_indexes_are_rebuilt(tmp_path, damage):
    path = tmp_path / "t-0"
    log, _ = fill(path, 80)
    expected = [b.base_offset for b in check_log(log)]
    by_time = {t: log.fetch_offset_by_timestamp(t) for t in (1000, 1030, 1079, 5000)}
    log.close()
    for index in list(path.glob("*.index")) + list(path.glob("*.timeindex")):
        if damage == "delete":
            index.unlink()
        else:
            index.write_bytes(
                b"\x00\x00\x00\x09\x00\x00\x01\x00" + b"\x00\x00\x00\x01\x00\x00\x00\x10"
            )
    reopened = Log(path, CFG, clean_shutdown=True, recovery_point=log.log_end_offset)
    assert [b.base_offset for b in check_log(reopened)] == expected
    for t, found in by_time.items():
        assert reopened.fetch_offset_by_timestamp(t) == found
    for offset in range(0, reopened.log_end_offset, 7):
        first = parse_batches(reopened.read(offset, 1).regions[0].read_bytes())[0]
        assert first.base_offset <= offset < first.base_offset + len(first.records)


def test_recovery_rebuilds_producer_state(tmp_path):
    path = tmp_path / "t-0"
    log = Log(path, CFG)
    for seq in range(0, 10, 2):
        log.append(
            build_batch([(b"k", b"v", 1)] * 2, producer_id=7, producer_epoch=1, base_sequence=seq),
            leader_epoch=0,
            now_ms=0,
        )
    del log  # crash
    reopened = Log(path, CFG, clean_shutdown=False)
    dup = reopened.append(
        build_batch([(b"k", b"v", 1)] * 2, producer_id=7, producer_epoch=1, base_sequence=8),
        leader_epoch=0,
        now_ms=0,
    )
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (8, 9)


WRITER = r"""
import sys
sys.path.insert(0, sys.argv[2])
from spec import build_batch
from odradek.storage import LogConfig, LogManager, TopicPartition
lm = LogManager([sys.argv[1]], LogConfig(segment_bytes=20000, index_interval_bytes=512))
lm.startup()
log = lm.get_or_create_log(TopicPartition("crash", 0))
i = 0
while True:
    n = 1 + i % 5
    info = log.append(build_batch([(b"k%d" % i, b"v" * (i % 300), i)] * n), leader_epoch=0, now_ms=i)
    print(info.last_offset, flush=True)
    i += 1
    if i % 50 == 0:
        lm.checkpoint()
"""


@pytest.mark.parametrize("seed", range(3))
def test_sigkill_writer_loses_nothing_acknowledged(tmp_path, seed):
    rng = random.Random(seed)
    data_dir = tmp_path / "data"
    for _round in range(2):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(data_dir), str(Path(__file__).parent)],
            stdout=subprocess.PIPE,
            text=True,
        )
        acked = -1
        deadline = time.monotonic() + rng.uniform(0.3, 1.2)
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            acked = int(line)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        for line in proc.stdout:  # acknowledged before the kill
            acked = int(line)
        proc.stdout.close()
        assert acked >= 0
        lm = LogManager([str(data_dir)], LogConfig(segment_bytes=20000, index_interval_bytes=512))
        lm.startup()
        log = lm.get_log(TopicPartition("crash", 0))
        assert log is not None
        check_log(log)
        assert log.log_end_offset >= acked + 1
        lm.shutdown()
