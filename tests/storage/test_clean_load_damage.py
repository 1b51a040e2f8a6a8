"""A segment damaged after a CLEAN shutdown: the fast load checks every header it reads and
falls back to recovery, so the log starts, serves every record written before the damage,
and takes new writes that survive the next restart."""

from __future__ import annotations

import logging
import random
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spec import build_batch, parse_batches

from odradek.storage import Log, LogConfig, LogManager, TopicPartition

NOW = 1_700_000_000_000
CFG = LogConfig(segment_bytes=800, index_interval_bytes=200)
HEADER_SIZE = 61


def written_log(path: Path, batches: int = 30) -> tuple[list[tuple[bytes, int]], Log]:
    """A log of ``batches`` one-record batches over several segments, closed cleanly;
    (value, offset) of each record and the closed log (its segments name the files)."""
    log = Log(path, CFG, now_ms=NOW)
    records = []
    for i in range(batches):
        value = b"value-%d-" % i + b"x" * (i % 7)
        info = log.append(build_batch([(b"k", value, NOW + i)]), leader_epoch=0, now_ms=NOW)
        records.append((value, info.first_offset))
    log.close()
    return records, log


def served(log: Log) -> list[tuple[bytes, int]]:
    """(value, offset) of every record the log serves from its start."""
    info = log.read(log.log_start_offset, 1 << 30)
    data = b"".join(region.read_bytes() for region in info.regions)
    return [(r.value, r.offset) for b in parse_batches(data) for r in b.records]


def reopen(path: Path, leo: int) -> Log:
    """The log as a broker loads it after a clean shutdown (the recovery point is the LEO)."""
    return Log(path, CFG, clean_shutdown=True, recovery_point=leo, now_ms=NOW)


def header(
    *,
    base_offset: int,
    length: int,
    magic: int = 2,
    last_offset_delta: int = 0,
    epoch: int = 0,
    max_timestamp: int = NOW,
) -> bytes:
    """A v2 batch header with the given fields (CRC and the rest zero)."""
    return struct.pack(
        ">qiibIhiqqqhii",
        base_offset,
        length,
        epoch,
        magic,
        0,
        0,
        last_offset_delta,
        NOW,
        max_timestamp,
        -1,
        -1,
        -1,
        1,
    )


def check_survives(path: Path, records: list[tuple[bytes, int]], loaded: Log) -> None:
    """``loaded`` serves ``records``, takes a new write, and both survive a clean and then an
    unclean restart."""
    assert served(loaded) == records
    info = loaded.append(build_batch([(b"k", b"after", NOW)]), leader_epoch=0, now_ms=NOW)
    assert info.first_offset == records[-1][1] + 1
    expected = records + [(b"after", info.first_offset)]
    leo = loaded.log_end_offset
    loaded.close()
    again = reopen(path, leo)
    assert served(again) == expected
    again.append(build_batch([(b"k", b"later", NOW)]), leader_epoch=0, now_ms=NOW)
    del again  # a crash this time
    crashed = Log(path, CFG, clean_shutdown=False, recovery_point=leo, now_ms=NOW)
    assert served(crashed) == expected + [(b"later", leo)]
    crashed.close()


@pytest.mark.parametrize("length", [-12, 0, 2**31 - 1, 48, -(2**31)])
def test_a_hostile_last_batch_length_after_a_clean_shutdown_is_cut(tmp_path, caplog, length):
    """Regression: -12 spun start-up forever, 0 gave a phantom offset past the last batch."""
    path = tmp_path / "t-0"
    records, closed = written_log(path)
    segment = closed.active.path
    size = segment.stat().st_size
    with open(segment, "ab") as f:
        f.write(header(base_offset=records[-1][1] + 1, length=length))
    with caplog.at_level(logging.WARNING):
        loaded = reopen(path, closed.log_end_offset)
    assert loaded.log_end_offset == closed.log_end_offset
    assert segment.stat().st_size == size
    # the file, the position and what was wrong are named
    assert any(
        str(segment) in m and f"position {size}" in m and f"batchLength {length}" in m
        for m in caplog.messages
    )
    check_survives(path, records, loaded)


@pytest.mark.parametrize("seed", range(12))
def test_random_bytes_after_the_last_batch_are_cut(tmp_path, seed):
    """Regression: half of these seeds stopped start-up with "[Errno 22] Invalid argument"."""
    path = tmp_path / "t-0"
    records, closed = written_log(path)
    rng = random.Random(seed)
    with open(closed.active.path, "ab") as f:
        f.write(rng.randbytes(rng.randrange(1, 300)))
    check_survives(path, records, reopen(path, closed.log_end_offset))


def test_damage_after_a_middle_segment_keeps_the_later_segments(tmp_path, caplog):
    path = tmp_path / "t-0"
    records, closed = written_log(path)
    assert len(closed.segments) >= 3
    middle = closed.segments[1].path
    with open(middle, "ab") as f:
        f.write(header(base_offset=closed.segments[2].base_offset, length=0))
    with caplog.at_level(logging.WARNING):
        loaded = reopen(path, closed.log_end_offset)
    assert [s.base_offset for s in loaded.segments] == [s.base_offset for s in closed.segments]
    assert any(str(middle) in m and "truncating 61 bytes" in m for m in caplog.messages)
    check_survives(path, records, loaded)


