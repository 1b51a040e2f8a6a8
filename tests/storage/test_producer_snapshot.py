"""Producer ``.snapshot`` files in Kafka's format, checked by a parser written here from Kafka's
ProducerSnapshot.json (version 1): int16 version, uint32 CRC32C of everything after it, then
an int32 count of entries (producerId int64, epoch int16, lastSequence int32, lastOffset int64,
offsetDelta int32, timestamp int64, coordinatorEpoch int32, currentTxnFirstOffset int64)."""

from __future__ import annotations

import struct

from crc32c import crc32c
from spec import build_batch

from odradek.storage import Log, LogConfig

NOW = 1_700_000_000_000


def parse_snapshot(data: bytes) -> list[tuple[int, ...]]:
    version, crc = struct.unpack_from(">hI", data, 0)
    assert version == 1
    assert crc == crc32c(data[6:])
    (count,) = struct.unpack_from(">i", data, 6)
    entries = [struct.unpack_from(">qhiqiqiq", data, 10 + i * 46) for i in range(count)]
    assert len(data) == 10 + count * 46
    return entries


def test_snapshot_is_kafkas_producer_snapshot_v1(tmp_path) -> None:
    path = tmp_path / "t-0"
    log = Log(path, LogConfig())
    log.append(
        build_batch([(b"k", b"v", NOW)] * 3, producer_id=1, producer_epoch=0, base_sequence=0),
        leader_epoch=0,
        now_ms=NOW,
    )
    log.append(
        build_batch([(b"k", b"v", NOW + 5)] * 2, producer_id=1, producer_epoch=0, base_sequence=3),
        leader_epoch=0,
        now_ms=NOW,
    )
    # a producer id without sequence numbers (a coordinator's write; clients may not send one):
    # an entry, but no batch to deduplicate against
    log.append(
        build_batch([(b"k", b"v", NOW + 9)], producer_id=2, producer_epoch=3),
        leader_epoch=0,
        now_ms=NOW,
        from_client=False,
    )
    log.close()
    entries = parse_snapshot((path / "00000000000000000006.snapshot").read_bytes())
    assert sorted(entries) == [
        (1, 0, 4, 4, 1, NOW + 5, -1, -1),  # last batch: sequences 3-4 at offsets 3-4
        (2, 3, -1, -1, 0, NOW + 9, -1, -1),
    ]
    reopened = Log(path, LogConfig(), clean_shutdown=True, recovery_point=6)
    producers = reopened.producer_state.producers
    assert producers[2].epoch == 3 and not producers[2].batches
    retry = reopened.append(
        build_batch([(b"k", b"v", NOW + 5)] * 2, producer_id=1, producer_epoch=0, base_sequence=3),
        leader_epoch=0,
        now_ms=NOW,
    )
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (3, 4)
    reopened.close()


def test_a_snapshot_with_a_bad_crc_is_ignored_and_state_rebuilt_from_the_log(tmp_path) -> None:
    path = tmp_path / "t-0"
    log = Log(path, LogConfig())
    log.append(
        build_batch([(b"k", b"v", NOW)] * 2, producer_id=1, producer_epoch=0, base_sequence=0),
        leader_epoch=0,
        now_ms=NOW,
    )
    log.close()
    snapshot = path / "00000000000000000002.snapshot"
    data = bytearray(snapshot.read_bytes())
    data[-1] ^= 0xFF
    snapshot.write_bytes(bytes(data))
    reopened = Log(path, LogConfig(), clean_shutdown=True, recovery_point=2)
    retry = reopened.append(
        build_batch([(b"k", b"v", NOW)] * 2, producer_id=1, producer_epoch=0, base_sequence=0),
        leader_epoch=0,
        now_ms=NOW,
    )
    assert retry.duplicate and retry.first_offset == 0
    reopened.close()


def test_producer_state_is_rebuilt_from_recovered_and_from_trusted_segments(tmp_path) -> None:
    path = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=300)
    log = Log(path, cfg)
    sequences = {1: 0, 2: 0}
    for i in range(12):  # two producers interleaved over several segments
        pid = 1 + i % 2
        log.append(
            build_batch(
                [(b"k", b"v%d" % i, NOW)] * 2,
                producer_id=pid,
                producer_epoch=0,
                base_sequence=sequences[pid],
            ),
            leader_epoch=0,
            now_ms=NOW,
        )
        sequences[pid] += 2
    middle = log.segments[len(log.segments) // 2].base_offset
    del log  # crash
    for snapshot in path.glob("*.snapshot"):
        snapshot.unlink()  # nothing to start from: every producer batch is replayed
    # below ``middle`` the segments are trusted (headers read), from it they are recovered
    reopened = Log(path, cfg, clean_shutdown=False, recovery_point=middle)
    assert all(seg.recovered_producer_batches is None for seg in reopened.segments)
    for pid in (1, 2):
        entry = reopened.producer_state.producers[pid]
        assert entry.last_seq == sequences[pid] - 1
    retry = reopened.append(
        build_batch(
            [(b"k", b"v11", NOW)] * 2,
            producer_id=2,
            producer_epoch=0,
            base_sequence=sequences[2] - 2,
        ),
        leader_epoch=0,
        now_ms=NOW,
    )
    assert retry.duplicate and retry.first_offset == 22
    reopened.close()
