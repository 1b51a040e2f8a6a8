"""Compaction keeps exactly the latest record per key and the right tombstones, across crashes."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from spec import build_batch, parse_batches

from odradek.storage import Log, LogConfig, LogManager, TopicPartition
from odradek.storage.cleaner import LogCleaner

CFG = LogConfig(cleanup_policy=("compact",), segment_bytes=400, min_cleanable_dirty_ratio=0.01,
                delete_retention_ms=1000, index_interval_bytes=50)
NOW = 1_000_000

writes_st = st.lists(st.lists(st.tuples(st.integers(0, 6), st.booleans(), st.integers(0, 2000)), min_size=1, max_size=4),
                     min_size=1, max_size=25)


def append_all(log: Log, writes) -> list[tuple[int, int, bytes | None, int]]:
    """Append batches of (key, tombstone?, age); returns (offset, key, value, ts) of every record."""
    model = []
    for n, batch in enumerate(writes):
        recs = [(b"k%d" % k, None if tomb else b"v%d.%d" % (n, i), NOW - age) for i, (k, tomb, age) in enumerate(batch)]
        info = log.append(build_batch(recs, producer_id=11, producer_epoch=2, base_sequence=log.log_end_offset),
                          leader_epoch=0, now_ms=NOW)
        model += [(info.first_offset + i, k, v, ts) for i, (k, v, ts) in enumerate(recs)]
    return model


def served(log: Log):
    data = b"".join(r.read_bytes() for r in log.read(log.log_start_offset, 1 << 30).regions)
    return parse_batches(data)


def expected_after_cleaning(model, cleaned_below: int):
    latest = {}  # the cleaner maps only the cleanable range, as Kafka's dirty section
    for offset, key, _, _ in model:
        if offset < cleaned_below:
            latest[key] = offset
    keep = []
    for offset, key, value, ts in model:
        if offset >= cleaned_below:
            keep.append((offset, key, value))
        elif latest[key] == offset and not (value is None and ts < NOW - CFG.delete_retention_ms):
            keep.append((offset, key, value))
    return keep


@settings(max_examples=25, deadline=None)
@given(writes_st, st.sampled_from(["none", "after_prepare", "after_swap_rename"]))
def test_compaction_keeps_latest_per_key(writes, crash):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "compacted-0"
        log = Log(path, CFG)
        model = append_all(log, writes)
        plan = LogCleaner().prepare(log, NOW)
        if plan is None:
            assert len(log.segments) == 1 or all(s.size == 0 for s in log.segments[:-1])
            return
        if crash == "after_prepare":  # .cleaned files written, nothing swapped
            del log
            log = Log(path, CFG, clean_shutdown=False)
            assert not list(path.glob("*.cleaned"))
            got = [(r.offset, r.key, r.value) for b in served(log) for r in b.records]
            assert got == [(o, k, v) for o, k, v, _ in model]
            return
        if crash == "after_swap_rename":  # checkpoint written, the first .cleaned renamed to .swap
            from odradek.storage.checkpoint import write_checkpoint_lines
            write_checkpoint_lines(path / "cleaner-offset-checkpoint", [str(plan.cleaner_offset)])
            for base, cleaned in plan.cleaned:
                cleaned.rename(cleaned.with_name(f"{base:020d}.log.swap"))
            del log
            log = Log(path, CFG, clean_shutdown=True, recovery_point=10**9)  # indexes of swapped segments rebuilt
        else:
            log.install_cleaned(plan, NOW)
        batches = served(log)
        got = [(r.offset, r.key, r.value) for b in batches for r in b.records]
        assert got == expected_after_cleaning(model, plan.cleaner_offset)
        # batches keep producer id and epoch, offsets only grow
        assert all(b.producer_id == 11 and b.producer_epoch == 2 for b in batches)
        offsets = [o for o, _, _ in got]
        assert offsets == sorted(offsets)
        # a reopened log (unclean) serves the same, and offset lookups still land on batches
        log.close()
        reopened = Log(path, CFG, clean_shutdown=False)
        assert [(r.offset, r.key, r.value) for b in served(reopened) for r in b.records] == got
        assert reopened.log_end_offset == model[-1][0] + 1
        for o in offsets:
            first = parse_batches(reopened.read(o, 1).regions[0].read_bytes())[0]
            assert first.base_offset <= o
        reopened.close()


def test_log_manager_cleans_in_background(tmp_path):
    lm = LogManager([str(tmp_path)], CFG)
    lm.startup()
    log = lm.get_or_create_log(TopicPartition("__consumer_offsets", 0), CFG)
    for i in range(40):
        log.append(build_batch([(b"key%d" % (i % 3), b"value-%d" % i + b"x" * 40, NOW)]), leader_epoch=0, now_ms=NOW)
    before = log.size_in_bytes
    asyncio.run(asyncio.wait_for(lm.clean_logs(NOW), timeout=30))
    assert log.size_in_bytes < before
    values = {r.key: r.value for b in served(log) for r in b.records}
    assert values == {b"key%d" % k: b"value-%d" % i + b"x" * 40 for i, k in ((39, 0), (37, 1), (38, 2))}
    lm.shutdown()
