"""The cleaner cleans consecutive segments in groups, each into one segment (Kafka's
Cleaner.groupSegmentsBySize and cleanSegments), and a crash at any step of installing a
group leaves, on reopening, the log the finished install gives (Kafka's LogLoader
completing a .swap)."""

from __future__ import annotations

import hashlib
import itertools
import os
from pathlib import Path

from codec_spec import build, parse
from hypothesis import given
from hypothesis import strategies as st

from odradek.storage import Log, LogConfig
from odradek.storage.cleaner import (
    INT_MAX,
    LogCleaner,
    SegmentSizes,
    group_segments_by_size,
    next_offset_in_file,
)
from odradek.storage.cleaner_checkpoint import save_cleaner_offset

NOW = 1_000_000
RETENTION = 1000


def config(segment_bytes: int = 4000, segment_index_bytes: int = 10 << 20) -> LogConfig:
    return LogConfig(
        cleanup_policy=("compact",),
        segment_bytes=segment_bytes,
        segment_index_bytes=segment_index_bytes,
        min_cleanable_dirty_ratio=0.01,
        delete_retention_ms=RETENTION,
        index_interval_bytes=1,
    )


def served(log: Log):
    return parse(b"".join(r.read_bytes() for r in log.read(log.log_start_offset, 1 << 30).regions))


def served_bytes(log: Log) -> bytes:
    return b"".join(r.read_bytes() for r in log.read(log.log_start_offset, 1 << 30).regions)


def clean(log: Log, now: int) -> bool:
    cleaner = LogCleaner()
    plan = cleaner.prepare(log, now)
    return plan is not None and cleaner.install(log, plan, now)


def bases(log: Log) -> list[int]:
    return [s.base_offset for s in log.segments]


# -- the grouping rule ------------------------------------------------------------------------


def sizes(*specs: tuple[int, int], index: int = 0, time_index: int = 0) -> list[SegmentSizes]:
    return [SegmentSizes(base, log_bytes, index, time_index) for base, log_bytes in specs]


def groups_of(
    segments: list[SegmentSizes], max_log: int, max_index: int, first_uncleanable: int
) -> list[list[int]]:
    return [
        [s.base_offset for s in group]
        for group in group_segments_by_size(segments, max_log, max_index, first_uncleanable)
    ]


def test_groups_fill_up_to_segment_bytes():
    segments = sizes((0, 100), (10, 100), (20, 50), (30, 100), (40, 100))
    assert groups_of(segments, 250, 1000, 50) == [[0, 10, 20], [30, 40]]
    assert groups_of(segments, 249, 1000, 50) == [[0, 10], [20, 30], [40]]


def test_a_segment_larger_than_segment_bytes_stays_alone():
    segments = sizes((0, 50), (10, 1000), (20, 50), (30, 50))
    assert groups_of(segments, 200, 1000, 40) == [[0], [10], [20, 30]]


def test_offset_index_and_time_index_bytes_each_bound_a_group():
    by_offset_index = [SegmentSizes(b, 10, 16, 0) for b in (0, 10, 20, 30)]
    assert groups_of(by_offset_index, 10_000, 32, 40) == [[0, 10], [20, 30]]
    by_time_index = [SegmentSizes(b, 10, 0, 24) for b in (0, 10, 20, 30)]
    assert groups_of(by_time_index, 10_000, 48, 40) == [[0, 10], [20, 30]]
    assert groups_of(by_time_index, 10_000, 47, 40) == [[0], [10], [20], [30]]


def test_a_group_spans_at_most_int32_offsets():
    # a segment may hold offsets up to just below the next base offset: INT_MAX fits, INT_MAX + 1 not
    segments = sizes((0, 10), (INT_MAX - 5, 10), (INT_MAX + 1, 10))
    assert groups_of(segments, 10_000, 1000, INT_MAX + 9) == [[0, INT_MAX - 5], [INT_MAX + 1]]
    segments = sizes((0, 10), (INT_MAX - 5, 10), (INT_MAX + 2, 10))
    assert groups_of(segments, 10_000, 1000, INT_MAX + 9) == [[0], [INT_MAX - 5, INT_MAX + 2]]
    # the last one is bounded by the first uncleanable offset
    segments = sizes((0, 10), (100, 10))
    assert groups_of(segments, 10_000, 1000, INT_MAX + 1) == [[0, 100]]
    assert groups_of(segments, 10_000, 1000, INT_MAX + 2) == [[0], [100]]
    # an empty segment holds no offset: it always fits
    segments = sizes((0, 10), (100, 0))
    assert groups_of(segments, 10_000, 1000, INT_MAX + 2) == [[0, 100]]


