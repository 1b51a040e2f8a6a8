"""Compaction against a model, with compressed and mixed batches, partial cleaning (a small
dedupe buffer), KIP-534 delete horizons, idempotent producers, segments cleaned in groups
into one, and a crash at every step of installing a cleaning.

The model applies Kafka's retention rules (Cleaner.shouldRetainRecord, MemoryRecords.filterTo)
to an in-memory list of batches; the log is read back with an independent parser
(codec_spec). Besides equality with the model, model-free properties are checked: the
latest surviving record of every key is the last one written (or the key is gone and its
last write was a tombstone), every surviving record is byte-identical to what was written,
and batches keep their codec, producer id, epoch, base sequence and last offset.
"""

from __future__ import annotations

import gc
import itertools
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from codec_spec import Batch, build, parse
from hypothesis import event, given, settings
from hypothesis import strategies as st

from odradek.storage import Log, LogConfig
from odradek.storage.cleaner import LogCleaner
from odradek.storage.cleaner_checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    save_cleaner_offset,
)

NOW = 1_000_000
RETENTION = 1000
PID = 7


def config(segment_bytes: int, segment_index_bytes: int = 10 << 20) -> LogConfig:
    return LogConfig(
        cleanup_policy=("compact",),
        segment_bytes=segment_bytes,
        min_cleanable_dirty_ratio=0.01,
        delete_retention_ms=RETENTION,
        index_interval_bytes=64,
        segment_index_bytes=segment_index_bytes,
    )


@dataclass
class ModelBatch:
    base: int
    last: int
    codec: int
    pid: int
    epoch: int
    seq: int
    records: list[tuple[int, bytes, bytes | None, int]]  # (offset, key, value, timestamp)
    horizon: int | None = None


@dataclass
class Model:
    batches: list[ModelBatch] = field(default_factory=list)
    written: dict[int, tuple[bytes, bytes | None, int]] = field(
        default_factory=dict
    )  # offset -> record
    last_of_producer: dict[int, int] = field(default_factory=dict)
    first_dirty: int = 0

    def cleaned(
        self, end: int, limit: int, now: int, group_ends: set[int]
    ) -> dict[int, ModelBatch | None]:
        """What each batch below ``limit`` becomes when the map covers [first_dirty, end); the last
        batch below each of ``group_ends`` (the end of a group of several segments) stays, empty
        when none of its records does."""
        last_of_group = {
            max(b.base for b in self.batches if b.base < e)
            for e in group_ends
            if any(b.base < e for b in self.batches)
        }
        offsets: dict[bytes, int] = {}
        for b in self.batches:
            for o, k, _, _ in b.records:
                if self.first_dirty <= o < end:
                    offsets[k] = o
        out: dict[int, ModelBatch | None] = {}
        for b in self.batches:
            if b.base >= limit:
                break
            kept = [
                r
                for r in b.records
                if r[0] >= end
                or (
                    r[0] >= offsets.get(r[1], -1)
                    and (r[2] is not None or b.horizon is None or now < b.horizon)
                )
            ]
            if kept:
                horizon = b.horizon
                if horizon is None and any(v is None for _, _, v, _ in kept):
                    horizon = now + RETENTION
                out[b.base] = ModelBatch(
                    b.base, b.last, b.codec, b.pid, b.epoch, b.seq, kept, horizon
                )
            elif (
                b.pid >= 0 and self.last_of_producer.get(b.pid) == b.last
            ) or b.base in last_of_group:
                out[b.base] = ModelBatch(b.base, b.last, 0, b.pid, b.epoch, b.seq, [], None)
            else:
                out[b.base] = None
        return out

    def apply(self, changes: dict[int, ModelBatch | None], bases: set[int] | None = None) -> None:
        """Take the changes of the batches whose base is in ``bases`` (all when None)."""
        batches = []
        for b in self.batches:
            if b.base in changes and (bases is None or b.base in bases):
                if changes[b.base] is not None:
                    batches.append(changes[b.base])
            else:
                batches.append(b)
        self.batches = batches


def served(log: Log) -> list[Batch]:
    return parse(b"".join(r.read_bytes() for r in log.read(log.log_start_offset, 1 << 30).regions))


