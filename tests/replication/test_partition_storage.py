"""The state machine over storage's real Log: what the broker runs, bytes as they travel."""

from __future__ import annotations

from odradek.coordinator.batches import encode_batch
from odradek.protocol.errors import ErrorCode
from odradek.replication.partition import EpochQuery, FetchPosition, Partition
from odradek.replication.partition_state import PartitionState
from odradek.storage import Log, LogConfig, LogManager, TopicPartition

NOW = 1_700_000_000_000
REPLICAS = (0, 1)


def log_bytes(log: Log) -> bytes:
    data = log.read(log.log_start_offset, 1 << 30)
    return b"".join(region.read_bytes() for region in data.regions)


def replicate(follower: Partition, leader: Partition) -> None:
    """One follower's conversation with its leader until it has nothing more to fetch."""
    while True:
        req = follower.next_follower_request()
        if isinstance(req, EpochQuery):
            answer = leader.last_offset_for_leader_epoch(req.current_leader_epoch, req.leader_epoch)
            follower.on_epoch_end_offset(req, *answer)
            continue
        assert isinstance(req, FetchPosition)
        data = leader.fetch_for_follower(
            follower.node_id, req.fetch_offset, req.current_leader_epoch, 1 << 20, NOW
        )
        records = b"".join(region.read_bytes() for region in data.regions)
        follower.on_fetch_response(req, records, leader.high_watermark, NOW)
        if not records:
            return


def test_replication_between_real_logs_commits_then_truncates_a_divergent_tail(tmp_path) -> None:
    tp = TopicPartition("t", 0)
    log0 = Log(tmp_path / "b0" / tp.dir_name, LogConfig())
    log1 = Log(tmp_path / "b1" / tp.dir_name, LogConfig())
    first = PartitionState(0, 0, REPLICAS, REPLICAS, 0)
    p0 = Partition(log0, 0, first, NOW)
    p1 = Partition(log1, 1, first, NOW)
    for i in range(3):
        p0.append_records_to_leader(encode_batch([(b"k", b"%d" % i)], NOW), -1, NOW)
    assert p0.check_enough_replicas_reach_offset(3, 0) == (False, ErrorCode.none)
    replicate(p1, p0)
    assert (p0.high_watermark, p1.high_watermark) == (3, 3)
    assert p0.check_enough_replicas_reach_offset(3, 0) == (True, ErrorCode.none)
    assert log_bytes(log1) == log_bytes(log0)

    # Broker 0 appends two batches nobody copies, then broker 1 is elected (epoch 1)
    # and writes its own: offset 3 now differs between the two logs.
    for i in range(2):
        p0.append_records_to_leader(encode_batch([(b"lost", b"%d" % i)], NOW), 1, NOW)
    second = PartitionState(1, 1, (1,), REPLICAS, 1)
    p1.apply_state(second, NOW)
    p1.append_records_to_leader(encode_batch([(b"k", b"new")], NOW), 1, NOW)
    p0.apply_state(second, NOW)
    assert p0.next_follower_request() == EpochQuery(1, 1, 0)
    replicate(p0, p1)
    assert log0.log_end_offset == 4
    assert log0.leader_epoch_cache.entries == [(0, 0), (1, 3)]
    assert log_bytes(log0) == log_bytes(log1)
    log0.close()
    log1.close()


def test_a_restarted_broker_starts_from_its_checkpointed_high_watermark(tmp_path) -> None:
    """replication-offset-checkpoint is written with each partition's high watermark and read
    back at start-up: a restarted leader does not hide what was committed, and a checkpoint
    beyond the log end (a log cut short since) is capped at it."""
    tp, other = TopicPartition("t", 0), TopicPartition("t", 1)
    manager = LogManager([str(tmp_path)], LogConfig())
    manager.startup()
    logs = manager.get_or_create_logs([tp, other], LogConfig())
    for log in logs:
        for i in range(5):
            log.append(encode_batch([(b"k", b"%d" % i)], NOW), leader_epoch=0, now_ms=NOW)
    manager.high_watermark = {tp: 3, other: 5}.get
    manager.shutdown()

    restarted = LogManager([str(tmp_path)], LogConfig())
    restarted.startup()
    assert restarted.checkpointed_high_watermarks == {tp: 3, other: 5}
    state = PartitionState(0, 1, REPLICAS, REPLICAS, 0)
    log0, log1 = restarted.get_or_create_logs([tp, other], LogConfig())
    assert Partition(log0, 0, state, NOW, checkpointed_high_watermark=3).high_watermark == 3
    assert Partition(log1, 0, state, NOW, checkpointed_high_watermark=9).high_watermark == 5
    assert Partition(log1, 0, state, NOW).high_watermark == 0  # no checkpoint: log start
    restarted.shutdown()