segment_specs = st.lists(
    st.tuples(st.integers(1, 2**31), st.integers(0, 300), st.integers(0, 40), st.integers(0, 60)),
    min_size=1,
    max_size=12,
)


@given(
    specs=segment_specs,
    max_log=st.integers(1, 900),
    max_index=st.integers(1, 120),
    tail=st.integers(1, 2**31),
)
def test_grouping_is_a_partition_into_maximal_groups(specs, max_log, max_index, tail):
    segments, base = [], 0
    for gap, log_bytes, index_bytes, time_bytes in specs:
        segments.append(SegmentSizes(base, log_bytes, index_bytes, time_bytes))
        base += gap
    first_uncleanable = base + tail
    groups = group_segments_by_size(segments, max_log, max_index, first_uncleanable)
    assert [s for g in groups for s in g] == segments and all(groups)
    ends = {s.base_offset: n.base_offset for s, n in itertools.pairwise(segments)}

    def fits(group: list[SegmentSizes]) -> bool:
        last_possible = ends.get(group[-1].base_offset, first_uncleanable) - 1
        return (
            sum(s.log_bytes for s in group) <= max_log
            and sum(s.offset_index_bytes for s in group) <= max_index
            and sum(s.time_index_bytes for s in group) <= max_index
            and (group[-1].log_bytes == 0 or last_possible - group[0].base_offset <= INT_MAX)
        )

    for group, following in zip(groups, groups[1:] + [None]):
        # every added segment fitted (each test as Kafka applies it, on the segment added)
        assert all(fits(group[: i + 1]) for i in range(1, len(group)))
        if following is not None:
            assert not fits(group + following[:1])  # the next one did not


# -- cleaning in groups ------------------------------------------------------------------------


def record(offset: int) -> tuple[bytes, bytes | None]:
    """What the record at ``offset`` holds (about one in ten a tombstone)."""
    h = hashlib.blake2b(b"%d" % offset, digest_size=8).digest()
    key = b"key-%d" % (h[0] % 40)
    return key, None if h[1] < 26 else b"%d:" % offset + h


def fill(
    path: Path,
    cfg: LogConfig,
    segments: int,
    batches_per_segment: int = 3,
    records_per_batch: int = 4,
) -> Log:
    """A log of many small segments (rolled by hand) of keyed records, some compressed."""
    log = Log(path, cfg, now_ms=NOW)
    n = 0
    for _s in range(segments):
        for _b in range(batches_per_segment):
            start = log.log_end_offset
            recs = [
                (*record(o), NOW - 100_000 + o) for o in range(start, start + records_per_batch)
            ]
            headers = [[(b"o", b"%d" % o)] for o in range(start, start + records_per_batch)]
            log.append(build(recs, codec=n % 5, headers=headers), leader_epoch=0, now_ms=NOW)
            n += 1
        log.roll(NOW)
    return log


def written_by_fill(log: Log) -> dict[int, tuple[bytes, bytes | None]]:
    return {o: record(o) for o in range(log.log_end_offset)}


def check_latest(
    log: Log, written: dict[int, tuple[bytes, bytes | None]], *, tombstones_gone: bool = False
) -> None:
    """Batches whole with valid CRCs (parse checks them), offsets increasing, each record as
    written at its offset, and exactly the latest record of every key: superseded ones gone,
    tombstones kept until their delete horizon has passed."""
    kept = [(r.offset, r.key, r.value) for b in served(log) for r in b.records]
    assert [o for o, _, _ in kept] == sorted({o for o, _, _ in kept})
    assert all(written[o] == (k, v) for o, k, v in kept)
    latest: dict[bytes, int] = {}
    for offset in sorted(written):
        latest[written[offset][0]] = offset
    assert {o for o, _, _ in kept} == {
        o for o in latest.values() if not (tombstones_gone and written[o][1] is None)
    }