def check(log: Log, model: Model) -> None:
    batches = served(log)
    got = [
        (
            b.base_offset,
            b.last_offset,
            b.codec if b.records else 0,
            b.producer_id,
            b.producer_epoch,
            b.base_sequence,
            [(r.offset, r.key, r.value, r.timestamp) for r in b.records],
            b.delete_horizon,
        )
        for b in batches
    ]
    want = [
        (b.base, b.last, b.codec if b.records else 0, b.pid, b.epoch, b.seq, b.records, b.horizon)
        for b in model.batches
    ]
    assert got == want
    # model-free: every record as written (headers too), the latest per key as last written
    latest_written: dict[bytes, int] = {}
    for offset, (key, _, _) in sorted(model.written.items()):
        latest_written[key] = offset
    latest_kept: dict[bytes, int] = {}
    for b in batches:
        for r in b.records:
            assert (r.key, r.value, r.timestamp) == model.written[r.offset]
            assert r.headers == [(b"h", b"%d" % r.offset)]
            latest_kept[r.key] = r.offset
    for key, offset in latest_written.items():
        if key in latest_kept:
            assert latest_kept[key] == offset
        else:
            assert (
                model.written[offset][1] is None
            )  # only a removed tombstone makes a key disappear
    assert log.log_end_offset == max(model.written, default=-1) + 1


batch_st = st.tuples(
    st.sampled_from([0, 0, 1, 2, 3, 4]),  # codec
    st.booleans(),  # idempotent producer
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 4)), min_size=1, max_size=5
    ),  # (key, value or 0=tombstone)
)
step_st = st.one_of(
    st.tuples(st.just("append"), st.lists(batch_st, min_size=1, max_size=4)),
    st.tuples(st.just("roll")),  # small segments, which a cleaning groups
    st.tuples(
        st.just("clean"), st.integers(0, 2 * RETENTION), st.integers(-1, 40)
    ),  # clock step, crash point
)


def append(log: Log, model: Model, batches, seqs: dict[int, int]) -> None:
    for codec, idempotent, recs in batches:
        offset = log.log_end_offset
        records = [
            (b"k%d" % k, None if v == 0 else b"v%d-%d" % (v, offset + i), NOW + i)
            for i, (k, v) in enumerate(recs)
        ]
        pid = PID if idempotent else -1
        seq = seqs.get(pid, 0) if idempotent else -1
        blob = build(
            records,
            codec=codec,
            producer_id=pid,
            producer_epoch=3 if idempotent else -1,
            base_sequence=seq,
            headers=[[(b"h", b"%d" % (offset + i))] for i in range(len(records))],
        )
        info = log.append(blob, leader_epoch=0, now_ms=NOW)
        # (headers carry the offset they are stored at: check() compares them record by record)
        assert info.first_offset == offset
        if idempotent:
            seqs[pid] = seq + len(records)
            model.last_of_producer[pid] = info.last_offset
        model.batches.append(
            ModelBatch(
                offset,
                info.last_offset,
                codec,
                pid,
                3 if idempotent else -1,
                seq,
                [(offset + i, k, v, ts) for i, (k, v, ts) in enumerate(records)],
            )
        )
        for i, (k, v, ts) in enumerate(records):
            model.written[offset + i] = (k, v, ts)


def install_until(log: Log, plan, crash_at: int) -> bool:
    """Do the first ``crash_at`` steps of LogCleaner.install by hand (each group's .cleaned ->
    .swap; then per group: each old segment's files -> .deleted, .swap -> .log; the checkpoint);
    True when every step was done."""
    steps = []
    for _, cleaned in plan.cleaned:
        steps.append(lambda c=cleaned: os.replace(c, swap_of(c)))
    for bases, cleaned in plan.cleaned:
        for base in bases:
            for suffix in (".log", ".index", ".timeindex"):
                steps.append(
                    lambda f=log.dir / f"{base:020d}{suffix}": os.replace(f, f"{f}.deleted")
                )
        steps.append(
            lambda c=cleaned: os.replace(swap_of(c), log.dir / c.name.removesuffix(".cleaned"))
        )
    steps.append(lambda: save_cleaner_offset(log.dir, plan.cleaner_offset))
    for step in steps[:crash_at]:
        step()
    return crash_at >= len(steps)


