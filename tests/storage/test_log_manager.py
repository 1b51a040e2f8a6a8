"""LogManager: dir lock, meta.properties, checkpoints, clean shutdown, offline dirs, retention."""

from __future__ import annotations

import asyncio
import os

import pytest
from spec import build_batch, parse_batches

from odradek.storage import LogConfig, LogManager, TopicPartition, errors
from odradek.storage.checkpoint import read_offsets

TP = TopicPartition("orders", 0)


def started(dirs, cfg=LogConfig()) -> LogManager:
    lm = LogManager([str(d) for d in dirs], cfg)
    lm.startup()
    return lm


def test_dir_lock(tmp_path):
    lm = started([tmp_path])
    with pytest.raises(errors.LogDirLocked):
        started([tmp_path])
    lm.shutdown()
    started([tmp_path]).shutdown()


def test_meta_properties(tmp_path):
    lm = started([tmp_path / "a", tmp_path / "b"])
    node, cluster = lm.ensure_meta_properties(None, None)
    assert node == 1 and len(cluster) == 22
    text = (tmp_path / "a" / "meta.properties").read_text()
    assert f"cluster.id={cluster}" in text and "node.id=1" in text and "version=1" in text
    assert lm.ensure_meta_properties(-1, None) == (1, cluster)
    with pytest.raises(errors.InconsistentMetaProperties):
        lm.ensure_meta_properties(2, None)
    with pytest.raises(errors.InconsistentMetaProperties):
        lm.ensure_meta_properties(1, "another")
    lm.shutdown()


def test_checkpoints_and_clean_shutdown(tmp_path):
    lm = started([tmp_path])
    log = lm.get_or_create_log(TP, LogConfig(segment_bytes=300), topic_id="AAAAAAAAAAAAAAAAAAAAAQ")
    assert (
        tmp_path / "orders-0" / "partition.metadata"
    ).read_text() == "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ"
    assert lm.get_or_create_log(TP) is log
    for i in range(10):
        log.append(build_batch([(b"k", b"v" * 50, i)]), leader_epoch=0, now_ms=0)
    log.maybe_increment_log_start_offset(3)
    lm.high_watermark = lambda tp: 10
    lm.shutdown()
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert read_offsets(tmp_path / "recovery-point-offset-checkpoint") == {("orders", 0): 10}
    assert read_offsets(tmp_path / "log-start-offset-checkpoint") == {("orders", 0): 3}
    assert read_offsets(tmp_path / "replication-offset-checkpoint") == {("orders", 0): 10}
    assert (tmp_path / "orders-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    lm = started([tmp_path])
    assert not (tmp_path / ".kafka_cleanshutdown").exists()  # a crash from now on is unclean
    log = lm.get_log(TP)
    assert (log.log_start_offset, log.log_end_offset) == (3, 10)
    lm.delete_log(TP)
    assert lm.get_log(TP) is None and not (tmp_path / "orders-0").exists()
    lm.shutdown()


def test_offline_dir_fails_alone(tmp_path):
    lm = started([tmp_path / "a", tmp_path / "b"])
    one = lm.get_or_create_log(TopicPartition("t", 0))
    two = lm.get_or_create_log(TopicPartition("t", 1))
    assert one.dir.parent != two.dir.parent
    # The disk under dir a "fails": writes through a read-only descriptor raise OSError (EBADF).
    read_only = os.open(one.active.path, os.O_RDONLY)
    one.active.fd = read_only
    with pytest.raises(errors.KafkaStorageError) as exc:
        one.append(build_batch([(b"k", b"v", 1)]), leader_epoch=0, now_ms=0)
    assert exc.value.error_code == errors.KafkaStorageError.error_code
    assert one.dir.parent in lm.offline_dirs
    with pytest.raises(errors.KafkaStorageError):
        one.read(0, 100)
    with pytest.raises(errors.KafkaStorageError):
        lm.get_or_create_log(TopicPartition("t", 0))
    assert two.append(build_batch([(b"k", b"v", 1)]), leader_epoch=0, now_ms=0).first_offset == 0
    three = lm.get_or_create_log(TopicPartition("t", 2))
    assert three.dir.parent == two.dir.parent
    lm.shutdown()
    os.close(read_only)


def test_retention_by_time_and_size_with_delete_delay(tmp_path):
    cfg = LogConfig(segment_bytes=300, retention_ms=1000, file_delete_delay_ms=500)
    lm = started([tmp_path], cfg)
    log = lm.get_or_create_log(TP)
    for ts in (100, 200, 300, 5000, 5100, 5200):
        log.append(build_batch([(b"k", b"v" * 150, ts)]), leader_epoch=0, now_ms=ts)
    assert len(log.segments) == 6
    assert lm.cleanup_logs(now_ms=5300) == 3  # segments whose largest timestamp is older than 1 s
    assert log.log_start_offset == 3
    assert len(list(log.dir.glob("*.deleted"))) == 9
    log.remove_deleted_files(5700)
    assert len(list(log.dir.glob("*.deleted"))) == 9
    log.remove_deleted_files(5800)
    assert not list(log.dir.glob("*.deleted"))
    log.update_config(LogConfig(segment_bytes=300, retention_bytes=log.active.size))
    assert log.delete_old_segments(now_ms=5300) == 2  # never the active segment
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (5, 6, 1)
    assert parse_batches(log.read(5, 1000).regions[0].read_bytes())[0].base_offset == 5
    lm.shutdown()


def test_run_background_flushes_and_checkpoints(tmp_path):
    lm = LogManager([str(tmp_path)], LogConfig(segment_bytes=300), checkpoint_interval_ms=1)
    lm.startup()
    log = lm.get_or_create_log(TP)
    for i in range(4):
        log.append(build_batch([(b"k", b"v" * 150, i)]), leader_epoch=0, now_ms=0)

    async def run() -> None:
        task = asyncio.create_task(lm.run_background())
        for _ in range(200):
            await asyncio.sleep(0.1)
            if (tmp_path / "recovery-point-offset-checkpoint").exists():
                break
        task.cancel()

    asyncio.run(asyncio.wait_for(run(), timeout=40))
    assert log.recovery_point >= log.active.base_offset  # rolled segments were fsynced
    assert (
        read_offsets(tmp_path / "recovery-point-offset-checkpoint")[("orders", 0)]
        == log.recovery_point
    )
    lm.shutdown()


def test_startup_loads_many_partitions_in_parallel(tmp_path):
    lm = started([tmp_path])
    for p in range(12):
        lm.get_or_create_log(TopicPartition("many", p)).append(
            build_batch([(b"k", b"v", p)] * (p + 1)), leader_epoch=0, now_ms=0
        )
    lm.checkpoint()
    lm._unlock_all()  # simulate a crash: no shutdown, files left as they are
    lm2 = started([tmp_path])
    assert sorted(lg.log_end_offset for lg in lm2.all_logs()) == list(range(1, 13))
    lm2.shutdown()


def test_deleted_log_answers_storage_error_without_taking_the_dir_offline(tmp_path):
    lm = started([tmp_path])
    log = lm.get_or_create_log(TP)
    log.append(build_batch([(b"k", b"v", 1)]), leader_epoch=0, now_ms=0)
    lm.delete_log(TP)
    with pytest.raises(errors.KafkaStorageError):
        log.flush()  # as a background flush racing the deletion would
    assert not lm.offline_dirs
    assert lm.get_or_create_log(TP).log_end_offset == 0
    lm.shutdown()