def test_many_small_segments_compact_into_few(tmp_path):
    log = fill(tmp_path / "t-0", config(segment_bytes=4000), segments=24)
    written = written_by_fill(log)
    before = [(b.base_offset, b.last_offset) for b in served(log)]
    segments_before = len(log.segments)
    assert clean(log, NOW)
    print(f"segments before {segments_before}, after {len(log.segments)}")
    assert len(log.segments) < segments_before // 3
    assert all(s.size <= 4000 for s in log.segments)
    check_latest(log, written)
    # batches keep their offsets (base and last): those left are among those written
    assert {(b.base_offset, b.last_offset) for b in served(log)} <= set(before)
    # after the delete horizon the tombstones go too
    info = log.append(build([(b"other", b"x", NOW)]), leader_epoch=0, now_ms=NOW)
    written[info.first_offset] = (b"other", b"x")
    log.roll(NOW)
    assert clean(log, NOW + RETENTION + 1)
    check_latest(log, written, tombstones_gone=True)
    segments_after = len(log.segments)
    log.close()
    reopened = Log(tmp_path / "t-0", config(segment_bytes=4000), now_ms=NOW)  # an unclean reopening
    check_latest(reopened, written, tombstones_gone=True)
    assert len(reopened.segments) == segments_after
    reopened.close()


def test_groups_split_at_segment_bytes(tmp_path):
    cfg = config(segment_bytes=100_000)
    log = fill(tmp_path / "t-0", cfg, segments=12)
    seg_bytes = [s.size for s in log.segments[:-1]]
    # three segments fit, four do not
    log.update_config(config(segment_bytes=sum(sorted(seg_bytes)[-3:]) + 1))
    assert sum(sorted(seg_bytes)[:4]) > log.config.segment_bytes
    old = bases(log)
    assert clean(log, NOW)
    assert bases(log) == old[0:-1:3] + [old[-1]]
    check_latest(log, written_by_fill(log))
    log.close()


def test_groups_split_at_segment_index_bytes(tmp_path):
    log = fill(tmp_path / "t-0", config(), segments=8, batches_per_segment=2)
    # every batch indexed, with a larger timestamp: two entries of each index per segment
    assert all((len(s.offset_index), len(s.time_index)) == (2, 2) for s in log.segments[:-1])
    old = bases(log)
    log.update_config(config(segment_index_bytes=48))  # four 12-byte time index entries
    assert clean(log, NOW)
    assert bases(log) == old[0:-1:2] + [old[-1]]
    check_latest(log, written_by_fill(log))
    log.close()


def test_a_group_stays_within_int32_relative_offsets(tmp_path):
    cfg = config()
    log = Log(tmp_path / "t-0", cfg, now_ms=NOW)
    log.append(build([(b"a", b"0", NOW)]), leader_epoch=0, now_ms=NOW)
    # a follower's copy of compacted batches: offsets jump
    log.append(
        build([(b"b", b"1", NOW)], base_offset=INT_MAX - 10),
        leader_epoch=0,
        now_ms=NOW,
        assign_offsets=False,
    )
    log.roll(NOW)
    log.append(build([(b"a", b"2", NOW)] * 20), leader_epoch=0, now_ms=NOW)  # up to INT_MAX + 10
    log.roll(NOW)
    log.append(build([(b"c", b"3", NOW)]), leader_epoch=0, now_ms=NOW)
    log.roll(NOW)
    old = bases(log)
    assert clean(log, NOW)
    assert bases(log) == [old[0], old[1], old[3]]
    assert [(r.offset, r.key) for b in served(log) for r in b.records] == [
        (INT_MAX - 10, b"b"),
        (INT_MAX + 10, b"a"),
        (INT_MAX + 11, b"c"),
    ]
    log.close()
    reopened = Log(tmp_path / "t-0", cfg, now_ms=NOW)
    assert [(r.offset, r.key) for b in served(reopened) for r in b.records] == [
        (INT_MAX - 10, b"b"),
        (INT_MAX + 10, b"a"),
        (INT_MAX + 11, b"c"),
    ]
    reopened.close()