def test_an_index_entry_past_the_end_of_the_file_is_rebuilt(tmp_path):
    path = tmp_path / "t-0"
    records, closed = written_log(path)
    first = closed.segments[0]
    assert first.offset_index.values[-1] > 0
    with open(first.path, "r+b") as f:  # the data lost its tail; the index still names it
        f.truncate(first.offset_index.values[-1] - 1)
    loaded = reopen(path, closed.log_end_offset)
    survivors = served(loaded)
    assert survivors == records[: len(survivors)]
    assert loaded.log_end_offset == (survivors[-1][1] + 1 if survivors else 0)
    loaded.close()


_fields = st.fixed_dictionaries(
    {
        "base_offset": st.one_of(
            st.sampled_from([0, 5, 29, 30, 31, 2**31, 2**62, 2**63 - 1, -1, -(2**63)]),
            st.integers(-(2**63), 2**63 - 1),
        ),
        "length": st.one_of(
            st.sampled_from([-12, -1, 0, 1, 48, 49, 50, 2**31 - 1, -(2**31)]),
            st.integers(-(2**31), 2**31 - 1),
        ),
        "magic": st.sampled_from([2, 0, 1, 3, -1]),
        "last_offset_delta": st.sampled_from([0, -1, 1, 2**31 - 1, -(2**31)]),
        "epoch": st.integers(-(2**31), 2**31 - 1),
        "max_timestamp": st.sampled_from([NOW, -1, 2**63 - 1, -(2**63)]),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fields=_fields, after=st.binary(max_size=200))
def test_any_hostile_header_after_a_clean_shutdown(fields, after):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t-0"
        records, closed = written_log(path, batches=12)
        with open(closed.active.path, "ab") as f:
            f.write(header(**fields) + after)
        check_survives(path, records, reopen(path, closed.log_end_offset))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tail=st.binary(min_size=1, max_size=400), which=st.integers(0, 10))
def test_any_bytes_after_a_segment_after_a_clean_shutdown(tail, which):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t-0"
        records, closed = written_log(path, batches=12)
        segment = closed.segments[which % len(closed.segments)]
        with open(segment.path, "ab") as f:
            f.write(tail)
        check_survives(path, records, reopen(path, closed.log_end_offset))


def test_one_damaged_partition_leaves_the_others_and_the_dir_online(tmp_path):
    config = LogConfig()
    lm = LogManager([str(tmp_path)], config)
    lm.startup()
    damaged, healthy = TopicPartition("t", 0), TopicPartition("t", 1)
    for lg in lm.get_or_create_logs([damaged, healthy]):
        lg.append(build_batch([(b"k", b"v", NOW)]), leader_epoch=0, now_ms=NOW)
    lm.shutdown()
    with open(tmp_path / "t-0" / "00000000000000000000.log", "ab") as f:
        f.write(header(base_offset=1, length=-12))

    lm = LogManager([str(tmp_path)], config)
    lm.startup()
    assert lm.offline_dirs == set()
    for tp in (damaged, healthy):
        lg = lm.get_log(tp)
        assert lg is not None and not lg.offline
        assert served(lg) == [(b"v", 0)]
    lm.shutdown()


def test_a_new_log_dir_is_not_an_unclean_shutdown(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="odradek.storage.log_manager"):
        lm = LogManager([str(tmp_path / "new")], LogConfig())
        lm.startup()
    lm.shutdown()
    assert not any("unclean" in m for m in caplog.messages)
    assert any("holds no partitions" in m for m in caplog.messages)


@pytest.mark.parametrize("content", [b"0\n1\nzz top\n", b"0\n3\n0 0\n", b"\xff\xfe", b"7\n"])
def test_a_corrupt_leader_epoch_checkpoint_is_rebuilt_from_the_batches(tmp_path, content):
    """Regression: a leader-epoch-checkpoint that is not two integers per line stopped the
    broker with a ValueError. The epochs are in the batches: the partition is recovered."""
    path = tmp_path / "t-0"
    log = Log(path, CFG, now_ms=NOW)
    log.leader_epoch_cache.assign(3, 0)
    log.append(build_batch([(b"k", b"v", NOW)]), leader_epoch=3, now_ms=NOW)
    log.leader_epoch_cache.assign(5, 1)
    log.append(build_batch([(b"k", b"w", NOW)]), leader_epoch=5, now_ms=NOW)
    log.close()
    (path / "leader-epoch-checkpoint").write_bytes(content)
    loaded = reopen(path, 2)
    assert loaded.leader_epoch_cache.entries == [(3, 0), (5, 1)]
    assert (path / "leader-epoch-checkpoint").read_text() == "0\n2\n3 0\n5 1\n"
    assert served(loaded) == [(b"v", 0), (b"w", 1)]
    loaded.close()


def test_rebuilds_and_deletions_are_logged_with_their_byte_counts(tmp_path, caplog):
    path = tmp_path / "t-0"
    records, closed = written_log(path)
    first, second, third = closed.segments[:3]
    first.offset_index.path.unlink()
    with open(second.path, "r+b") as f:  # a batch inside the second segment loses its length
        f.seek(second.offset_index.values[-1] + 8)
        f.write(struct.pack(">i", -12))
    with caplog.at_level(logging.WARNING):
        loaded = reopen(path, closed.log_end_offset)
    assert any(
        str(first.path) in m and f"rebuilding them from {first.size} bytes" in m
        for m in caplog.messages
    )
    assert any(
        "t-0" in m and third.path.name in m and f"({third.size} bytes)" in m
        for m in caplog.messages
    )
    assert any(str(second.path) in m and "truncating" in m for m in caplog.messages)
    survivors = served(loaded)
    assert survivors == records[: len(survivors)] and len(survivors) >= second.base_offset
    loaded.close()
