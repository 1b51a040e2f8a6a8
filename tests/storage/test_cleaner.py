"""LogCleaner cases one at a time: compressed keys, KIP-534 delete horizons, control batches,
idempotent producers' empty batches, partial cleaning, bounded memory, the per-dir
cleaner-offset-checkpoint, and the LogManager running it in the background.
(test_cleaner_model.py checks random histories against a model.)"""

from __future__ import annotations

import asyncio
import random
import struct
import tracemalloc
from pathlib import Path

import pytest
from codec_spec import CODECS, build, parse
from spec import build_batch

from odradek.storage import Log, LogConfig, LogManager, TopicPartition
from odradek.storage.checkpoint import read_offsets, write_checkpoint_lines
from odradek.storage.cleaner import LogCleaner
from odradek.storage.cleaner_checkpoint import CLEANER_OFFSET_CHECKPOINT

CFG = LogConfig(
    cleanup_policy=("compact",),
    segment_bytes=400,
    min_cleanable_dirty_ratio=0.01,
    delete_retention_ms=1000,
    index_interval_bytes=50,
)
NOW = 1_000_000


def served(log: Log):
    return parse(b"".join(r.read_bytes() for r in log.read(log.log_start_offset, 1 << 30).regions))


def records_of(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for b in served(log) for r in b.records]


def clean(log: Log, now: int, cleaner: LogCleaner | None = None) -> bool:
    cleaner = cleaner or LogCleaner()
    plan = cleaner.prepare(log, now)
    return plan is not None and cleaner.install(log, plan, now)


def roll(log: Log) -> None:
    log.roll(NOW)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_keys_inside_compressed_batches_are_cleaned(tmp_path, codec):
    log = Log(tmp_path / "t-0", CFG, now_ms=NOW)
    for round_ in range(3):
        log.append(
            build(
                [
                    (b"a", b"a%d" % round_, NOW),
                    (b"b", b"b%d" % round_, NOW),
                    (b"c%d" % round_, b"c", NOW),
                ],
                codec=CODECS[codec],
            ),
            leader_epoch=0,
            now_ms=NOW,
        )
    roll(log)
    assert clean(log, NOW)
    batches = served(log)
    assert [(r.offset, r.key, r.value) for b in batches for r in b.records] == [
        (2, b"c0", b"c"),
        (5, b"c1", b"c"),
        (6, b"a", b"a2"),
        (7, b"b", b"b2"),
        (8, b"c2", b"c"),
    ]
    # every batch keeps its codec and its offsets (the first lost a and b, so it is rebuilt)
    assert [(b.base_offset, b.last_offset, b.codec) for b in batches] == [
        (0, 2, CODECS[codec]),
        (3, 5, CODECS[codec]),
        (6, 8, CODECS[codec]),
    ]
    log.close()


def test_tombstone_gets_a_delete_horizon_then_goes(tmp_path):
    log = Log(tmp_path / "t-0", CFG, now_ms=NOW)
    log.append(
        build([(b"k", b"v", NOW), (b"x", b"1", NOW)], codec=CODECS["zstd"]),
        leader_epoch=0,
        now_ms=NOW,
    )
    log.append(
        build([(b"k", None, NOW), (b"x", b"2", NOW)], codec=CODECS["zstd"]),
        leader_epoch=0,
        now_ms=NOW,
    )
    roll(log)
    assert clean(log, NOW + 5)
    (second,) = served(log)  # the first batch lost k and x: gone
    assert [(r.key, r.value) for r in second.records] == [(b"k", None), (b"x", b"2")]
    # KIP-534: attributes bit 6 and deleteHorizonMs in the base timestamp; record timestamps unchanged
    assert second.delete_horizon == NOW + 5 + CFG.delete_retention_ms
    assert [r.timestamp for r in second.records] == [NOW, NOW]
    assert second.codec == CODECS["zstd"]
    # a cleaning before the horizon keeps it (and the horizon), one at or after it removes it
    log.append(build([(b"y", b"1", NOW)]), leader_epoch=0, now_ms=NOW)
    roll(log)
    assert clean(log, NOW + 1004)
    assert (b"k", None) in [(r.key, r.value) for r in served(log)[0].records]
    assert served(log)[0].delete_horizon == NOW + 1005
    log.append(build([(b"z", b"1", NOW)]), leader_epoch=0, now_ms=NOW)
    roll(log)
    assert clean(log, NOW + 1005)
    assert [(k, v) for _, k, v in records_of(log)] == [(b"x", b"2"), (b"y", b"1"), (b"z", b"1")]
    log.close()