def test_the_last_batch_of_a_group_stays_so_the_group_keeps_its_end(tmp_path):
    log = fill(tmp_path / "t-0", config(), segments=3, batches_per_segment=1, records_per_batch=1)
    last = log.segments[-2]
    key = record(last.base_offset)[0]
    # the record of the group's last segment is superseded from a segment too large to join it
    log.append(build([(key, b"newer" * 1000, NOW)]), leader_epoch=0, now_ms=NOW)
    log.roll(NOW)
    end = last.next_offset
    assert clean(log, NOW)
    assert len(log.segments) == 3
    group_segment = log.segments[0]
    assert group_segment.next_offset == end
    (empty,) = [b for b in served(log) if b.last_offset == end - 1]
    assert (empty.base_offset, empty.records, empty.producer_id) == (end - 1, [], -1)
    assert next_offset_in_file(group_segment.path, group_segment.base_offset) == end
    log.close()


def test_a_segment_alone_is_written_only_when_it_changes(tmp_path):
    """Segments too large to share one: an unchanged one is left as it is, a changed one
    cleaned on its own (its superseded last batch dropped, as a group of one needs no end kept)."""
    cfg = config(segment_bytes=3000)
    log = Log(tmp_path / "t-0", cfg, now_ms=NOW)
    log.append(build([(b"a0", b"x" * 1500, NOW)]), leader_epoch=0, now_ms=NOW)
    log.roll(NOW)
    log.append(build([(b"b", b"x" * 1500, NOW)]), leader_epoch=0, now_ms=NOW)
    log.append(build([(b"c", b"old", NOW)]), leader_epoch=0, now_ms=NOW)
    log.roll(NOW)
    log.append(build([(b"c", b"x" * 1500, NOW)]), leader_epoch=0, now_ms=NOW)
    log.roll(NOW)
    first, second = log.segments[0], log.segments[1]
    inode = os.stat(first.path).st_ino
    cleaner = LogCleaner()
    plan = cleaner.prepare(log, NOW)
    assert [group for group, _ in plan.cleaned] == [(second.base_offset,)]
    assert cleaner.install(log, plan, NOW)
    assert os.stat(log.segments[0].path).st_ino == inode and log.segments[0] is first
    assert [(b.base_offset, [r.key for r in b.records]) for b in served(log)] == [
        (0, [b"a0"]),
        (1, [b"b"]),
        (3, [b"c"]),
    ]
    log.close()


def test_empty_segments_join_a_group(tmp_path):
    cfg = config()
    log = fill(tmp_path / "t-0", cfg, segments=4)
    # a segment emptied by an earlier cleaning is 0 bytes
    empty = log.segments[1]
    os.truncate(empty.path, 0)
    log.close()
    log = Log(tmp_path / "t-0", cfg, now_ms=NOW)
    assert log.segments[1].size == 0
    assert clean(log, NOW)
    assert len(log.segments) == 2
    log.close()


# -- a crash while installing ------------------------------------------------------------------


def install_steps(log: Log, plan) -> list:
    """Log.install_cleaned as steps on disk, in its order: each group's .cleaned renamed .swap;
    then per group its old segments' files renamed .deleted (or, every other segment, removed,
    as after file.delete.delay.ms), then the .swap renamed .log; last the checkpoint."""
    steps = []
    for _, cleaned in plan.cleaned:
        steps.append(lambda c=cleaned: os.replace(c, swap_of(c)))
    for group, cleaned in plan.cleaned:
        for i, base in enumerate(group):
            for suffix in (".log", ".index", ".timeindex"):
                f = log.dir / f"{base:020d}{suffix}"
                steps.append(
                    (lambda f=f: f.unlink())
                    if i % 2
                    else (lambda f=f: os.replace(f, f"{f}.deleted"))
                )
        steps.append(
            lambda c=cleaned: os.replace(swap_of(c), log.dir / c.name.removesuffix(".cleaned"))
        )
    steps.append(lambda: save_cleaner_offset(log.dir, plan.cleaner_offset))
    return steps


