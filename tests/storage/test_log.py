"""Log append/read/roll/truncate/offsets-by-time against a simple in-memory model."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spec import build_batch, parse_batches

from odradek.storage import Log, LogConfig, TopicPartition, errors


def read_all(log: Log, start: int, max_bytes: int = 1 << 30, max_offset: int | None = None):
    info = log.read(start, max_bytes, max_offset)
    data = b"".join(r.read_bytes() for r in info.regions)
    assert len(data) == info.size
    return parse_batches(data)


def records_of(batches):
    return [(r.offset, r.key, r.value, r.timestamp) for b in batches for r in b.records]


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


def test_append_assigns_dense_offsets_and_stamps_epoch(log_dir):
    log = Log(log_dir, LogConfig())
    info = log.append(build_batch([(b"a", b"1", 10), (b"b", b"2", 20)]), leader_epoch=7, now_ms=0)
    assert (info.first_offset, info.last_offset, info.record_count, info.max_timestamp) == (
        0,
        1,
        2,
        20,
    )
    info = log.append(build_batch([(b"c", b"3", 30)], base_offset=999), leader_epoch=7, now_ms=0)
    assert (info.first_offset, info.last_offset) == (2, 2)
    batches = read_all(log, 0)
    assert [b.base_offset for b in batches] == [0, 2]
    assert all(b.leader_epoch == 7 for b in batches)
    assert log.leader_epoch_cache.end_offset_for_epoch(7) == (7, 3)


def test_segment_files_are_kafka_layout(log_dir):
    log = Log(log_dir, LogConfig(segment_bytes=200, segment_index_bytes=800))
    for i in range(5):
        log.append(build_batch([(b"k", b"v" * 100, i)]), leader_epoch=0, now_ms=0)
    names = sorted(os.listdir(log_dir))
    assert "00000000000000000000.log" in names and "00000000000000000001.index" in names
    assert (
        log_dir / "00000000000000000004.index"
    ).stat().st_size == 800  # active index preallocated
    assert (log_dir / "00000000000000000000.index").stat().st_size == 8  # trimmed on roll
    assert (log_dir / "00000000000000000000.timeindex").stat().st_size == 12
    log.close()
    assert (log_dir / "00000000000000000004.index").stat().st_size == 8
    # The .log files hold the batches exactly: the spec parser reads them directly.
    parsed = parse_batches((log_dir / "00000000000000000002.log").read_bytes())
    assert [b.base_offset for b in parsed] == [2]


def test_invalid_input_leaves_log_unchanged(log_dir):
    log = Log(log_dir, LogConfig(max_message_bytes=300))
    good = build_batch([(b"k", b"v", 1)])
    bad_crc = bytearray(build_batch([(b"k", b"v", 1)]))
    bad_crc[-1] ^= 0xFF
    old_magic = bytearray(good)
    old_magic[16] = 1
    cases = [
        (good + bytes(bad_crc), errors.CorruptRecord),
        (good + good[:40], errors.CorruptRecord),
        (bytes(old_magic), errors.UnsupportedForMessageFormat),
        (good + build_batch([(b"k", b"v" * 400, 1)]), errors.RecordTooLarge),
        (b"", errors.InvalidRecord),
    ]
    for blob, error in cases:
        with pytest.raises(error) as exc:
            log.append(blob, leader_epoch=0, now_ms=0)
        assert exc.value.error_code == error.error_code
    assert log.log_end_offset == 0 and log.size_in_bytes == 0


def test_read_limits(log_dir):
    log = Log(log_dir, LogConfig(segment_bytes=500, index_interval_bytes=1))
    sizes = []
    for i in range(20):
        blob = build_batch([(b"k", b"x" * (i * 7), i)])
        sizes.append(len(blob))
        log.append(blob, leader_epoch=0, now_ms=0)
    assert len(log.segments) > 3
    # KIP-74: the first batch comes whole even when larger than max_bytes
    first = read_all(log, 10, max_bytes=1)
    assert [b.base_offset for b in first] == [10]
    # Never a partial batch; spans segments.
    info = log.read(3, sum(sizes[3:12]) + 5)
    assert info.size == sum(sizes[3:12])
    assert len(info.regions) > 1
    # Upper bound (high watermark)
    assert [b.base_offset for b in read_all(log, 5, max_offset=8)] == [5, 6, 7]
    assert log.read(8, 100, max_offset=8).size == 0
    assert log.read(20, 100).size == 0
    with pytest.raises(errors.OffsetOutOfRange):
        log.read(21, 100)
    log.maybe_increment_log_start_offset(4)
    with pytest.raises(errors.OffsetOutOfRange):
        log.read(3, 100)
    assert read_all(log, 4, max_bytes=1)[0].base_offset == 4


def test_roll_on_time_and_index_full(log_dir):
    log = Log(
        log_dir,
        LogConfig(segment_ms=1000, segment_index_bytes=24, index_interval_bytes=0),
        now_ms=0,
    )
    log.append(build_batch([(b"k", b"v", 100)]), leader_epoch=0, now_ms=100)
    log.append(build_batch([(b"k", b"v", 200)]), leader_epoch=0, now_ms=500)
    assert len(log.segments) == 1  # two 12-byte entries fill a 24-byte time index
    log.append(build_batch([(b"k", b"v", 600)]), leader_epoch=0, now_ms=600)
    assert len(log.segments) == 2
    log.append(build_batch([(b"k", b"v", 2000)]), leader_epoch=0, now_ms=2000)
    assert [s.base_offset for s in log.segments] == [0, 2, 3]


def test_offsets_by_time(log_dir):
    log = Log(log_dir, LogConfig(segment_bytes=300, index_interval_bytes=1))
    ts = [5, 3, 10, 10, 8, 20, 15, 30]
    for t in ts:
        log.append(build_batch([(b"k", b"v", t), (b"k", b"w", t + 1)]), leader_epoch=0, now_ms=0)
    assert log.fetch_offset_by_timestamp(-2) == (0, -1)
    assert log.fetch_offset_by_timestamp(-1) == (16, -1)
    assert log.fetch_offset_by_timestamp(-3) == (15, 31)
    for target in range(34):
        expected = next(
            ((i * 2 + j, t + j) for i, t in enumerate(ts) for j in (0, 1) if t + j >= target), None
        )
        assert log.fetch_offset_by_timestamp(target) == expected, target
    log.append(
        build_batch([(b"k", b"v", 31), (b"k", b"w", 50), (b"k", b"w", 7)]), leader_epoch=0, now_ms=0
    )
    assert log.fetch_offset_by_timestamp(-3) == (17, 50)  # the record, not the batch's last offset


def test_log_append_time(log_dir):
    log = Log(log_dir, LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append(build_batch([(b"k", b"v", 5)]), leader_epoch=0, now_ms=777)
    assert info.log_append_time_ms == 777
    (batch,) = read_all(log, 0)  # parse_batches checks the new CRC
    assert batch.max_timestamp == 777 and batch.attributes & 0x08


def test_follower_append_keeps_offsets(log_dir):
    log = Log(log_dir, LogConfig())
    blob = build_batch([(b"k", b"v", 1)], base_offset=0, leader_epoch=2) + build_batch(
        [(b"k", b"v", 1)], base_offset=1, leader_epoch=3
    )
    info = log.append(blob, leader_epoch=0, now_ms=0, assign_offsets=False)
    assert (info.first_offset, info.last_offset) == (0, 1)
    assert log.leader_epoch_cache.entries == [(2, 0), (3, 1)]
    with pytest.raises(errors.InvalidRecord):
        log.append(
            build_batch([(b"k", b"v", 1)], base_offset=1),
            leader_epoch=0,
            now_ms=0,
            assign_offsets=False,
        )


def test_truncate_fully_and_start_at(log_dir):
    log = Log(log_dir, LogConfig(segment_bytes=200))
    for _ in range(5):
        log.append(build_batch([(b"k", b"v" * 100, 1)]), leader_epoch=0, now_ms=0)
    log.truncate_fully_and_start_at(42)
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (42, 42, 1)
    assert log.append(build_batch([(b"k", b"v", 1)]), leader_epoch=0, now_ms=0).first_offset == 42
    assert sorted(p.name for p in log_dir.glob("*.log")) == ["00000000000000000042.log"]


def test_truncation_into_a_compaction_gap_ends_the_log_at_the_target(log_dir):
    # A follower's copy of a compacted log: offsets 2-5 are gone. The leader's epoch boundary
    # at 4 lies in the gap; the log must end at 4 (Kafka's truncateTo), not at 2, so that the
    # next fetch asks from 4 and the leader's batch at 4 appends.
    log = Log(log_dir, LogConfig())
    for base in (0, 6):
        blob = build_batch([(b"k", b"v", 1), (b"k", b"w", 1)], base_offset=base)
        log.append(blob, leader_epoch=0, now_ms=0, assign_offsets=False)
    log.truncate_to(4)
    assert log.log_end_offset == 4
    log.append(
        build_batch([(b"k", b"x", 1)], base_offset=4),
        leader_epoch=1,
        now_ms=0,
        assign_offsets=False,
    )
    assert [(r.offset, r.value) for r in records_of_batches(read_all(log, 0, 10_000))] == [
        (0, b"v"),
        (1, b"w"),
        (4, b"x"),
    ]


def test_truncation_to_the_log_end_still_trims_the_epoch_cache(log_dir):
    # A leader that started epoch 3 at offset 2 and died before appending: its follower
    # truncation to 2 removes that entry, as Kafka does, or the cache would claim epoch 3.
    log = Log(log_dir, LogConfig())
    log.append(build_batch([(b"k", b"v", 1), (b"k", b"w", 1)]), leader_epoch=2, now_ms=0)
    log.leader_epoch_cache.assign(3, 2)
    log.truncate_to(2)
    assert log.leader_epoch_cache.latest_epoch == 2


def test_topic_partition_dir_name():
    assert TopicPartition.from_dir_name("my-topic-12") == TopicPartition("my-topic", 12)
    assert TopicPartition("a-b", 3).dir_name == "a-b-3"


# -- property test against a model --------------------------------------------------

ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("append"),
            st.lists(st.integers(1, 4), min_size=1, max_size=3),
            st.integers(0, 150),
            st.integers(0, 1000),
        ),
        st.tuples(st.just("read"), st.integers(0, 60), st.integers(1, 800)),
        st.tuples(st.just("truncate"), st.integers(0, 60)),
        st.tuples(st.just("start"), st.integers(0, 60)),
        st.tuples(st.just("reopen"), st.booleans()),
        st.tuples(st.just("retention"), st.integers(0, 2000)),
    ),
    max_size=30,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops)
def test_log_matches_model(operations):
    cfg = LogConfig(
        segment_bytes=400,
        index_interval_bytes=64,
        segment_index_bytes=64,
        retention_bytes=600,
        file_delete_delay_ms=0,
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t-0"
        log = Log(path, cfg)
        model: list[tuple[int, bytes]] = []  # (offset, value) of every record still in the log
        batches: list[tuple[int, int]] = []  # (first, last offset) of every batch appended
        for op in operations:
            kind = op[0]
            if kind == "append":
                _, counts, size, ts = op
                values = [
                    [bytes([len(model) % 256]) * size + b"%d.%d" % (j, i) for i in range(n)]
                    for j, n in enumerate(counts)
                ]
                blob = b"".join(build_batch([(None, v, ts) for v in vs]) for vs in values)
                leo = log.log_end_offset
                info = log.append(blob, leader_epoch=1, now_ms=ts)
                offset = info.first_offset
                assert offset == leo and info.last_offset == leo + sum(counts) - 1
                for vs in values:
                    batches.append((offset, offset + len(vs) - 1))
                    for v in vs:
                        model.append((offset, v))
                        offset += 1
            elif kind == "read":
                _, at, max_bytes = op
                leo = log.log_end_offset
                if at < log.log_start_offset or at > leo:
                    with pytest.raises(errors.OffsetOutOfRange):
                        log.read(at, max_bytes)
                    continue
                got = [
                    (r.offset, r.value) for r in records_of_batches(read_all(log, at, max_bytes))
                ]
                expected = [m for m in model if m[0] >= at]
                if got:
                    # whole batches from the one holding `at`, even when that batch starts below
                    # the log start offset (Kafka returns it whole; the client skips the rest)
                    first_batch = next(first for first, last in batches if last >= at)
                    assert got[0][0] == first_batch
                    assert [g for g in got if g[0] >= at] == expected[
                        : len([g for g in got if g[0] >= at])
                    ]
                else:
                    assert not expected
            elif kind == "truncate":
                target = op[1]
                if target < log.log_start_offset:
                    continue
                before = log.log_end_offset
                log.truncate_to(target)
                leo = log.log_end_offset
                if target >= before:
                    assert leo == before
                    continue
                # Kafka's rule: the log ends at `target`, whatever the cut kept; the cut is
                # made at the start of the batch holding `target`
                assert leo == target
                cut = next((first for first, last in batches if last >= target), target)
                model = [m for m in model if m[0] < cut]
                batches = [b for b in batches if b[0] < cut]
            elif kind == "start":
                target = min(op[1], log.log_end_offset)
                log.maybe_increment_log_start_offset(target)
                model = [m for m in model if m[0] >= log.log_start_offset]
            elif kind == "reopen":
                log.close()
                log = Log(
                    path,
                    cfg,
                    log_start_offset=log.log_start_offset,
                    recovery_point=log.recovery_point,
                    clean_shutdown=op[1],
                )
            elif kind == "retention":
                log.delete_old_segments(op[1])
                log.remove_deleted_files(op[1])
                assert (
                    log.size_in_bytes - log.active.size <= 600
                    or len(log.segments) == 1
                    or log.size_in_bytes - log.segments[0].size < 600
                )
                model = [m for m in model if m[0] >= log.log_start_offset]
            # invariants
            # (a truncation ends the log at its target, beyond the batches it kept)
            assert log.log_end_offset >= (model[-1][0] + 1 if model else log.log_start_offset)
            if log.log_end_offset > log.log_start_offset:
                everything = records_of_batches(read_all(log, log.log_start_offset))
                offsets = [r.offset for r in everything]
                assert offsets == sorted(set(offsets))
                assert [
                    (r.offset, r.value) for r in everything if r.offset >= log.log_start_offset
                ] == model
        log.close()


def records_of_batches(batches):
    return [r for b in batches for r in b.records]


@pytest.mark.parametrize("leader_records", [1, 0])
def test_a_follower_batch_beyond_int32_of_the_active_segment_starts_a_segment_at_its_offset(
    log_dir, leader_records
):
    """Kafka's maybeRoll: the new segment starts at the batch's first offset (not the log end
    offset), so the batch's offsets fit relative to its base; an empty active segment too."""
    log = Log(log_dir, LogConfig())
    if leader_records:
        log.append(build_batch([(b"k", b"v", 1)]), leader_epoch=0, now_ms=10, assign_offsets=False)
    far = 2**31 + 10
    log.append(
        build_batch([(b"k", b"w", 2)], base_offset=far),
        leader_epoch=0,
        now_ms=10,
        assign_offsets=False,
    )
    assert [s.base_offset for s in log.segments][-1] == far and log.log_end_offset == far + 1
    assert [
        b.base_offset
        for b in parse_batches(b"".join(r.read_bytes() for r in log.read(0, 1 << 20).regions))
    ] == ([0] * leader_records + [far])
    assert log.active.offset_index.lookup(far) == (far, 0)
    log.close()
    reopened = Log(log_dir, LogConfig())
    assert reopened.log_end_offset == far + 1
    assert [
        b.base_offset for b in parse_batches(reopened.read(far, 1 << 20).regions[0].read_bytes())
    ] == [far]