def control_batch(marker_type: int, producer_id: int) -> bytes:
    """A COMMIT (1) or ABORT (0) marker as the transaction coordinator writes it."""
    key = struct.pack(">hh", 0, marker_type)
    value = struct.pack(">hi", 0, 0)
    return build(
        [(key, value, NOW)],
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=-1,
        extra_attributes=0x20 | 0x10,
    )


def test_a_marker_stays_while_a_batch_of_its_transaction_does(tmp_path):
    """The transaction's only batch is its producer's last, kept (empty) for its sequence, so
    the marker stays too (test_txn_log.py has markers going once nothing is left)."""
    log = Log(tmp_path / "t-0", CFG, now_ms=NOW)
    log.append(
        build(
            [(b"k", b"1", NOW)],
            producer_id=5,
            producer_epoch=0,
            base_sequence=0,
            extra_attributes=0x10,
        ),
        leader_epoch=0,
        now_ms=NOW,
    )
    log.append(control_batch(1, 5), leader_epoch=0, now_ms=NOW, from_client=False)
    log.append(build([(b"k", b"2", NOW)]), leader_epoch=0, now_ms=NOW)
    roll(log)
    assert clean(log, NOW)
    batches = served(log)
    markers = [b for b in batches if b.attributes & 0x20]
    assert [(b.base_offset, b.records[0].key) for b in markers] == [(1, struct.pack(">hh", 0, 1))]
    assert records_of(log)[-1] == (2, b"k", b"2")
    log.close()


def test_last_batch_of_an_idempotent_producer_stays_empty(tmp_path):
    log = Log(tmp_path / "t-0", CFG, now_ms=NOW)
    log.append(
        build(
            [(b"k", b"1", NOW), (b"j", b"1", NOW)],
            codec=CODECS["lz4"],
            producer_id=9,
            producer_epoch=4,
            base_sequence=0,
        ),
        leader_epoch=0,
        now_ms=NOW,
    )
    log.append(build([(b"k", b"2", NOW), (b"j", b"2", NOW)]), leader_epoch=0, now_ms=NOW)
    roll(log)
    assert clean(log, NOW)
    empty, kept = served(log)
    assert (empty.base_offset, empty.last_offset, empty.records) == (0, 1, [])
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence) == (9, 4, 0)
    assert [r.value for r in kept.records] == [b"2", b"2"]
    log.close()
    reopened = Log(tmp_path / "t-0", CFG, now_ms=NOW)  # unclean: recovery accepts the empty batch
    entry = reopened.producer_state.producers[9]
    assert (entry.batches[-1].last_seq, entry.batches[-1].last_offset) == (1, 1)
    reopened.close()


def test_a_small_offset_map_cleans_in_part_then_catches_up(tmp_path):
    log = Log(tmp_path / "t-0", CFG, now_ms=NOW)
    for i in range(30):
        log.append(build([(b"k%d" % (i % 6), b"v%d" % i, NOW)]), leader_epoch=0, now_ms=NOW)
    roll(log)
    cleaner = LogCleaner(dedupe_buffer_size=24 * 3)  # room for 2 keys (load factor 0.9)
    first_uncleanable = log.active.base_offset
    offsets = []
    while clean(log, NOW, cleaner):
        offsets.append(log.cleaner_offset)
    assert offsets[0] < first_uncleanable and offsets[-1] == first_uncleanable
    assert offsets == sorted(offsets)
    assert {k: v for _, k, v in records_of(log)} == {
        b"k%d" % k: b"v%d" % (24 + k) for k in range(6)
    }
    assert [o for o, _, _ in records_of(log)] == list(range(24, 30))
    log.close()


