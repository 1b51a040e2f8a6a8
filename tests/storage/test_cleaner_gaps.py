"""Offsets with gaps from compaction: a follower copies a compacted leader's batches (holes in
offsets, fewer records than lastOffsetDelta + 1) and keeps them through recovery, as Kafka's
follower and recovery do; offsets going backwards or overlapping are still refused or cut."""

from __future__ import annotations

import struct

import pytest
from codec_spec import build, parse
from test_cleaner import CFG, NOW, clean, records_of

from odradek.storage import Log, LogConfig, errors

FOLLOWER_CFG = LogConfig(segment_bytes=400, index_interval_bytes=50)


def compacted_leader(tmp_path) -> Log:
    leader = Log(tmp_path / "leader-0", CFG, now_ms=NOW)
    for round_ in range(6):
        leader.append(
            build([(b"a", b"a%d" % round_, NOW), (b"c%d" % round_, b"c", NOW)]),
            leader_epoch=0,
            now_ms=NOW,
        )
    leader.roll(NOW)
    assert clean(leader, NOW)
    return leader


def leader_batches(leader: Log) -> list[bytes]:
    """The leader's batches as a follower fetches them, each one's bytes."""
    data = b"".join(r.read_bytes() for r in leader.read(leader.log_start_offset, 1 << 30).regions)
    out, pos = [], 0
    while pos < len(data):
        end = pos + 12 + struct.unpack_from(">i", data, pos + 8)[0]
        out.append(data[pos:end])
        pos = end
    return out


def test_follower_appends_and_recovers_compacted_batches(tmp_path):
    leader = compacted_leader(tmp_path)
    expected = records_of(leader)
    offsets = [offset for offset, _, _ in expected]
    assert offsets != list(range(offsets[0], offsets[-1] + 1))  # the leader's log has holes
    batches = leader_batches(leader)
    assert any(
        len(b.records) < b.last_offset - b.base_offset + 1 for b in parse(b"".join(batches))
    )  # thinned
    follower = Log(tmp_path / "follower-0", FOLLOWER_CFG, now_ms=NOW)
    for batch in batches:  # one batch per fetch, so the follower rolls segments between gaps
        follower.append(batch, leader_epoch=0, now_ms=NOW, assign_offsets=False)
    assert records_of(follower) == expected
    end = follower.log_end_offset
    assert len(follower.segments) > 1
    # a crash: no close, so every segment is recovered, none is below a cleaner offset of its own
    reopened = Log(tmp_path / "follower-0", FOLLOWER_CFG, clean_shutdown=False, now_ms=NOW)
    assert reopened.cleaner_offset == 0
    assert records_of(reopened) == expected
    assert reopened.log_end_offset == end
    reopened.close()
    leader.close()


def test_follower_refuses_offsets_going_backwards(tmp_path):
    follower = Log(tmp_path / "f-0", FOLLOWER_CFG, now_ms=NOW)
    follower.append(
        build([(b"k", b"v", NOW)] * 3, base_offset=10),
        leader_epoch=0,
        now_ms=NOW,
        assign_offsets=False,
    )
    assert follower.log_end_offset == 13
    for base in (5, 12):  # before the log end, and overlapping its last batch
        with pytest.raises(errors.InvalidRecord):
            follower.append(
                build([(b"k", b"v", NOW)], base_offset=base),
                leader_epoch=0,
                now_ms=NOW,
                assign_offsets=False,
            )
    follower.append(
        build([(b"k", b"v", NOW)], base_offset=20), leader_epoch=0, now_ms=NOW, assign_offsets=False
    )
    assert follower.log_end_offset == 21
    follower.close()


def test_recovery_cuts_a_batch_that_overlaps_the_previous_one(tmp_path):
    first = build([(b"k", b"v", NOW)] * 3, base_offset=0)
    gap = build([(b"k", b"v", NOW)], base_offset=7)
    overlap = build([(b"k", b"v", NOW)], base_offset=7)
    path = tmp_path / "t-0"
    path.mkdir()
    (path / f"{0:020d}.log").write_bytes(first + gap + overlap)
    log = Log(path, FOLLOWER_CFG, clean_shutdown=False, now_ms=NOW)
    assert [offset for offset, _, _ in records_of(log)] == [0, 1, 2, 7]
    assert log.log_end_offset == 8
    assert (path / f"{0:020d}.log").stat().st_size == len(first) + len(gap)
    log.close()