def swap_of(cleaned: Path) -> Path:
    return cleaned.with_name(cleaned.name.replace(".cleaned", ".swap"))


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(step_st, min_size=2, max_size=14),
    segment_bytes=st.sampled_from([250, 500, 1200]),
    map_slots=st.sampled_from([3, 5, 1000]),
    io_buffer=st.sampled_from([100, 300, 1 << 16]),
    index_bytes=st.sampled_from([10 << 20, 48]),
)
def test_compaction_matches_model(steps, segment_bytes, map_slots, io_buffer, index_bytes):
    cfg = config(segment_bytes, index_bytes)
    cleaner = LogCleaner(dedupe_buffer_size=24 * map_slots, io_buffer_size=io_buffer)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "compacted-0"
        log = Log(path, cfg, now_ms=NOW)
        model, seqs, now = Model(), {}, NOW
        for step in steps:
            if step[0] == "append":
                append(log, model, step[1], seqs)
                check(log, model)
                continue
            if step[0] == "roll":
                log.roll(NOW)
                continue
            _, clock_step, crash_at = step
            now += clock_step
            segments = list(log.segments)
            plan = cleaner.prepare(log, now)
            if plan is None:
                continue
            model.first_dirty = max(model.first_dirty, log.log_start_offset)
            last_base = max(plan.sizes)
            limit = next(s.base_offset for s in segments if s.base_offset > last_base)
            next_base = {s.base_offset: n.base_offset for s, n in itertools.pairwise(segments)}
            group_span = {bases: (bases[0], next_base[bases[-1]]) for bases, _ in plan.cleaned}
            changes = model.cleaned(
                plan.cleaner_offset,
                limit,
                now,
                {end for bases, (_, end) in group_span.items() if len(bases) > 1},
            )
            merged = [bases for bases, _ in plan.cleaned if len(bases) > 1]
            if merged:
                event("segments cleaned in groups")
                assert all(sum(plan.sizes[b] for b in bases) <= segment_bytes for bases in merged)
            expected_bases = [
                s.base_offset
                for s in log.segments
                if not any(s.base_offset in bases[1:] for bases in merged)
            ]
            event(
                "partial map"
                if plan.cleaner_offset < segments[-1].base_offset
                else "whole dirty section mapped"
            )
            removed = sum(
                1
                for b in model.batches
                for r in b.records
                if r[2] is None and b.horizon is not None and now >= b.horizon
            )
            if removed:
                event("tombstones past their horizon")
            if crash_at < 0:
                assert cleaner.install(log, plan, now)
                model.apply(changes)
                model.first_dirty = plan.cleaner_offset
                check(log, model)
                assert [s.base_offset for s in log.segments] == expected_bases
                continue
            done = install_until(log, plan, crash_at)
            # a group whose .cleaned became .swap is installed on load, however far its swap went
            applied = {bases for bases, c in plan.cleaned if not c.exists()}
            if any(
                len(bases) > 1
                and swap_of(c).exists()
                and any((log.dir / f"{b:020d}.log").exists() for b in bases[1:])
                for bases, c in plan.cleaned
            ):
                event("crash with a .swap and old segments of its group on disk")
            checkpointed = done
            del log  # the process dies: files stay as they are (a .swap is completed on load)
            gc.collect()
            log = Log(path, cfg, clean_shutdown=False, now_ms=now)
            assert not list(path.glob("*.cleaned")) and not list(path.glob("*.swap"))
            if checkpointed:
                model.first_dirty = plan.cleaner_offset
            model.apply(
                changes,
                {
                    b.base
                    for b in model.batches
                    if any(start <= b.base < end for start, end in map(group_span.get, applied))
                },
            )
            # groups not swapped keep their segments; the rest of the plan is never installed
            if done:
                assert applied == set(group_span)
                assert [s.base_offset for s in log.segments] == expected_bases
            check(log, model)
        log.close()
        reopened = Log(path, cfg, clean_shutdown=False, now_ms=now)
        check(reopened, model)
        assert (path.parent / CLEANER_OFFSET_CHECKPOINT).exists() or model.first_dirty == 0
        reopened.close()