def test_cleaning_streams_a_segment_in_bounded_memory(tmp_path):
    cfg = LogConfig(
        cleanup_policy=("compact",), segment_bytes=64 << 20, min_cleanable_dirty_ratio=0.01
    )
    log = Log(tmp_path / "t-0", cfg, now_ms=NOW)
    rng = random.Random(1)
    for i in range(40):  # 40 batches of 100 records: ~4 MB in one segment
        log.append(
            build(
                [
                    (b"k%d" % (j % 250), rng.randbytes(1000), NOW)
                    for j in range(i * 100, i * 100 + 100)
                ],
                codec=CODECS["zstd"] if i % 2 else 0,
            ),
            leader_epoch=0,
            now_ms=NOW,
        )
    roll(log)
    size = log.segments[0].size
    assert size > 2 << 20
    cleaner = LogCleaner(io_buffer_size=64 * 1024)
    tracemalloc.start()
    try:
        plan = cleaner.prepare(log, NOW)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert plan is not None
    assert peak < size / 4, (peak, size)  # never the whole segment
    cleaner.install(log, plan, NOW)
    assert len(records_of(log)) == 250
    log.close()


def test_cleaning_is_dropped_when_the_log_is_truncated_meanwhile(tmp_path):
    log = Log(tmp_path / "t-0", CFG, now_ms=NOW)
    for i in range(12):
        log.append(build([(b"k", b"v%d" % i + b"x" * 40, NOW)]), leader_epoch=0, now_ms=NOW)
    roll(log)
    cleaner = LogCleaner()
    plan = cleaner.prepare(log, NOW)
    before = records_of(log)
    log.truncate_to(3)
    for i in range(3, 12):
        log.append(build([(b"k", b"w%d" % i + b"x" * 40, NOW)]), leader_epoch=0, now_ms=NOW)
    log.roll(NOW)
    assert not cleaner.install(log, plan, NOW)
    assert not list(log.dir.glob("*.cleaned"))
    assert [v for _, _, v in records_of(log)][:3] == [v for _, _, v in before][:3]
    assert len(records_of(log)) == 12
    log.close()


def test_cleaner_checkpoint_is_one_file_per_log_dir(tmp_path):
    a, b = Log(tmp_path / "a-0", CFG, now_ms=NOW), Log(tmp_path / "b-3", CFG, now_ms=NOW)
    for log in (a, b):
        for i in range(10):
            log.append(build([(b"k", b"v%d" % i + b"x" * 40, NOW)]), leader_epoch=0, now_ms=NOW)
        roll(log)
        assert clean(log, NOW)
    assert read_offsets(tmp_path / CLEANER_OFFSET_CHECKPOINT) == {
        ("a", 0): a.cleaner_offset,
        ("b", 3): b.cleaner_offset,
    }
    assert not (a.dir / CLEANER_OFFSET_CHECKPOINT).exists()
    a.close()
    b.close()
    assert Log(tmp_path / "a-0", CFG, now_ms=NOW).cleaner_offset == a.cleaner_offset > 0


def test_old_per_partition_checkpoint_is_carried_over_once(tmp_path):
    log = Log(tmp_path / "t-0", CFG, now_ms=NOW)
    for i in range(10):
        log.append(build([(b"k%d" % i, b"v", NOW)]), leader_epoch=0, now_ms=NOW)
    log.close()
    write_checkpoint_lines(
        tmp_path / "t-0" / CLEANER_OFFSET_CHECKPOINT, ["4"]
    )  # what earlier versions wrote
    reopened = Log(tmp_path / "t-0", CFG, now_ms=NOW)
    assert reopened.cleaner_offset == 4
    assert not (tmp_path / "t-0" / CLEANER_OFFSET_CHECKPOINT).exists()
    assert read_offsets(tmp_path / CLEANER_OFFSET_CHECKPOINT) == {("t", 0): 4}
    reopened.close()


def test_log_manager_cleans_in_background(tmp_path):
    lm = LogManager([str(tmp_path)], CFG)
    lm.startup()
    log = lm.get_or_create_log(TopicPartition("__consumer_offsets", 0), CFG)
    for i in range(40):
        log.append(
            build_batch([(b"key%d" % (i % 3), b"value-%d" % i + b"x" * 40, NOW)]),
            leader_epoch=0,
            now_ms=NOW,
        )
    before = log.size_in_bytes
    asyncio.run(asyncio.wait_for(lm.clean_logs(NOW), timeout=30))
    assert log.size_in_bytes < before
    values = {r.key: r.value for b in served(log) for r in b.records}
    assert values == {
        b"key%d" % k: b"value-%d" % i + b"x" * 40 for i, k in ((39, 0), (37, 1), (38, 2))
    }
    assert read_offsets(tmp_path / CLEANER_OFFSET_CHECKPOINT) == {
        ("__consumer_offsets", 0): log.cleaner_offset
    }
    lm.delete_log(TopicPartition("__consumer_offsets", 0))
    assert read_offsets(tmp_path / CLEANER_OFFSET_CHECKPOINT) == {}
    lm.shutdown()