def test_a_region_read_before_its_segment_is_deleted_stays_readable_until_file_delete_delay(
    log_dir,
):
    """A fetch sends its FileRegions across event loop turns; retention (or cleaning) may retire
    the segment in between. As in Kafka, the .deleted file stays open and readable until
    file.delete.delay.ms, so the fetch sends the bytes it was given and not those of whatever
    file reuses a closed descriptor."""
    log = Log(log_dir, LogConfig(segment_bytes=200, retention_bytes=1, file_delete_delay_ms=1000))
    first = build_batch([(b"k", b"v" * 150, 1)])
    log.append(first, leader_epoch=0, now_ms=10)
    log.append(build_batch([(b"k", b"w" * 150, 2)]), leader_epoch=0, now_ms=10)
    (region,) = log.read(0, 1 << 20, max_offset=1).regions
    assert log.delete_old_segments(now_ms=20) == 1
    others = [
        open(log_dir / f"other-{i}", "wb+") for i in range(4)
    ]  # would take a freed descriptor
    try:
        (batch,) = parse_batches(region.read_bytes())
        assert batch.base_offset == 0 and batch.records[0].value == b"v" * 150
        assert sorted(p.name for p in log_dir.glob("*.deleted")) == [
            "00000000000000000000.index.deleted",
            "00000000000000000000.log.deleted",
            "00000000000000000000.timeindex.deleted",
        ]
        log.remove_deleted_files(now_ms=20 + 1000)
        assert region.file.closed and not list(log_dir.glob("*.deleted"))
    finally:
        for f in others:
            f.close()
    log.close()