def swap_of(cleaned: Path) -> Path:
    return cleaned.with_name(cleaned.name.replace(".cleaned", ".swap"))


CRASH_CFG = config(segment_bytes=900)


def crash_scenario(path: Path) -> tuple[Log, dict[int, tuple[bytes, bytes | None]]]:
    """Small segments in several groups, the last segment of a group losing every record to
    later writes; with what was written at each offset."""
    log = fill(path, CRASH_CFG, segments=9, batches_per_segment=2)
    written = {o: record(o) for o in range(log.log_end_offset)}
    target = log.segments[3]
    for o in range(target.base_offset, target.next_offset):
        info = log.append(build([(written[o][0], b"again", NOW)]), leader_epoch=0, now_ms=NOW)
        written[info.first_offset] = (written[o][0], b"again")
    log.roll(NOW)
    return log, written


def test_the_crash_scenario_has_groups_one_ending_in_an_emptied_segment(tmp_path):
    log, written = crash_scenario(tmp_path / "t-0")
    emptied = log.segments[3].base_offset
    plan = LogCleaner().prepare(log, NOW + 5)
    merged = [group for group, _ in plan.cleaned if len(group) > 1]
    assert len(merged) >= 2 and any(group[-1] == emptied for group in merged)
    assert LogCleaner().install(log, plan, NOW + 5)
    check_latest(log, written)
    log.close()


def test_a_crash_at_any_step_of_an_install_reopens_as_installed_or_not(tmp_path):
    """Every prefix of the install's steps, then a reopening: the log serves exactly what a
    finished install of the groups that got as far as a .swap serves (none before that)."""
    seen = set()
    crash_at = 0
    while True:
        crashed, written = crash_scenario(tmp_path / f"{crash_at}a" / "t-0")
        twin, _ = crash_scenario(tmp_path / f"{crash_at}b" / "t-0")  # the same log, not crashing
        plan = LogCleaner().prepare(crashed, NOW + 5)
        twin_plan = LogCleaner().prepare(twin, NOW + 5)
        steps = install_steps(crashed, plan)
        for step in steps[:crash_at]:
            step()
        files = {p.name for p in crashed.dir.iterdir()}
        swapped = [
            group for group, c in plan.cleaned if c.name not in files
        ]  # a .swap exists or was renamed
        for group, c in plan.cleaned:
            if swap_of(c).name in files:
                present = sum(f"{base:020d}.log" in files for base in group)
                seen.add(
                    "swap, old segments all there"
                    if present == len(group)
                    else "swap, some old segments gone"
                    if present
                    else "swap, every old segment gone"
                )
            elif c.name in files:
                seen.add("cleaned file")
        del crashed  # the process dies: files stay as they are
        for group, c in twin_plan.cleaned:
            if group not in swapped:
                c.unlink()
        twin_plan.cleaned = [(g, c) for g, c in twin_plan.cleaned if g in swapped]
        assert LogCleaner().install(twin, twin_plan, NOW + 5)
        reopened = Log(tmp_path / f"{crash_at}a" / "t-0", CRASH_CFG, now_ms=NOW + 5)
        assert not [
            p.name for p in reopened.dir.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")
        ]
        assert served_bytes(reopened) == served_bytes(twin), crash_at
        assert bases(reopened) == bases(twin), crash_at
        assert reopened.cleaner_offset == (plan.cleaner_offset if crash_at == len(steps) else 0)
        # the cleaning after the reopening finishes the job (the checkpoint is written last)
        assert clean(reopened, NOW + 6) != (crash_at == len(steps))
        check_latest(reopened, written)
        reopened.close()
        twin.close()
        if crash_at == len(steps):
            break
        crash_at += 1
    assert seen == {
        "cleaned file",
        "swap, old segments all there",
        "swap, some old segments gone",
        "swap, every old segment gone",
    }