def test_a_corrupt_batch_makes_the_log_uncleanable_not_the_broker_fail(tmp_path):
    log = Log(tmp_path / "t-0", CFG, now_ms=NOW)
    for i in range(10):
        log.append(
            build([(b"k", b"v%d" % i + b"x" * 40, NOW)], codec=CODECS["gzip"]),
            leader_epoch=0,
            now_ms=NOW,
        )
    roll(log)
    path: Path = log.segments[0].path
    data = bytearray(path.read_bytes())
    data[70] ^= 0xFF  # inside the first batch's compressed records: the CRC no longer matches
    path.write_bytes(bytes(data))
    cleaner = LogCleaner()
    assert cleaner.prepare(log, NOW) is None
    assert log.dir in cleaner.uncleanable and not list(log.dir.glob("*.cleaned"))
    log.close()


def test_group_coordinator_reads_compacted_batches(tmp_path):
    """__consumer_offsets batches that lost records to compaction (fewer records than
    lastOffsetDelta + 1) still load."""
    from odradek.coordinator.batches import decode_records

    log = Log(tmp_path / "__consumer_offsets-0", CFG, now_ms=NOW)
    log.append(
        build([(b"g1", b"a", NOW), (b"g2", b"b", NOW), (b"g3", b"c", NOW)]),
        leader_epoch=0,
        now_ms=NOW,
    )
    log.append(build([(b"g2", b"d", NOW)]), leader_epoch=0, now_ms=NOW)
    roll(log)
    assert clean(log, NOW)
    data = b"".join(r.read_bytes() for r in log.read(0, 1 << 30).regions)
    assert list(decode_records(data)) == [(0, b"g1", b"a"), (2, b"g3", b"c"), (3, b"g2", b"d")]
    log.close()


def test_segments_deleted_while_cleaning_abandon_it_quietly(tmp_path):
    """Retention renaming a segment to .deleted under the cleaner is not a disk failure."""
    cfg = LogConfig(
        cleanup_policy=("compact", "delete"),
        segment_bytes=400,
        min_cleanable_dirty_ratio=0.01,
        retention_ms=1000,
        index_interval_bytes=50,
    )
    log = Log(tmp_path / "t-0", cfg, now_ms=NOW)
    for i in range(12):
        log.append(
            build([(b"k%d" % (i % 2), b"v%d" % i + b"x" * 40, NOW)]), leader_epoch=0, now_ms=NOW
        )
    roll(log)
    cleaner = LogCleaner()
    cleanable = cleaner.cleanable_range(log, NOW)
    assert cleanable is not None
    assert log.delete_old_segments(NOW + 5000) > 0  # before the cleaner opens them
    assert cleaner.clean(log, cleanable, NOW) is None
    assert log.dir not in cleaner.uncleanable and not log.offline
    log.close()


def test_log_manager_uses_the_cleaner_it_is_given(tmp_path):
    cleaner = LogCleaner(dedupe_buffer_size=24 * 3)
    lm = LogManager([str(tmp_path)], CFG, cleaner=cleaner)
    lm.startup()
    log = lm.get_or_create_log(TopicPartition("t", 0), CFG)
    for i in range(20):
        log.append(build([(b"k%d" % (i % 5), b"v%d" % i, NOW)]), leader_epoch=0, now_ms=NOW)
    log.roll(NOW)
    asyncio.run(asyncio.wait_for(lm.clean_logs(NOW), timeout=30))
    assert 0 < log.cleaner_offset < 20  # two keys fit its map: cleaned in part
    lm.shutdown()


def filled(tmp_path, cfg: LogConfig, segments: int = 3) -> Log:
    """A log of ``segments`` inactive segments of the same 4 keys rewritten (about 0.6 dirty)."""
    log = Log(tmp_path / "t-0", cfg, now_ms=NOW)
    for i in range(4 * segments):
        log.append(
            build([(b"k%d" % (i % 4), b"v%d" % i + b"x" * 300, NOW + i)]),
            leader_epoch=0,
            now_ms=NOW,
        )
        if i % 4 == 3:
            log.roll(NOW)
    return log


def test_min_cleanable_dirty_ratio_decides(tmp_path):
    log = filled(tmp_path, LogConfig(cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.99))
    assert (
        LogCleaner().cleanable_range(log, NOW + 100) is not None
    )  # never cleaned: all of it is dirty
    assert clean(log, NOW + 100)
    for i in range(4):  # half of the log dirty now
        log.append(build([(b"k%d" % i, b"w" + b"x" * 300, NOW)]), leader_epoch=0, now_ms=NOW)
    log.roll(NOW)
    assert LogCleaner().cleanable_range(log, NOW + 100) is None
    log.update_config(LogConfig(cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.4))
    assert LogCleaner().cleanable_range(log, NOW + 100) is not None
    log.close()


def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path):
    cfg = LogConfig(
        cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.01, min_compaction_lag_ms=1000
    )
    log = filled(tmp_path, cfg)
    assert LogCleaner().cleanable_range(log, NOW + 500) is None  # every record younger than the lag
    cleanable = LogCleaner().cleanable_range(log, NOW + 1007)
    assert (
        cleanable is not None and cleanable.first_uncleanable == 8
    )  # the segment of NOW+8..NOW+11 waits
    log.close()


def test_max_compaction_lag_forces_a_cleaning(tmp_path):
    cfg = LogConfig(
        cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=60000
    )
    log = filled(tmp_path, cfg, segments=1)
    log.append(build([(b"k0", b"w", NOW)]), leader_epoch=0, now_ms=NOW)
    log.roll(NOW)
    assert clean(log, NOW + 10)  # the first cleaning: everything dirty
    log.append(build([(b"k1", b"w", NOW + 20)]), leader_epoch=0, now_ms=NOW + 20)
    log.roll(NOW + 20)
    assert LogCleaner().cleanable_range(log, NOW + 30) is None  # dirty ratio below 0.99
    assert LogCleaner().cleanable_range(log, NOW + 20 + 60001) is not None  # overdue
    log.close()


def test_records_without_a_key_are_removed(tmp_path):
    """As Kafka's Cleaner (an invalid message in a compacted log); such records can only arrive
    through replication, a leader refuses them."""
    log = Log(tmp_path / "t-0", CFG, now_ms=NOW)
    log.append(
        build([(None, b"orphan", NOW), (b"k", b"v", NOW)], codec=CODECS["snappy"]),
        leader_epoch=0,
        now_ms=NOW,
        assign_offsets=False,
    )
    log.roll(NOW)
    assert clean(log, NOW)
    (batch,) = served(log)
    assert [(r.offset, r.key) for r in batch.records] == [(1, b"k")] and batch.codec == CODECS[
        "snappy"
    ]
    log.close()


BIG = LogConfig(cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.01)


def test_nothing_at_or_above_the_high_watermark_is_cleaned(tmp_path):
    log = filled(tmp_path, BIG)  # segments [0, 4), [4, 8), [8, 12)
    assert LogCleaner().cleanable_range(log, NOW + 100, upper_bound=7).first_uncleanable == 4
    assert LogCleaner().cleanable_range(log, NOW + 100, upper_bound=3) is None
    log.close()


def test_log_manager_cleans_below_the_high_watermark(tmp_path):
    lm = LogManager([str(tmp_path)], BIG)
    lm.startup()
    lm.high_watermark = lambda tp: 5
    log = lm.get_or_create_log(TopicPartition("t", 0), BIG)
    for i in range(12):
        log.append(build([(b"k", b"v%d" % i + b"x" * 300, NOW)]), leader_epoch=0, now_ms=NOW)
        if i % 4 == 3:
            log.roll(NOW)
    asyncio.run(asyncio.wait_for(lm.clean_logs(NOW + 100), timeout=30))
    assert log.cleaner_offset == 4
    assert [o for o, _, _ in records_of(log)] == [3, 4, 5, 6, 7, 8, 9, 10, 11]
    lm.shutdown()
